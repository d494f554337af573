"""The look at every VirtualCluster between runs: one kopf timer, one assessment (health.py).

Runs report a virtual cluster when they end; between runs nothing else would notice a node going NotReady, a
control plane that breaks or certificates that come due. While a virtual cluster is built, and not being deleted
or given up on, the timer looks every --resync-interval (its certificates every --cert-check-interval):

- the tenant's Nodes: status.nodes, nodesReady, the phase and the NodesReady and Ready conditions follow them,
  without a run;
- the control plane: anything found sets Ready=False, reason ControlPlaneDegraded, with what was found as the
  message, and Ready comes back once a look finds nothing (a pod its controller replaced, a tenant API answering
  again). An object that is gone or was changed by someone else is repaired by a run, as a spec change would
  be; a repair that did not help is tried again only after a growing pause, never in a loop;
- certificates inside their renewal window: a run re-issues them and rolls the components onto them.

Each part acts only on what it set itself (the Ready and NodesReady reasons below), never on a run's report.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from . import events, health
from . import status as st
from .context import Context
from .converge import converge, set_ready
from .errors import backoff, summarize
from .extravars import plain
from .kube import GROUP, VERSION, VIRTUALCLUSTERS, http_error
from .settings import Config
from .slots import exclusive_run

DEGRADED = "ControlPlaneDegraded"  # the Ready reason of a look
NODE_NOT_READY = "NodeNotReady"  # the NodesReady reason of a look


@dataclass
class Pace:
    """When each part of the look is next due, and how repairs back off: per VirtualCluster, in kopf's memo."""
    look_at: float = 0.0
    certificates_at: float = 0.0
    repairs: int = 0
    repair_at: float = 0.0


def settled(body: kopf.Body) -> bool:
    """A control plane that was built and is not being deleted or given up on."""
    status = plain(body.get("status") or {})
    if body.metadata.get("deletionTimestamp") or not status.get("kubeconfigSecretRef"):
        return False
    given_up = status.get("phase") == st.FAILED and status.get("observedGeneration") == body.metadata.get("generation")
    return not given_up


def _wanted(status: dict[str, Any]) -> int:
    try:
        return int(str(status.get("nodesReady", "")).split("/")[1])
    except (IndexError, ValueError):
        return len(status.get("nodes") or [])


async def follow_nodes(ctx: Context, body: kopf.Body, ready_now: dict[str, bool], logger: logging.Logger) -> bool:
    """Move the status with the tenant's Nodes (`ready_now`); True when it changed."""
    status = plain(body.get("status") or {})
    nodes = status.get("nodes") or []
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ours = (conditions.get(st.NODES_READY) or {}).get("reason") == NODE_NOT_READY
    if not nodes or not (status.get("phase") == st.COMPLETED or (status.get("phase") == st.INITIALIZED and ours)):
        return False  # nothing promoted, or a run is (or will be) reporting
    entries = [dict(node, ready=bool(ready_now.get(node.get("name")))) for node in nodes]
    if entries == nodes:
        return False
    wanted = _wanted(status)
    ready = sum(1 for node in entries if node["ready"])
    generation = status.get("observedGeneration")
    not_ready = [node["name"] for node in entries if not node["ready"]]
    addons = conditions.get(st.ADDONS_READY)
    decided = st.readiness(
        ready, wanted, (addons.get("status"), addons.get("reason"), addons.get("message") or "") if addons else None,
        reconciled=f"{ready} of {wanted} nodes Ready",
        not_ready=(NODE_NOT_READY, f"{', '.join(not_ready)} not Ready in the virtual cluster "
                                   f"({ready} of {wanted} nodes Ready)"))
    logger.warning(f"nodes changed: {decided.nodes[2]}")
    events.readiness(body, entries)
    events.phase(body, status.get("phase"), decided.phase, decided.message or decided.nodes[2])
    await ctx.api.patch_virtualcluster_status(body.metadata.namespace, body.metadata.name, {"status": {
        "phase": decided.phase, "message": decided.message, "nodes": entries, "nodesReady": f"{ready}/{wanted}"}})
    nodes_ready = st.condition(st.NODES_READY, *decided.nodes, generation, list(conditions.values()))
    await set_ready(ctx, body, *decided.ready, generation, nodes_ready)
    return True


async def judge_control_plane(ctx: Context, body: kopf.Body, findings: list[health.Finding],
                              logger: logging.Logger) -> str:
    """Ready after what the look found: "healthy", "recovered" or "degraded"."""
    status = plain(body.get("status") or {})
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == st.READY), {})
    ours, generation = ready.get("reason") == DEGRADED, status.get("observedGeneration")
    if not findings:
        if not ours:
            return "healthy"
        logger.info("control plane recovered")
        kopf.info(body, reason="ControlPlaneRecovered", message="the look finds nothing wrong again")
        await ctx.api.patch_virtualcluster_status(body.metadata.namespace, body.metadata.name,
                                                  {"status": {"phase": st.COMPLETED, "message": None}})
        await set_ready(ctx, body, "True", "Reconciled", "control plane recovered", generation)
        return "recovered"
    message = "; ".join(finding.text for finding in findings)
    if not ours:
        kopf.warn(body, reason=DEGRADED, message=summarize(message))
    if not ours or ready.get("message") != message:
        logger.warning(f"control plane degraded: {message}")
        await set_ready(ctx, body, "False", DEGRADED, message, generation)
    return "degraded"


async def look(ctx: Context, body: kopf.Body, pace: Pace, logger: logging.Logger) -> str:
    """One look: "skipped", "healthy", "recovered", "degraded", "nodes", "repaired" or "renewed"."""
    if not settled(body):
        return "skipped"
    now = time.monotonic()
    resync, certificates = now >= pace.look_at, now >= pace.certificates_at
    if resync:
        pace.look_at = now + ctx.config.resync_interval
    if certificates:
        pace.certificates_at = now + ctx.config.cert_check_interval
    status = plain(body.get("status") or {})
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    phase, ready_reason = status.get("phase"), (conditions.get(st.READY) or {}).get("reason")
    nodes_reason = (conditions.get(st.NODES_READY) or {}).get("reason")
    # Not while a run is (or will be) reporting: only a Completed virtual cluster, or one a look degraded.
    control_plane = resync and (phase == st.COMPLETED or ready_reason == DEGRADED)
    nodes = resync and bool(status.get("nodes")) and (
        phase == st.COMPLETED or (phase == st.INITIALIZED and nodes_reason == NODE_NOT_READY))
    if not (control_plane or nodes or certificates):
        return "skipped"
    found = await health.assess(ctx, body, control_plane=control_plane or nodes, certificates=certificates)
    if nodes and found.nodes is not None and await follow_nodes(ctx, body, found.nodes, logger):
        return "nodes"  # the control plane is judged on the next look, against the status just written
    outcome = await judge_control_plane(ctx, body, found.findings, logger) if control_plane else "healthy"
    if outcome in ("healthy", "recovered"):
        pace.repairs, pace.repair_at = 0, 0.0
    repair = control_plane and any(f.repair for f in found.findings) and now >= pace.repair_at
    if not repair and not found.due:
        return outcome
    if repair:
        pace.repairs += 1
        pace.repair_at = now + backoff(pace.repairs, ctx.config.resync_interval, ctx.config.backoff_max)
    return await _run(ctx, body, found, repair, logger)


async def _run(ctx: Context, body: kopf.Body, found: health.Assessment, repair: bool,
               logger: logging.Logger) -> str:
    namespace, name = body.metadata.namespace, body.metadata.name
    async with exclusive_run(ctx, namespace, name, (body.get("status") or {}).get("phase")) as fresh:
        if fresh is None or not settled(fresh):
            return "skipped"
        if repair:
            message = "; ".join(f.text for f in found.findings if f.repair)
            logger.info(f"repairing: {message}")
        else:
            # Whatever ran while this waited for the lock may have renewed them already.
            due = (await health.assess(ctx, fresh, control_plane=False)).due
            if not due:
                return "healthy"
            message = f"renewing certificates: {', '.join(due)}"
            logger.info(message)
            kopf.info(fresh, reason="CertificateRenewal", message=message)
        try:
            await converge(ctx, fresh, st.UPDATING, 0, logger)
        except (kopf.TemporaryError, kopf.PermanentError) as exc:
            # The status says what happened; a later look (or a spec change) runs again.
            logger.warning(f"{'repair' if repair else 'certificate renewal'} run did not complete: {summarize(exc)}")
    return "repaired" if repair else "renewed"


async def look_now(body: kopf.Body, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """The timer's handler. It returns nothing (a result would go into the status) and never raises for what
    the next look can retry."""
    ctx: Context = memo.ctx
    if "pace" not in memo:  # kopf's memo is per object here: a shallow copy of the operator's
        # The first look one interval after the object is seen (at start-up, the resume handler has looked).
        now = time.monotonic()
        memo.pace = Pace(look_at=now + ctx.config.resync_interval,
                         certificates_at=now + ctx.config.cert_check_interval)
    try:
        await look(ctx, body, memo.pace, logger)
    except KubeApiError as exc:
        logger.debug(f"could not look: {http_error(exc)}")
    except Exception as exc:  # the tenant API unreachable, a broken kubeconfig: look again later
        logger.debug(f"could not look: {type(exc).__name__}: {summarize(exc)}")


def register(config: Config) -> None:
    """The timer, at the shorter of the two intervals (they are only known once the options are read)."""
    tick = min(config.resync_interval, config.cert_check_interval)
    kopf.timer(GROUP, VERSION, VIRTUALCLUSTERS, id="look", interval=tick)(look_now)


class QuietTimer(logging.Filter):
    """kopf logs "Timer 'look' succeeded." after every tick of every VirtualCluster: a line per object every few
    seconds in the operator's log, saying nothing. The looks log what they find themselves."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and record.getMessage() == "Timer 'look' succeeded.")
