"""A promoted node that goes NotReady (or comes back) after its virtual cluster turned Ready.

Runs report node readiness when they end; between runs nothing would look. A daemon per VirtualCluster
looks at the tenant's Nodes every --resync-interval while the virtual cluster is Completed, or Initialized
because of what an earlier look found, and moves status.nodes, nodesReady, the phase and the NodesReady and
Ready conditions with them, without a playbook run.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import kopf

from . import status as st
from .context import Context
from .extravars import plain
from .handlers import _set_ready
from .kube import GROUP, VERSION, VIRTUALCLUSTERS
from .kube import tenant_nodes_ready as _tenant_ready
from .resync import every_resync

# The NodesReady reason of a look, as opposed to the reasons runs give: only what a look set, a look undoes.
NODE_NOT_READY = "NodeNotReady"


def _wanted(status: dict[str, Any]) -> int:
    try:
        return int(str(status.get("nodesReady", "")).split("/")[1])
    except (IndexError, ValueError):
        return len(status.get("nodes") or [])


async def look(ctx: Context, body: kopf.Body, logger: logging.Logger) -> bool:
    """One look; True when the status changed."""
    status = plain(body.get("status") or {})
    nodes, ref = status.get("nodes") or [], status.get("kubeconfigSecretRef") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ours = (conditions.get(st.NODES_READY) or {}).get("reason") == NODE_NOT_READY
    if not nodes or not ref.get("name") or not (status.get("phase") == st.COMPLETED
                                                or (status.get("phase") == st.INITIALIZED and ours)):
        return False  # nothing promoted, or a run is (or will be) reporting
    secret = await ctx.api.read_secret_data(body.metadata.namespace, ref["name"])
    ready_now = await asyncio.to_thread(_tenant_ready, base64.b64decode(secret[ref["key"]]))
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
    await ctx.api.patch_virtualcluster_status(body.metadata.namespace, body.metadata.name, {"status": {
        "phase": decided.phase, "message": decided.message, "nodes": entries, "nodesReady": f"{ready}/{wanted}"}})
    nodes_ready = st.condition(st.NODES_READY, *decided.nodes, generation, list(conditions.values()))
    await _set_ready(ctx, body, *decided.ready, generation, nodes_ready)
    return True


@kopf.daemon(GROUP, VERSION, VIRTUALCLUSTERS, cancellation_timeout=10)
async def follow_nodes(name: str, namespace: str, memo: kopf.Memo, stopped: kopf.DaemonStopped,
                       logger: logging.Logger, **_: Any) -> None:
    ctx: Context = memo.ctx
    await every_resync(ctx, namespace, name, stopped, logger, "the nodes", lambda body: look(ctx, body, logger))
