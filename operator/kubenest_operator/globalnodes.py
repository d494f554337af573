"""Host Nodes -> GlobalNodes: the inventory virtual clusters take their worker nodes from.

Every host Node that is not a control-plane node gets a GlobalNode of the same name with its InternalIP and
labels; new ones start free. Labels and IP follow the Node while the GlobalNode is not occupied: an occupied
node belongs to a virtual cluster (and usually has left the host cluster), so its record is left alone. All
writes are compare-and-swap on resourceVersion, so a claim by a playbook is never overwritten. Deleting a
Node deletes only a free GlobalNode.

Nodes are watched with an event handler, which stores nothing on the Node objects (no annotations, no
finalizers). GlobalNodes are indexed in memory, so a Node event costs no API read. A resync loop also lists
every Node periodically (first at start-up): a failed write (e.g. the CRD not served yet) is not left until the
Node happens to change, reservations whose virtual cluster is gone are released, and nodes it had promoted are
returned (orphans.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as protocol
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from .context import Context
from .extravars import plain
from .kube import GLOBALNODES, GROUP, VERSION, http_error, unless_gone
from .orphans import OrphanReturns
from .shards import cluster_scoped_here

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
# The states are the claim protocol's (the collection's module_utils/globalnodes), and so are the writes that
# move a node between them: stateSince and the Claimed condition move with every one.
FREE, RESERVED = protocol.FREE, protocol.RESERVED
# States that keep a GlobalNode's spec as it was when the node left the host cluster: every held one.
AWAY = protocol.OWNED
ATTEMPTS = 3
# A reservation whose virtual cluster is gone is released only after this long: a playbook run without a
# VirtualCluster object (plain ansible-playbook, AWX) holds reservations under a name no object has.
RESERVATION_GRACE_SECONDS = 600


@dataclass(frozen=True)
class Record:
    """What the operator needs of a GlobalNode."""

    name: str
    resource_version: str
    state: str | None
    node_ip: str | None
    labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Record:
        body = plain(body)
        spec, status, meta = body.get("spec") or {}, body.get("status") or {}, body.get("metadata") or {}
        return cls(meta.get("name"), meta.get("resourceVersion"), status.get("state"), spec.get("nodeIP"),
                   dict(spec.get("labels") or {}))


def is_control_plane(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(label in labels for label in CONTROL_PLANE_LABELS)


def internal_ip(node: Mapping[str, Any]) -> str | None:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and address.get("address"):
            return address["address"]
    return None


def desired_spec(node: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"labels": dict((node.get("metadata") or {}).get("labels") or {})}
    ip = internal_ip(node)
    if ip:  # the schema wants an IP or nothing
        spec["nodeIP"] = ip
    return spec


def new_globalnode(node: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode",
            "metadata": {"name": node["metadata"]["name"],
                         "labels": {"app.kubernetes.io/managed-by": "kubenest-operator"}},
            "spec": desired_spec(node)}


def sync_patch(record: Record, node: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that brings the GlobalNode's spec in line with the Node, or None if nothing to do.

    Removed labels are set to null (a merge patch only removes what it names); the resourceVersion makes
    the patch fail if the GlobalNode changed (e.g. was claimed) since it was read.
    """
    if record.state in AWAY:
        return None
    desired = desired_spec(node)
    spec: dict[str, Any] = {}
    labels = {key: value for key, value in desired["labels"].items() if record.labels.get(key) != value}
    labels.update({key: None for key in record.labels if key not in desired["labels"]})
    if labels:
        spec["labels"] = labels
    if desired.get("nodeIP") and desired["nodeIP"] != record.node_ip:
        spec["nodeIP"] = desired["nodeIP"]
    if not spec:
        return None
    return {"metadata": {"resourceVersion": record.resource_version}, "spec": spec}


def free_patch(record: Record, at: str | None = None) -> dict[str, Any] | None:
    """Mark a GlobalNode without a state free, unless something set one meanwhile."""
    if record.state:
        return None
    node = {"metadata": {"name": record.name, "resourceVersion": record.resource_version}, "status": {}}
    return protocol.transition_patch(node, None, FREE, "Registered", "in the pool of its host Node", at=at)


def release_patch(body: Mapping[str, Any], at: str | None = None) -> dict[str, Any]:
    """Free a reservation whose virtual cluster is gone, as the protocol's own release would."""
    owner = (body.get("status") or {}).get("virtualCluster")
    return protocol.transition_patch(plain(body), owner, FREE, "VirtualClusterGone",
                                     f"released: its virtual cluster {owner} is gone", at=at)


@kopf.index(GROUP, VERSION, GLOBALNODES, when=cluster_scoped_here)
def globalnode_records(name: str, body: kopf.Body, **_: Any) -> dict[str, Record]:
    return {name: Record.from_body(body)}


def _indexed(index: kopf.Index, name: str) -> Record | None:
    store = index.get(name)
    return next(iter(store), None) if store else None


async def _fresh(ctx: Context, name: str) -> Record | None:
    body = await unless_gone(ctx.api.get_globalnode(name))
    return Record.from_body(body) if body is not None else None


async def _converge(ctx: Context, node: dict[str, Any], record: Record | None, logger: logging.Logger) -> None:
    name = node["metadata"]["name"]
    for _attempt in range(ATTEMPTS):
        try:
            if record is None:
                record = Record.from_body(await ctx.api.create_globalnode(new_globalnode(node)))
                logger.info(f"GlobalNode {name} created")
            patch = sync_patch(record, node)
            if patch is not None:
                record = Record.from_body(await ctx.api.patch_globalnode(name, patch))
                logger.info(f"GlobalNode {name} synced from its Node")
            patch = free_patch(record)
            if patch is not None:
                await ctx.api.patch_globalnode(name, patch, status=True)
            return
        except KubeApiError as exc:
            if exc.status not in (404, 409):  # 409: exists already, or changed since read
                raise
        record = await _fresh(ctx, name)
    raise kopf.TemporaryError(f"GlobalNode {name} kept changing while being synced")


async def _forget(ctx: Context, name: str, record: Record | None, logger: logging.Logger) -> None:
    for _attempt in range(ATTEMPTS):
        if record is None or record.state not in (None, FREE):
            return  # reserved or occupied: the node is on its way into (or inside) a virtual cluster
        try:
            await ctx.api.delete_globalnode(name, record.resource_version)
            logger.info(f"GlobalNode {name} deleted with its Node")
            return
        except KubeApiError as exc:
            if exc.status == 404:
                return
            if exc.status != 409:  # 409: changed since read (perhaps claimed); look again
                raise
        record = await _fresh(ctx, name)


@kopf.on.event("", "v1", "nodes", when=cluster_scoped_here)
async def node_event(type: str | None, body: kopf.Body, name: str, memo: kopf.Memo, logger: logging.Logger,
                     globalnode_records: kopf.Index, **_: Any) -> None:
    ctx: Context = memo.ctx
    node = plain(body)
    if is_control_plane(node):
        return
    record = _indexed(globalnode_records, name)
    if type == "DELETED":
        await _forget(ctx, name, record, logger)
    else:  # None (initial listing), ADDED, MODIFIED
        await _converge(ctx, node, record, logger)


async def resync(ctx: Context, logger: logging.Logger, orphans: OrphanReturns | None = None) -> None:
    """One pass: every worker Node has its GlobalNode; reservations of vanished virtual clusters are freed and
    the nodes they had promoted are returned."""
    nodes = await ctx.api.list_nodes()
    for node in nodes:
        if is_control_plane(node):
            continue
        try:
            await _converge(ctx, node, await _fresh(ctx, node["metadata"]["name"]), logger)
        except (KubeApiError, kopf.TemporaryError) as exc:
            logger.warning(f"GlobalNode {node['metadata']['name']} not synced: {getattr(exc, 'reason', exc)}")
    globalnodes = await ctx.api.list_globalnodes()
    if orphans is not None:
        await orphans.look(ctx, globalnodes, logger)
    for body in globalnodes:
        record, owner = Record.from_body(body), ((body.get("status") or {}).get("virtualCluster") or "")
        since = (body.get("status") or {}).get("stateSince") or ""
        if record.state != RESERVED or "/" not in owner or not _older_than(since, RESERVATION_GRACE_SECONDS):
            continue
        namespace, name = owner.split("/", 1)
        if await ctx.api.virtualcluster_exists(namespace, name):
            continue
        with contextlib.suppress(KubeApiError):  # 409: it moved on meanwhile; the next pass looks again
            await ctx.api.patch_globalnode(record.name, release_patch(body), status=True)
            logger.info(f"GlobalNode {record.name} released: its virtual cluster {owner} is gone")


def _older_than(stamp: str, seconds: float) -> bool:
    try:
        at = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return True  # no usable time: the reservation predates this protocol
    return (datetime.datetime.now(datetime.UTC) - at).total_seconds() > seconds


async def resync_loop(ctx: Context, interval: float, logger: logging.Logger) -> None:
    orphans = OrphanReturns()
    try:
        await _resync_forever(ctx, interval, logger, orphans)
    finally:
        await orphans.stop()


async def _resync_forever(ctx: Context, interval: float, logger: logging.Logger, orphans: OrphanReturns) -> None:
    while True:
        try:
            await resync(ctx, logger, orphans)
        except KubeApiError as exc:
            logger.warning(f"GlobalNode resync failed: {http_error(exc)}; retrying in {interval:.0f}s")
        except Exception:  # the loop must outlive any one bad pass
            logger.exception("GlobalNode resync failed")
        await asyncio.sleep(interval)


@kopf.on.startup()
async def start_resync(memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    ctx: Context = memo.ctx
    if not ctx.config.cluster_scoped:
        return  # another shard's work
    memo.resync_task = asyncio.create_task(resync_loop(ctx, ctx.config.resync_interval, logger))


@kopf.on.cleanup()
async def stop_resync(memo: kopf.Memo, **_: Any) -> None:
    task = memo.get("resync_task")
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
