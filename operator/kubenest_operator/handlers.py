"""VirtualCluster handlers: create/update/resume -> one run with state present, delete -> one with state absent.

kopf serialises the handling of one object, so its change handlers never overlap; the periodic look
(looks.py) may also start a run, so every run goes through `slots.exclusive_run`. A spec change made during a
run is seen as a new change once the run's handler returns (kopf stores the essence of the body it handled,
not of the newest one), which is why these handlers run the body kopf gave them. kopf's finalizer stays on the
object until the delete run succeeds, also across operator restarts.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils.run_result import RETRY_ANNOTATION

from . import drift, events, metrics, restores
from . import status as st
from .context import Context
from .converge import converge, execute, retry_later, set_ready
from .errors import failure_reason, summarize
from .extravars import plain
from .kube import GROUP, VERSION, VIRTUALCLUSTERS
from .settings import RETRY_FIELD
from .slots import exclusive_run


@kopf.on.resume(GROUP, VERSION, VIRTUALCLUSTERS)
@kopf.on.create(GROUP, VERSION, VIRTUALCLUSTERS)
@kopf.on.update(GROUP, VERSION, VIRTUALCLUSTERS)
async def reconcile(body: kopf.Body, reason: str, retry: int, logger: logging.Logger, memo: kopf.Memo,
                    diff: kopf.Diff = (), **_: Any) -> None:
    ctx: Context = memo.ctx
    status = plain(body.get("status") or {})
    generation = body.metadata.get("generation")
    if reason == "resume" and status.get("phase") == st.FAILED and status.get("observedGeneration") == generation:
        logger.info(f"not running again: this spec failed permanently; change the spec, or fix the cause and "
                    f"change the annotation {RETRY_ANNOTATION} (kubectl kubenest retry), to run it again")
        return
    if reason == "update" and diff and all(item[1][:1] == (RETRY_FIELD,) for item in diff):
        # Only the retry annotation is in the diff base besides the spec (settings.SpecAndRetryDiffBase).
        asked = (body.metadata.annotations or {}).get(RETRY_ANNOTATION)
        if asked is None:
            logger.info(f"the annotation {RETRY_ANNOTATION} was removed: nothing to run")
            return
        logger.info(f"running again: asked by the annotation {RETRY_ANNOTATION}={asked}")
        kopf.info(body, reason="Retry", message=f"running the spec again, asked by {RETRY_ANNOTATION}={asked}")
    try:
        restore = restores.restore_of(body.metadata)
    except restores.BadRestore as exc:
        await set_ready(ctx, body, "False", "InvalidRestore", str(exc), generation)
        raise kopf.PermanentError(str(exc)) from None
    if restore == restores.PENDING:
        # A run now would issue a fresh PKI where the restore is about to put the backed-up one.
        message = "waiting for the restore to hand over the PKI and etcd snapshot"
        await set_ready(ctx, body, "False", "RestorePending", message, generation)
        raise kopf.TemporaryError(message, delay=ctx.config.restore_wait_interval)
    why = None
    if reason == "resume":
        try:
            why = await drift.reason_to_run(ctx, body)
        except Exception as exc:  # could not look: run, as before
            why = f"could not check for drift: {type(exc).__name__}: {summarize(exc)}"
        if why is None:
            logger.info("nothing drifted since the last run for this spec: no run")
            return
        logger.info(f"running again: {why}")
    # A virtual cluster waiting for nodes stays Pending (or Initialized) while it looks again.
    if status.get("phase") in (st.PENDING, st.INITIALIZED) and status.get("kubeconfigSecretRef"):
        phase = status["phase"]
    else:
        phase = st.UPDATING if status.get("kubeconfigSecretRef") else st.PREPARING
    await _await_rights(ctx, body, logger)
    await _await_one_shard(ctx, body, logger)
    # After an upgrade every Ready virtual cluster may need its run: one at a time, so a release whose change
    # reaches every tenant takes one tenant's components down at most, never all tenants' at once.
    upgrading = ctx.upgrades if why == drift.COLLECTION_CHANGED else contextlib.nullcontext()
    async with upgrading, exclusive_run(ctx, body.metadata.namespace, body.metadata.name, status.get("phase")):
        await converge(ctx, body, phase, retry, logger)


async def _await_rights(ctx: Context, body: kopf.Body, logger: logging.Logger) -> None:
    """A run without the operator's rights in the namespace would fail half-way: wait for them instead (the
    default install's kubenest-binder binds them once it sees the namespace's first VirtualCluster)."""
    namespace = body.metadata.namespace
    if await ctx.api.has_tenant_rights(namespace):
        return
    message = (f"the operator has no rights in namespace {namespace} yet (kubenest-binder binds "
               "kubenest-operator-tenant there for a namespace that holds a VirtualCluster)")
    logger.info(f"{message}; looking again in {ctx.config.rights_wait_interval:.0f}s")
    if not (body.metadata.get("deletionTimestamp")):
        await set_ready(ctx, body, "False", "WaitingForRights", message, body.metadata.get("generation"))
    raise kopf.TemporaryError(message, delay=ctx.config.rights_wait_interval)


async def _await_one_shard(ctx: Context, body: kopf.Body, logger: logging.Logger) -> None:
    """Said in the status as well: the run would not start (slots.exclusive_run refuses it too)."""
    refused = await ctx.shard_guard.refuse(body.metadata.namespace)
    if refused is None:
        return
    logger.error(f"{refused}; looking again in {ctx.shard_guard.every:.0f}s")
    if not body.metadata.get("deletionTimestamp"):
        await set_ready(ctx, body, "False", "ShardOverlap", refused, body.metadata.get("generation"))
    raise kopf.TemporaryError(refused, delay=ctx.shard_guard.every)


@kopf.on.delete(GROUP, VERSION, VIRTUALCLUSTERS)
async def remove(body: kopf.Body, retry: int, logger: logging.Logger, memo: kopf.Memo, **_: Any) -> None:
    ctx: Context = memo.ctx
    await _await_rights(ctx, body, logger)
    await _await_one_shard(ctx, body, logger)
    namespace, name = body.metadata.namespace, body.metadata.name
    async with exclusive_run(ctx, namespace, name, (body.get("status") or {}).get("phase")):
        run = await execute(ctx, body, "absent", st.DELETING, logger)
        if run.outcome.ok:
            events.nodes(body, [])
            metrics.set_certificates(namespace, name, None)
            ctx.api.tenants.forget(namespace, name)
            logger.info("removed; releasing the finalizer")
            return
        # A delete is never given up: kopf would drop its finalizer after a permanent error and leave the
        # virtual cluster's nodes and objects behind. "Permanent" ones are retried at the longest interval.
        failure = run.tracker.last_failure
        permanent = failure.permanent if failure is not None else None
        message = run.failure_message()
        raise await retry_later(ctx, body, run, retry, message,
                                permanent.reason if permanent else failure_reason(message, "DeleteFailed"),
                                delay=ctx.config.backoff_max if permanent else None)
