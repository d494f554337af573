"""Nodes held by a virtual cluster that is gone come back to the host.

A VirtualCluster deleted without its finalizer (forced, or while no operator ran) leaves its GlobalNodes
occupied or returning and its nodes in a tenant that no longer exists. The GlobalNode resync finds them and
runs the playbook with state absent for that name: the nodes are wiped and rejoin the host (the tenant side
is skipped when its API server is gone). A virtual cluster run by plain ansible-playbook has no VirtualCluster
object; its admin kubeconfig Secret marks it as alive, so its nodes are left alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as protocol
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from .context import Context
from .errors import summarize
from .extravars import build_extravars
from .progress import RunTracker
from .runs import new_run_id
from .slots import exclusive_run

HELD_BY_OWNER = (protocol.OCCUPIED, protocol.RETURNING)


def orphan_owner(globalnode: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the virtual cluster holding a promoted node, if any."""
    status = globalnode.get("status") or {}
    owner = status.get("virtualCluster") or ""
    if status.get("state") not in HELD_BY_OWNER or owner.count("/") != 1 or not all(owner.split("/")):
        return None
    namespace, name = owner.split("/")
    return namespace, name


class OrphanReturns:
    """At most one return run per vanished virtual cluster at a time."""

    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task] = {}

    async def look(self, ctx: Context, globalnodes: list[Mapping[str, Any]], logger: logging.Logger) -> None:
        owners = sorted({owner for owner in map(orphan_owner, globalnodes) if owner is not None})
        for namespace, name in owners:
            key = f"{namespace}/{name}"
            if key in self.running or not await _gone(ctx, namespace, name):
                continue
            logger.info(f"virtual cluster {key} is gone but holds nodes: returning them to the host")
            task = asyncio.create_task(_return_nodes(ctx, namespace, name, logger))
            self.running[key] = task
            task.add_done_callback(lambda _t, key=key: self.running.pop(key, None))

    async def stop(self) -> None:
        for task in list(self.running.values()):
            task.cancel()
        await asyncio.gather(*self.running.values(), return_exceptions=True)


async def _gone(ctx: Context, namespace: str, name: str) -> bool:
    try:
        if await ctx.api.virtualcluster_exists(namespace, name):
            return False
        await ctx.api.read_secret_data(namespace, f"{name}-admin-kubeconfig")
        return False  # a plain-playbook virtual cluster, or one whose objects are still being collected
    except KubeApiError as exc:
        return exc.status == 404


async def _return_nodes(ctx: Context, namespace: str, name: str, logger: logging.Logger) -> None:
    body = {"metadata": {"namespace": namespace, "name": name, "uid": ""}, "spec": {}}
    run_id, tracker = new_run_id(namespace, name), RunTracker()
    async with exclusive_run(ctx, namespace, name, None, announce=False) as current:
        if current is not None:  # made again meanwhile: its own runs hand the nodes over
            return
        try:
            site_vars = ctx.run_site_vars(logger)
            extravars = build_extravars(body, "absent", ctx.config.kubeconfig, site_vars, ctx.config.allowed_registries)
            outcome = await ctx.runner.run(ctx.config.playbook, run_id, extravars, tracker)
        except Exception as exc:  # retried at the next resync
            logger.error(f"returning the nodes of vanished {namespace}/{name} could not run: {summarize(exc)}")
            return
    if outcome.ok:
        logger.info(f"run {run_id}: nodes of vanished {namespace}/{name} are back in the host")
    else:
        failure = tracker.last_failure
        logger.error(f"run {run_id}: returning the nodes of vanished {namespace}/{name} failed "
                     f"({failure.describe() if failure else outcome.status}); the next resync tries again")
