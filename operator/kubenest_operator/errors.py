"""How a failed playbook run is judged: permanent (a person must change the spec or the cause) or worth retrying."""

from __future__ import annotations

from dataclasses import dataclass

# The markers a failed task's message may carry, defined once for the collection and the operator.
from ansible_collections.kosmos.kubenest.plugins.module_utils.run_result import PERMANENT, POD, STEP

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
    match = PERMANENT.search(message)
    if match is None:
        return None
    return Permanent(reason=match.group(1), message=summarize(match.group(2)) or match.group(1))


def failure_reason(message: str, default: str) -> str:
    """Condition reason for a failed run: NodeStepFailed when a node's promotion or return names its step,
    the pod's own reason (ImagePullBackOff, CrashLoopBackOff, Unschedulable ...) when one could not start."""
    if STEP.search(message):
        return "NodeStepFailed"
    pod = POD.search(message)
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
