"""VirtualCluster status patches, built as plain data.

The operator owns phase, message, reason, observedGeneration, endpoint, nodes, nodeCount, kubeconfigSecretRef
and progress: it merge-patches only those, on the status subresource, and sets keys it does not know to null
rather than leaving stale values behind. Conditions are a list keyed by type, so they are server-side applied
(`conditions_apply_body`): the operator's field manager owns its Ready entry and nothing else.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .progress import Progress

PENDING, PREPARING, INITIALIZED, COMPLETED, UPDATING, DELETING, FAILED = (
    "Pending", "Preparing", "Initialized", "Completed", "Updating", "Deleting", "Failed")
READY, NODES_READY, ADDONS_READY, SPREAD = "Ready", "NodesReady", "AddonsReady", "ControlPlaneSpread"
# Conditions a run sets besides Ready; every status apply carries all of them.
OWNED_CONDITIONS = (NODES_READY, ADDONS_READY, SPREAD)
API_VERSION, KIND = "kosmos.io/v1alpha1", "VirtualCluster"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _patch(**status: Any) -> dict[str, Any]:
    return {"status": status}


SUMMARY_TASK_CHARS = 48  # the task's name in the Progress column, cut to keep `kubectl get vc` on one line


def progress_summary(done: int, total: int | None, task: str | None) -> str:
    """The Progress column of `kubectl get vc`: tasks done of the estimated total, then the running task (a
    promotion's tasks name their step, "Step Drain"); "?" while no earlier run gave an estimate."""
    counted = f"{done}/{total if total else '?'}"
    if not task:
        return counted
    return f"{counted} {task if len(task) <= SUMMARY_TASK_CHARS else task[:SUMMARY_TASK_CHARS - 1] + '…'}"


def progress_fields(run_id: str, playbook: str, started_at: str, progress: Progress) -> dict[str, Any]:
    return {
        "runID": run_id,
        "playbook": playbook,
        "currentRole": progress.current_role,
        "currentTask": progress.current_task,
        "tasksDone": progress.tasks_done,
        "tasksTotal": progress.tasks_total,
        "summary": progress_summary(progress.tasks_done, progress.tasks_total, progress.current_task),
        "startedAt": started_at,
    }


def queued(phase: str | None) -> dict[str, Any]:
    """Waiting for a runner slot; a fresh object shows Pending until its first run starts."""
    return _patch(**({"phase": PENDING} if not phase else {}), message="waiting for a free runner slot")


def run_started(phase: str, run_id: str, playbook: str, started_at: str, progress: Progress,
                state: str) -> dict[str, Any]:
    return _patch(phase=phase, reason=None, message=f"running {playbook} (state {state})",
                  progress=progress_fields(run_id, playbook, started_at, progress))


def progressed(run_id: str, playbook: str, started_at: str, progress: Progress) -> dict[str, Any]:
    return _patch(progress=progress_fields(run_id, playbook, started_at, progress))


def node_entries(reported: Sequence[Any]) -> list[dict[str, Any]]:
    """The playbook's node report ({name, ip, ready}) as status.nodes entries; anything malformed is dropped."""
    entries = []
    for node in reported or ():
        if isinstance(node, Mapping) and node.get("name"):
            entry = {"name": str(node["name"]), "ready": node.get("ready") is True}
            if node.get("ip"):
                entry["ip"] = str(node["ip"])
            entries.append(entry)
    return entries


def succeeded(*, generation: int | None, endpoint: str | None, nodes: Sequence[Mapping[str, Any]], wanted: int,
              secret_name: str, secret_key: str, progress: dict[str, Any], phase: str = COMPLETED,
              message: str | None = None, waiting_since: str | None = None,
              kubernetes_version: str | None = None) -> dict[str, Any]:
    ready = sum(1 for node in nodes if node.get("ready"))
    return _patch(
        phase=phase, reason=None, message=message, observedGeneration=generation, waitingSince=waiting_since,
        endpoint=endpoint, kubernetesVersion=kubernetes_version, nodes=[dict(node) for node in nodes],
        nodeCount=len(nodes),
        nodesReady=f"{ready}/{wanted}",
        kubeconfigSecretRef={"name": secret_name, "key": secret_key},
        # The finished run's count becomes the next run's estimate of tasksTotal.
        progress={**progress, "currentRole": None, "currentTask": None, "tasksTotal": progress["tasksDone"],
                  "summary": f"{progress['tasksDone']}/{progress['tasksDone']} done"},
    )


def failed_permanently(*, generation: int | None, reason: str, message: str,
                       progress: dict[str, Any]) -> dict[str, Any]:
    return _patch(phase=FAILED, reason=reason, message=message, observedGeneration=generation, progress=progress)


def failed_transiently(*, message: str, delay: float, progress: dict[str, Any]) -> dict[str, Any]:
    # The phase stays Preparing/Updating/Deleting: the work is not given up, it is retried.
    return _patch(reason="RunFailed", message=f"{message} (retrying in {delay:.0f}s)", progress=progress)


def condition(type_: str, status: str, reason: str, message: str, generation: int | None,
              previous: Sequence[Mapping[str, Any]] | None, at: str | None = None) -> dict[str, Any]:
    """A condition whose lastTransitionTime only moves when its status changes."""
    before = next((c for c in previous or () if c.get("type") == type_), None)
    changed = before is None or before.get("status") != status or not before.get("lastTransitionTime")
    result = {
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": (at or now()) if changed else before["lastTransitionTime"],
    }
    if generation is not None:
        result["observedGeneration"] = generation
    return result


def conditions_apply_body(namespace: str, name: str, conditions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"namespace": namespace, "name": name},
            "status": {"conditions": [dict(c) for c in conditions]}}


def addons_condition(addons: Any, wanted: int) -> tuple[str, str, str]:
    """AddonsReady (status, reason, message) from a run's `addons` result."""
    if not isinstance(addons, Mapping):
        return "Unknown", "NotReported", "the run reported no add-ons"
    ready = addons.get("ready") in (True, "True", "true")
    reason = str(addons.get("reason") or ("AddonsReady" if ready else "AddonsNotReady"))
    message = str(addons.get("message") or "")
    if not ready and wanted == 0:
        reason = "NoNodes"  # installed; nothing to run on until nodes join
    return ("True" if ready else "False"), reason, message


def spread_condition(api_servers: Any, etcd: Any = None) -> tuple[str, str, str] | None:
    """ControlPlaneSpread (status, reason, message) from a run's `apiServers` and `etcd` results: whether each
    API server and each etcd member has a host node of its own. None when the run reported no API servers (an
    older collection)."""
    counted = []
    for what, reported, key in (("API servers", api_servers, "replicas"), ("etcd members", etcd, "members")):
        if not isinstance(reported, Mapping):
            continue
        try:
            counted.append((what, int(reported.get(key, 1)), int(reported.get("hostNodes", 0))))
        except (TypeError, ValueError):
            continue
    if not counted or counted[0][0] != "API servers":
        return None
    several = [(what, replicas, nodes) for what, replicas, nodes in counted if replicas > 1]
    if not several:
        return "True", "SingleReplica", "1 API server and 1 etcd member: nothing to spread"
    short = [(what, replicas, nodes) for what, replicas, nodes in several if replicas > nodes]
    if not short:
        return "True", "OnePerHostNode", "; ".join(
            f"{replicas} {what}, each on a host node of its own ({nodes} schedulable in the placement)"
            for what, replicas, nodes in several)
    shared = "; ".join(f"{replicas} {what} share {nodes} schedulable host node(s) of their placement"
                       for what, replicas, nodes in short)
    return "False", "TooFewHostNodes", f"{shared}: losing one node may stop several; add host nodes for one each"


def addons_allow_ready(addons_status: str | None, wanted: int) -> bool:
    """A virtual cluster with nodes is Ready only when its add-ons are; one without needs its control plane
    alone."""
    return wanted == 0 or addons_status == "True"


@dataclass(frozen=True)
class Readiness:
    """Where a virtual cluster stands from its nodes and add-ons: the phase, its message, and the NodesReady and
    Ready conditions as (status, reason, message)."""

    phase: str
    message: str | None
    nodes: tuple[str, str, str]
    ready: tuple[str, str, str]


def readiness(ready: int, wanted: int, addons: tuple[str, str, str] | None, *, reconciled: str,
              not_ready: tuple[str, str], satisfied: bool = True, waiting: str = "", note: str = "") -> Readiness:
    """The one decision both a run's report and the look at the nodes make (pure).

    Ready means what a user would check by hand: never True with fewer Ready nodes than asked for, nor with nodes
    but no working add-ons (DNS). `addons`: AddonsReady as (status, reason, message), None when unknown;
    `reconciled`: Ready's message when all is well; `not_ready`: NodesReady's (reason, message) while nodes are
    not Ready; `satisfied` False: the nodes asked for are not to be had (the host has too few, `waiting` says
    why), which makes the phase Pending; `note`: added to NodesReady's message (nodes kept back, say).
    """
    def noted(condition: tuple[str, str, str]) -> tuple[str, str, str]:
        return (*condition[:2], f"{condition[2]}; {note}") if note else condition

    if ready >= wanted:
        nodes = noted(("True", "AllNodesReady", f"{ready} of {wanted} nodes Ready"))
        if addons is not None and not addons_allow_ready(addons[0], wanted):
            return Readiness(INITIALIZED, f"add-ons not ready: {addons[2]}", nodes,
                             ("False", addons[1] or "AddonsNotReady", addons[2]))
        return Readiness(COMPLETED, None, nodes, ("True", "Reconciled", reconciled))
    if not satisfied:
        message = f"waiting for nodes: {waiting or f'{ready} of {wanted} nodes available'}"
        nodes = noted(("False", "WaitingForNodes", waiting or message))
        return Readiness(PENDING, message, nodes, nodes)
    nodes = noted(("False", *not_ready))
    return Readiness(INITIALIZED, not_ready[1], nodes, nodes)
