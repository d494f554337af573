"""How a failed playbook run is judged: permanent (a person must change the spec) or worth retrying."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Playbooks mark failures that no retry can fix, e.g.
#   fail: msg="[kubenest:permanent:Unsatisfiable] promotePolicies[0] wants 3 nodes but only 1 is free"
PERMANENT_MARKER = re.compile(r"\[kubenest:permanent:([A-Za-z][A-Za-z0-9]{0,127})\]\s*(.*)", re.DOTALL)
# The node_promote role names the step at which a node's promotion or return failed:
#   [kubenest:step:Kubelet] promoting kn-w1 failed at step Kubelet and was rolled back: ...
STEP_MARKER = re.compile(r"\[kubenest:step:([A-Za-z][A-Za-z0-9]{0,63})\]")
# kosmos.kubenest.workload_rollout names the reason a pod cannot start:
#   StatefulSet tenants/vc1-etcd cannot come up: pod vc1-etcd-0: ImagePullBackOff: Back-off pulling image ...
POD_MARKER = re.compile(r"cannot come up: pod [a-z0-9][-a-z0-9.]*: ([A-Z][A-Za-z]{0,63}): ")
MESSAGE_LIMIT = 512


@dataclass(frozen=True)
class Permanent:
    reason: str
    message: str


def summarize(text: object, limit: int = MESSAGE_LIMIT) -> str:
    """One line of at most `limit` characters: status messages and events are for people, not for dumps."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def parse_permanent(message: object) -> Permanent | None:
    if not isinstance(message, str):
        return None
    match = PERMANENT_MARKER.search(message)
    if match is None:
        return None
    return Permanent(reason=match.group(1), message=summarize(match.group(2)) or match.group(1))


def failure_reason(message: str, default: str) -> str:
    """Condition reason for a failed run: NodeStepFailed when a node's promotion or return names its step,
    the pod's own reason (ImagePullBackOff, CrashLoopBackOff, Unschedulable ...) when one could not start."""
    if STEP_MARKER.search(message):
        return "NodeStepFailed"
    pod = POD_MARKER.search(message)
    return pod.group(1) if pod else default


def failure_messages(res: object) -> list[str]:
    """Messages of a failed task result, including those of its failed loop items (asserts in loops)."""
    if not isinstance(res, dict):
        return []
    messages = [res["msg"]] if isinstance(res.get("msg"), str) else []
    for item in res.get("results") or []:
        if isinstance(item, dict) and item.get("failed") and isinstance(item.get("msg"), str):
            messages.append(item["msg"])
    return messages


def backoff(retry: int, base: float, maximum: float) -> float:
    """Delay before retry number `retry` (0-based): base, 2*base, 4*base ... capped at `maximum`."""
    return float(min(maximum, base * (2 ** min(max(retry, 0), 32))))
