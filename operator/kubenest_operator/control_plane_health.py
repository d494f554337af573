"""A tenant control plane that breaks after its virtual cluster turned Ready.

Runs report the control plane when they end; between runs nothing would look, and Ready would stay True
while etcd or the apiserver is gone. A daemon per VirtualCluster looks every --resync-interval while the
virtual cluster is Completed (or degraded by what an earlier look found), with the assessment of health.py:

- anything found sets Ready=False, reason ControlPlaneDegraded, with what was found as the message, and Ready
  comes back once the look finds nothing (a pod its controller replaced, a tenant API answering again);
- an object that is gone or was changed by someone else (a Deployment scaled down, an image or flag edited)
  is repaired by a playbook run, as a spec change would be; a repair that did not help is tried again only
  after a growing pause, never in a loop.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf

from . import health
from . import status as st
from .context import Context
from .errors import backoff, summarize
from .extravars import plain
from .handlers import _converge, _set_ready, runner_slot
from .kube import GROUP, VERSION, VIRTUALCLUSTERS
from .resync import every_resync

# The Ready reason of a look, as opposed to the reasons runs give: only what a look set, a look undoes.
DEGRADED = "ControlPlaneDegraded"


async def look(ctx: Context, body: kopf.Body, logger: logging.Logger, may_repair: bool = True) -> str:
    """One look: "healthy", "degraded", "recovered", "repaired" or "skipped"."""
    status = plain(body.get("status") or {})
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == st.READY), {})
    ours = ready.get("reason") == DEGRADED
    if not status.get("kubeconfigSecretRef") or not (status.get("phase") == st.COMPLETED or ours):
        return "skipped"  # not built yet, or a run is (or will be) reporting
    generation = status.get("observedGeneration")
    findings = await health.assess(ctx, body)
    found, repair = [f.text for f in findings], any(f.repair for f in findings)
    if not found:
        if not ours:
            return "healthy"
        logger.info("control plane recovered")
        await ctx.api.patch_virtualcluster_status(body.metadata.namespace, body.metadata.name,
                                                  {"status": {"phase": st.COMPLETED, "message": None}})
        await _set_ready(ctx, body, "True", "Reconciled", "control plane recovered", generation)
        return "recovered"
    message = "; ".join(found)
    if not ours or ready.get("message") != message:
        logger.warning(f"control plane degraded: {message}")
        await _set_ready(ctx, body, "False", DEGRADED, message, generation)
    if not repair or not may_repair:
        return "degraded"
    logger.info(f"repairing: {message}")
    async with ctx.locks.hold(body.metadata.namespace, body.metadata.name), runner_slot(ctx, body):
        fresh = kopf.Body(await ctx.api.get_virtualcluster(body.metadata.namespace, body.metadata.name))
        if fresh.metadata.get("deletionTimestamp"):
            return "skipped"
        try:
            await _converge(ctx, fresh, st.UPDATING, 0, logger)
        except (kopf.TemporaryError, kopf.PermanentError) as exc:
            logger.warning(f"repair run failed, looking again later: {summarize(exc)}")
    return "repaired"


@kopf.daemon(GROUP, VERSION, VIRTUALCLUSTERS, cancellation_timeout=10)
async def follow_control_plane(name: str, namespace: str, memo: kopf.Memo, stopped: kopf.DaemonStopped,
                               logger: logging.Logger, **_: Any) -> None:
    ctx: Context = memo.ctx
    repairs, repair_after = 0, 0.0

    async def paced_look(body: kopf.Body) -> None:
        nonlocal repairs, repair_after
        outcome = await look(ctx, body, logger, may_repair=time.monotonic() >= repair_after)
        if outcome == "repaired":
            repairs += 1
            repair_after = time.monotonic() + backoff(repairs, ctx.config.resync_interval, ctx.config.backoff_max)
        elif outcome in ("healthy", "recovered"):
            repairs, repair_after = 0, 0.0

    await every_resync(ctx, namespace, name, stopped, logger, "the control plane", paced_look)
