"""Virtual clusters waiting for nodes are served in the order they asked.

A VirtualCluster that cannot get all its nodes waits in phase Pending with status.waitingSince. Each run passes
the waiters that asked before it (node_promote_queue); the claim keeps the free nodes they would take, so a
later small request cannot starve an earlier large one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from . import status as st
from .context import Context
from .extravars import desired_spec, plain
from .kube import http_error


def waiting_before(virtualclusters: Iterable[Mapping[str, Any]], namespace: str, name: str,
                   since: str | None) -> list[dict[str, Any]]:
    """The waiters that asked before namespace/name (all of them when it does not wait yet), oldest first."""
    mine = (since, namespace, name) if since else None
    found = []
    for vc in virtualclusters:
        meta, status = vc.get("metadata") or {}, vc.get("status") or {}
        key = (status.get("waitingSince"), meta.get("namespace"), meta.get("name"))
        if key[0] is None or status.get("phase") != st.PENDING or meta.get("deletionTimestamp"):
            continue
        if key[1:] == (namespace, name) or (mine is not None and key >= mine):
            continue
        spec = desired_spec(vc.get("spec"))
        entry: dict[str, Any] = {"virtual_cluster": f"{key[1]}/{key[2]}",
                                 "policies": list(spec.get("promotePolicies") or [])}
        nodes = (spec.get("promoteResources") or {}).get("nodes")
        if nodes:
            entry["select_nodes"] = list(nodes)
        found.append((key, entry))
    return [entry for _key, entry in sorted(found, key=lambda item: item[0])]


def waiting_since(previous_status: Mapping[str, Any], phase: str) -> str | None:
    """Kept from the first run that had to wait; gone once the virtual cluster got its nodes."""
    if phase != st.PENDING:
        return None
    return previous_status.get("waitingSince") or st.now()


async def _every_waiter(ctx: Context) -> list[dict[str, Any]]:
    """The VirtualClusters of every namespace, other shards' too: the nodes are one pool. A namespaced install's
    rights reach only its own namespaces."""
    try:
        return await ctx.api.list_virtualclusters()
    except KubeApiError as exc:
        if exc.status != 403 or not ctx.config.namespaces:
            raise
    return await ctx.api.list_virtualclusters(ctx.config.namespaces)


async def queue_for(ctx: Context, body: Mapping[str, Any], logger: logging.Logger) -> list[dict[str, Any]]:
    meta = body.get("metadata") or {}
    status = plain(body.get("status") or {})
    try:
        listed = await _every_waiter(ctx)
    except KubeApiError as exc:  # fairness is best effort: the claim itself stays safe without it
        logger.warning(f"listing VirtualClusters for the node queue failed ({http_error(exc)}); claiming without it")
        return []
    since = status.get("waitingSince") if status.get("phase") == st.PENDING else None
    return waiting_before(listed, meta.get("namespace"), meta.get("name"), since)
