"""One playbook run of a VirtualCluster and what it writes back: phase and progress while it runs, then the
outcome (Ready, NodesReady and AddonsReady, the endpoint, the nodes), or the failure and when it is tried again.

Every way into a run (a spec change, a deletion, the periodic look's repair or certificate renewal) calls
`converge` inside `slots.exclusive_run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from . import ca_rotation, drift, events, health, metrics, node_queue, spec_kubeconfig
from . import status as st
from .certificates import expiry_times, pki_secrets
from .context import Context
from .errors import backoff, failure_reason, summarize
from .extravars import build_extravars, desired_spec, plain
from .kube import http_error, is_status
from .progress import RunTracker
from .runs import RunOutcome, new_run_id


@dataclass
class Run:
    run_id: str
    started_at: str
    tracker: RunTracker
    outcome: RunOutcome
    playbook: str
    phase: str  # the phase the run was started in
    aborted_for_deletion: bool = False

    def progress(self) -> dict[str, Any]:
        return st.progress_fields(self.run_id, self.playbook, self.started_at, self.tracker.snapshot())

    def failure_message(self) -> str:
        failure = self.tracker.last_failure
        if failure is not None:
            return failure.describe()
        if self.outcome.status == "timeout":
            return f"{self.playbook} timed out after {self.outcome.seconds:.0f}s"
        detail = self.tracker.output_tail()
        suffix = f": {detail}" if detail else ""
        return summarize(f"{self.playbook} {self.outcome.status} (rc {self.outcome.rc}){suffix}")


async def _report_progress(ctx: Context, namespace: str, name: str, run_id: str, started_at: str,
                           tracker: RunTracker, stop: asyncio.Event, logger: logging.Logger) -> None:
    """Patch status.progress at most every progress_interval seconds, and only when it moved.

    It ends on `stop` rather than by cancellation: a patch already sent must land before the run's final
    status, never after it.
    """
    sent = tracker.snapshot().version
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), ctx.config.progress_interval)
        progress = tracker.snapshot()
        if stop.is_set() or progress.version == sent:
            continue
        try:
            await ctx.api.patch_virtualcluster_status(
                namespace, name, st.progressed(run_id, ctx.config.playbook, started_at, progress))
        except KubeApiError as exc:
            logger.debug(f"progress not recorded: {http_error(exc)}")
        sent = progress.version


async def set_ready(ctx: Context, body: kopf.Body, status: str, reason: str, message: str,
                    generation: int | None, *others: dict[str, Any]) -> None:
    """Ready, with `others` (NodesReady, AddonsReady) replacing their previous values."""
    # Order with the phase patch: on failure the condition goes first, on success last, so whoever waits
    # for phase Failed or for Ready=True finds the rest of the status already in place.
    previous = plain((body.get("status") or {}).get("conditions") or [])
    conditions = [st.condition(st.READY, status, reason, message, generation, previous)]
    # One apply carries every condition the operator owns: server-side apply drops an owned entry left out.
    given = {c["type"]: c for c in others}
    for type_ in st.OWNED_CONDITIONS:
        kept = given.get(type_) or next((c for c in previous if c.get("type") == type_), None)
        if kept is not None:
            conditions.append(kept)
    await ctx.api.apply_virtualcluster_conditions(
        st.conditions_apply_body(body.metadata.namespace, body.metadata.name, conditions))


async def _abort_when_deleted(ctx: Context, namespace: str, name: str, abort: asyncio.Event,
                              logger: logging.Logger) -> None:
    """Set `abort` once the VirtualCluster is being deleted. kopf hands the deletion to the delete handler only
    after this object's running handler returns, so a create stuck on a pod that never starts would hold the
    deletion until its run gave up on its own."""
    while not abort.is_set():
        await asyncio.sleep(ctx.config.progress_interval)
        try:
            current = await ctx.api.get_virtualcluster(namespace, name)
        except KubeApiError as exc:
            if not is_status(exc, 404):
                continue
            current = {"metadata": {"deletionTimestamp": "gone"}}
        if (current.get("metadata") or {}).get("deletionTimestamp"):
            logger.info("deletion requested: ending the running create so the teardown can start")
            abort.set()


async def _with_recorded_rotation(ctx: Context, body: kopf.Body, state: str) -> Mapping[str, Any]:
    """The body to run, with the CA rotation's progress as the object records it now: a handler runs the body kopf
    gave it, which may predate the last step (a look may have taken that step meanwhile)."""
    if state != "present" or not (body.get("spec") or {}).get("caRotation"):
        return body
    current = await ctx.api.get_virtualcluster(body.metadata.namespace, body.metadata.name)
    status = dict(plain(body.get("status") or {}), caRotation=(current.get("status") or {}).get("caRotation"))
    return {"metadata": body.metadata, "spec": body.get("spec"), "status": status}


async def execute(ctx: Context, body: kopf.Body, state: str, phase: str, logger: logging.Logger) -> Run:
    """One playbook run for this VirtualCluster, with status.phase and status.progress kept current."""
    namespace, name = body.metadata.namespace, body.metadata.name
    status = plain(body.get("status") or {})
    # tasksTotal is only known from an earlier successful run of the same kind.
    tasks_total = (status.get("progress") or {}).get("tasksTotal") if state == "present" else None
    run_id, started_at, playbook = new_run_id(namespace, name), st.now(), ctx.config.playbook
    tracker = RunTracker(tasks_total)
    await ctx.api.patch_virtualcluster_status(
        namespace, name, st.run_started(phase, run_id, playbook, started_at, tracker.snapshot(), state))
    events.phase(body, status.get("phase"), phase, f"running {playbook} (state {state})")
    if state == "present" and not any(c.get("type") == st.READY for c in status.get("conditions") or []):
        await set_ready(ctx, body, "Unknown", "Reconciling", "the first run is in progress",
                        body.metadata.get("generation"))
    logger.info(f"run {run_id}: {playbook} with state {state}")
    stop, abort = asyncio.Event(), asyncio.Event()
    reporter = asyncio.create_task(
        _report_progress(ctx, namespace, name, run_id, started_at, tracker, stop, logger))
    watcher = (asyncio.create_task(_abort_when_deleted(ctx, namespace, name, abort, logger))
               if state == "present" else None)
    try:
        site_vars = ctx.run_site_vars(logger)
        extravars = build_extravars(await _with_recorded_rotation(ctx, body, state), state, ctx.config.kubeconfig,
                                    site_vars, ctx.config.allowed_registries)
        if state == "present" and "node_promote_queue" not in extravars:
            extravars["node_promote_queue"] = await node_queue.queue_for(ctx, body, logger)
        outcome = await ctx.runner.run(playbook, run_id, extravars, tracker, abort=abort)
    except Exception as exc:  # the run could not even start (e.g. no space for its directory)
        logger.error(f"run {run_id} could not run: {summarize(exc)}")
        outcome = RunOutcome(run_id, "error", None, 0.0)
        tracker.note(summarize(f"could not run {playbook}: {exc}"))
    finally:
        ctx.host_objects.changed(namespace)
        stop.set()
        if watcher is not None:
            watcher.cancel()
        await reporter
    logger.info(f"run {run_id}: {outcome.status} after {outcome.seconds:.1f}s")
    metrics.record_run(playbook, phase, outcome.status, outcome.seconds)
    metrics.record_steps(tracker.step_durations)
    return Run(run_id, started_at, tracker, outcome, playbook, phase, aborted_for_deletion=abort.is_set())


async def retry_later(ctx: Context, body: kopf.Body, run: Run, retry: int, message: str, reason: str,
                      delay: float | None = None) -> kopf.TemporaryError:
    delay = backoff(retry, ctx.config.backoff_base, ctx.config.backoff_max) if delay is None else delay
    metrics.record_failure(reason)
    await set_ready(ctx, body, "False", reason, message, body.metadata.get("generation"))
    await ctx.api.patch_virtualcluster_status(
        body.metadata.namespace, body.metadata.name,
        st.failed_transiently(message=message, delay=delay, progress=run.progress()))
    return kopf.TemporaryError(message, delay=delay)


async def _complete(ctx: Context, body: kopf.Body, run: Run, retry: int, logger: logging.Logger) -> int | None:
    namespace, name = body.metadata.namespace, body.metadata.name
    result = run.tracker.result or {}
    secret_ref = result.get("kubeconfigSecret") or {}
    secret_name, secret_key = secret_ref.get("name"), secret_ref.get("key")
    if not secret_name or not secret_key:
        raise await retry_later(ctx, body, run, retry, f"{run.playbook} succeeded but set no kubenest_result "
                                "with kubeconfigSecret {name, key} (set_stats)", "InvalidPlaybookResult")
    try:
        value = (await ctx.api.read_secret_data(namespace, secret_name)).get(secret_key)
    except KubeApiError as exc:
        if not is_status(exc, 404):
            raise kopf.TemporaryError(f"reading Secret {secret_name} failed: {http_error(exc)}",
                                      delay=ctx.config.backoff_base) from None
        value = None
    if not value:
        raise await retry_later(ctx, body, run, retry, f"Secret {namespace}/{secret_name} has no key {secret_key}",
                                "KubeconfigMissing")
    generation = await spec_kubeconfig.write(ctx, namespace, name, value if ctx.config.spec_kubeconfig else None,
                                             desired_spec(body.get("spec")), body.metadata.get("generation"))
    nodes = st.node_entries(result.get("nodes") or [])
    wanted = _int(result.get("nodesWanted"))
    ready = sum(1 for node in nodes if node["ready"])
    endpoint = result.get("endpoint")
    addons = st.addons_condition(result.get("addons"), wanted)
    decided = st.readiness(ready, wanted, addons, reconciled=f"{run.playbook} succeeded in {run.outcome.seconds:.0f}s",
                           not_ready=("NodesNotReady", f"{ready} of {wanted} nodes Ready"),
                           satisfied=result.get("nodesSatisfied") not in (False, "False", "false"),
                           waiting=str(result.get("nodesMessage") or ""),
                           note=str(result.get("nodesNote") or "").strip())
    await ctx.api.patch_virtualcluster_status(namespace, name, st.succeeded(
        generation=generation, endpoint=str(endpoint) if endpoint else None, nodes=nodes, wanted=wanted,
        secret_name=secret_name, secret_key=secret_key, progress=run.progress(), phase=decided.phase,
        message=decided.message,
        waiting_since=node_queue.waiting_since(plain(body.get("status") or {}), decided.phase),
        kubernetes_version=str(result["kubernetesVersion"]) if result.get("kubernetesVersion") else None))
    events.nodes(body, nodes)
    events.phase(body, run.phase, decided.phase, decided.message or decided.ready[2])
    previous = plain((body.get("status") or {}).get("conditions") or [])
    nodes_ready = st.condition(st.NODES_READY, *decided.nodes, generation, previous)
    addons_ready = st.condition(st.ADDONS_READY, *addons, generation, previous)
    spread = st.spread_condition(result.get("apiServers"), result.get("etcd"))
    others = [nodes_ready, addons_ready] + ([st.condition(st.SPREAD, *spread, generation, previous)] if spread else [])
    await set_ready(ctx, body, *decided.ready, generation, *others)
    rotated = ca_rotation.status_entry(result.get("caRotation") or {}, st.now())
    if rotated is not None:
        await ctx.api.patch_virtualcluster_status(namespace, name, {"status": {"caRotation": rotated}})
        following = ca_rotation.next_step(plain(body.get("spec") or {}), {"caRotation": rotated})
        kopf.info(body, reason="CARotation", message=ca_rotation.describe(rotated, following))
        if following is not None:  # the next step runs at once, in a run of its own
            raise kopf.TemporaryError(f"CA rotation {rotated['id']}: {following} next", delay=1)
    if decided.phase != st.COMPLETED:
        logger.info(f"{decided.message}; looking again in {ctx.config.node_wait_interval:.0f}s")
        raise kopf.TemporaryError(decided.message, delay=ctx.config.node_wait_interval)
    logger.info(f"ready at {endpoint or 'an unreported endpoint'} with {len(nodes)} node(s)")
    return generation


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


async def converge(ctx: Context, body: kopf.Body, phase: str, retry: int, logger: logging.Logger) -> None:
    generation = body.metadata.get("generation")
    started = time.monotonic()
    run = await execute(ctx, body, "present", phase, logger)
    if run.aborted_for_deletion and not run.outcome.ok:
        logger.info(f"run {run.run_id} ended for the deletion; the delete handler takes over")
        return
    if run.outcome.ok:
        try:  # before Ready turns True: the health look compares against it
            await health.record_inventory(ctx, body.metadata.namespace, body.metadata.name)
        except KubeApiError as exc:  # the look then compares against the last record, or the workloads
            logger.warning(f"could not record the control plane's objects: {http_error(exc)}")
        with contextlib.suppress(KubeApiError):  # a run may have issued or renewed certificates
            metrics.set_certificates(body.metadata.namespace, body.metadata.name,
                                     expiry_times(await pki_secrets(ctx, body.metadata.namespace, body.metadata.name)))
        observed = await _complete(ctx, body, run, retry, logger)
        try:
            await drift.record_revision(ctx, body.metadata.namespace, body.metadata.name)
        except KubeApiError as exc:  # the next start then runs once more, nothing worse
            logger.warning(f"could not record the reconciled revision: {http_error(exc)}")
        logger.info(f"reconciled generation {observed} in {time.monotonic() - started:.1f}s")
        return
    failure = run.tracker.last_failure
    if failure is not None and failure.permanent is not None:
        # Retrying cannot help; kopf runs the handler again for a new spec or a changed retry annotation.
        metrics.record_failure(failure.permanent.reason)
        await set_ready(ctx, body, "False", failure.permanent.reason, failure.permanent.message, generation)
        await ctx.api.patch_virtualcluster_status(body.metadata.namespace, body.metadata.name, st.failed_permanently(
            generation=generation, reason=failure.permanent.reason, message=failure.permanent.message,
            progress=run.progress()))
        events.phase(body, run.phase, st.FAILED, f"{failure.permanent.reason}: {failure.permanent.message}")
        raise kopf.PermanentError(f"{failure.permanent.reason}: {failure.permanent.message}")
    message = run.failure_message()
    raise await retry_later(ctx, body, run, retry, message, failure_reason(message, "RunFailed"))
