"""Held nodes go back to the pool when someone asks: the GlobalNode annotated kubenest.kosmos.io/clear.

A held node (kept out of the pool when it came back from a virtual cluster, see the node_promote role) is
cleared by playbooks/node_clear.yml, which needs what only the operator's runs have: the site's variables, the
agents' CA, the host's node images. So people, AWX (playbooks/globalnode_clear.yml) and kubectl ask by
annotating the GlobalNode, and the operator runs the playbook for that node. The annotation goes when the run
ends; a failed run leaves the node held and says why in kubenest.kosmos.io/clear-failed and an event. An
operator that stops mid-run finds the annotation still there on its next start and runs it again, or drops it if
the node is no longer held by then (the run got that far): a request on a node that is not held is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as protocol
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from . import metrics
from .errors import summarize
from .kube import GLOBALNODES, GROUP, VERSION, http_error
from .progress import RunTracker
from .runs import new_run_id
from .shards import cluster_scoped_here

if TYPE_CHECKING:
    from .context import Context

PLAYBOOK = "node_clear.yml"
# Clears share run slots with each other under this name; no namespace has it.
SLOTS = "kubenest.kosmos.io/clears"


def _annotations(body: Mapping[str, Any]) -> Mapping[str, str]:
    return (body.get("metadata") or {}).get("annotations") or {}


def asked(body: Mapping[str, Any]) -> bool:
    """Whether the GlobalNode asks to be cleared and can be: only held nodes are."""
    return protocol.CLEAR_ANNOTATION in _annotations(body) and protocol.state_of(body) == protocol.HELD


def answered(failure: str | None) -> dict[str, Any]:
    """The merge patch that ends a request: the annotation gone, and why it failed, if it did."""
    return {"metadata": {"annotations": {protocol.CLEAR_ANNOTATION: None,
                                         protocol.CLEAR_FAILED_ANNOTATION: failure}}}


class NodeClears:
    """At most one clear run per node at a time."""

    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task] = {}

    def start(self, ctx: Context, body: Mapping[str, Any], logger: logging.Logger) -> None:
        name = body["metadata"]["name"]
        if name in self.running or protocol.CLEAR_ANNOTATION not in _annotations(body):
            return
        # A request on a node that is not held has nothing to clear: a node cleared by an operator that stopped
        # before removing the request, or one asked for by hand. Left, it would clear the node unasked the next
        # time the node is held.
        work = _clear(ctx, name, logger) if asked(body) else _drop(ctx, name, protocol.state_of(body), logger)
        task = asyncio.create_task(work)
        self.running[name] = task
        task.add_done_callback(lambda _t: self.running.pop(name, None))

    async def stop(self) -> None:
        for task in list(self.running.values()):
            task.cancel()
        await asyncio.gather(*self.running.values(), return_exceptions=True)


async def _clear(ctx: Context, name: str, logger: logging.Logger) -> None:
    await ctx.slots.acquire(SLOTS)
    metrics.RUNNING.inc()
    try:
        await _run(ctx, name, logger)
    except KubeApiError as exc:  # the annotation stays: the next event or start asks again
        logger.warning(f"clearing GlobalNode {name} did not finish: {http_error(exc)}")
    finally:
        metrics.RUNNING.dec()
        ctx.slots.release(SLOTS)


async def _drop(ctx: Context, name: str, state: str, logger: logging.Logger) -> None:
    try:
        await ctx.api.patch_globalnode(name, {"metadata": {"annotations": {protocol.CLEAR_ANNOTATION: None}}})
        logger.info(f"GlobalNode {name} is {state}, not held: its request to be cleared is dropped")
    except KubeApiError as exc:  # the next event asks again
        logger.warning(f"GlobalNode {name}: dropping its request to be cleared failed: {http_error(exc)}")


async def _run(ctx: Context, name: str, logger: logging.Logger) -> None:
    body = await ctx.api.get_globalnode(name)
    if not asked(body):  # answered meanwhile, or no longer held
        if protocol.CLEAR_ANNOTATION in _annotations(body):
            await _drop(ctx, name, protocol.state_of(body), logger)
        return
    # An earlier failure says nothing about this run; the request itself stays until the run has ended.
    await ctx.api.patch_globalnode(name, {"metadata": {"annotations": {protocol.CLEAR_FAILED_ANNOTATION: None}}})
    run_id, tracker, started = new_run_id("globalnode", name), RunTracker(), time.monotonic()
    kopf.info(body, reason="Clearing", message=f"run {run_id} clears the node and gives it back to the pool")
    logger.info(f"run {run_id}: clearing held GlobalNode {name}")
    extravars = {**ctx.run_site_vars(logger), "kubenest_clear_nodes": name}
    if ctx.config.kubeconfig:  # in-cluster the collection's API client finds the service account itself
        extravars["kubenest_host_kubeconfig"] = ctx.config.kubeconfig
    try:
        outcome = await ctx.runner.run(PLAYBOOK, run_id, extravars, tracker)
        status = outcome.status
        failure = None if outcome.ok else (tracker.last_failure.describe() if tracker.last_failure
                                           else f"{PLAYBOOK} {outcome.status} (rc {outcome.rc})")
    except Exception as exc:  # the node stays held; the answer says why
        status, failure = "error", summarize(f"could not run {PLAYBOOK}: {exc}")
    metrics.record_run(PLAYBOOK, "Clearing", status, time.monotonic() - started)
    await ctx.api.patch_globalnode(name, answered(failure))
    if failure is None:
        logger.info(f"run {run_id}: GlobalNode {name} cleared")
    else:
        kopf.warn(body, reason="ClearFailed", message=failure)
        logger.error(f"run {run_id}: clearing GlobalNode {name} failed: {failure}")


@kopf.on.event(GROUP, VERSION, GLOBALNODES, annotations={protocol.CLEAR_ANNOTATION: kopf.PRESENT},
               when=cluster_scoped_here)
async def clear_asked(type: str | None, body: kopf.Body, memo: kopf.Memo, logger: logging.Logger,
                      **_: Any) -> None:
    # Async: kopf runs a plain function in a thread, where no event loop could take the run's task.
    # The first listing (type None) sees requests an earlier operator left unanswered.
    if type != "DELETED":
        memo.ctx.node_clears.start(memo.ctx, body, logger)


@kopf.on.cleanup()
async def stop_clears(memo: kopf.Memo, **_: Any) -> None:
    await memo.ctx.node_clears.stop()
