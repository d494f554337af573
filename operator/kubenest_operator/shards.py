"""Replicas that share the work: shards by namespace, each with a kopf peering of its own.

A shard is a set of kopf namespace patterns (``--namespace``) with a peering object of its own (``--peering``):
kopf watches only the VirtualClusters of those namespaces, and the replicas of one shard stand by for each other
as before. Exactly one shard does the cluster-scoped work (Nodes, GlobalNodes, clears, the reservations of
vanished virtual clusters); the others run with ``--no-cluster-scoped``.

A namespace is served whole by one shard, so its limit of runs at once and its shared look at the host objects
(host_objects.py) stay in one process. Two shards serving one namespace would both run its virtual clusters, and
kopf's records on the object (its finalizer, the last handled spec) would be written by both, so a replica
refuses to start while a live replica of another peering serves a namespace it would serve too. Each replica says
what it serves in an annotation of its peering object; a live replica whose peering says nothing (a release from
before shards) serves every namespace and the cluster-scoped work.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApi, KubeApiError

# kopf's own matcher: what it says is exactly what kopf watches.
from kopf._cogs.structs.references import match_namespace

from .peering import CLUSTER_PEERINGS, PEERING_GROUP, PEERING_VERSION, live_peers

SHARD_ANNOTATION = "kubenest.kosmos.io/shard"


@dataclass(frozen=True)
class Shard:
    """What one replica serves: namespace patterns (none: every namespace) and whether the cluster-scoped work."""

    namespaces: tuple[str, ...] = ()
    cluster_scoped: bool = True

    def serves(self, namespace: str) -> bool:
        return not self.namespaces or any(match_namespace(namespace, pattern) for pattern in self.namespaces)

    def annotation(self) -> str:
        return json.dumps({"namespaces": list(self.namespaces), "clusterScoped": self.cluster_scoped}, sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str | None) -> Shard:
        """The shard a peering object says it serves; every namespace and the cluster-scoped work if it says
        nothing or nothing readable (a replica from before shards)."""
        try:
            found = json.loads(text) if text else {}
            namespaces = tuple(str(pattern) for pattern in found.get("namespaces") or ())
            return cls(namespaces, bool(found.get("clusterScoped", True)))
        except (ValueError, TypeError, AttributeError):
            return cls()

    def describe(self) -> str:
        served = f"namespaces {', '.join(self.namespaces)}" if self.namespaces else "all namespaces"
        return served + (" and the cluster-scoped work" if self.cluster_scoped else "")


def overlaps(mine: Shard, peerings: Iterable[Mapping[str, Any]], own_peering: str, own_identity: str,
             namespaces: Sequence[str], now: datetime.datetime | None = None) -> list[str]:
    """Why this replica must not start: each live replica of another peering that serves what it would serve
    (the namespaces named are those that exist now; kopf patterns cannot be compared with each other)."""
    now = now or datetime.datetime.now(datetime.UTC)
    found = []
    for peering in peerings:
        meta = peering.get("metadata") or {}
        name = meta.get("name") or ""
        if name == own_peering:
            continue  # our own shard: its replicas stand by for each other through kopf's peering
        peers = live_peers(peering.get("status"), own_identity, now)
        if not peers:
            continue
        theirs = Shard.from_annotation((meta.get("annotations") or {}).get(SHARD_ANNOTATION))
        shared = [ns for ns in namespaces if mine.serves(ns) and theirs.serves(ns)]
        both = (["the cluster-scoped work"] if mine.cluster_scoped and theirs.cluster_scoped else []) + (
            [f"namespace{'s' if len(shared) > 1 else ''} {', '.join(shared[:5])}{' …' if len(shared) > 5 else ''}"]
            if shared else [])
        if both:
            found.append(f"peering {name!r} has {len(peers)} live replica(s) serving {theirs.describe()}; "
                         f"both would serve {' and '.join(both)}")
    return found


class Overlap(Exception):
    """A live replica of another peering serves what this one would."""


def _peering_path(name: str = "") -> str:
    return f"/apis/{PEERING_GROUP}/{PEERING_VERSION}/{CLUSTER_PEERINGS}" + (f"/{name}" if name else "")


def existing_namespaces(api: KubeApi, shard: Shard) -> list[str]:
    try:
        return [item["metadata"]["name"] for item in api.request("GET", "/api/v1/namespaces").get("items") or []]
    except KubeApiError as exc:
        if exc.status != 403:
            raise
        # Without the right to list them: the namespaces this shard names outright.
        return [pattern for pattern in shard.namespaces if not any(c in pattern for c in "*?!,")]


def refuse_overlaps(api: KubeApi, shard: Shard, peering: str, identity: str) -> None:
    peerings = api.request("GET", _peering_path()).get("items") or []
    found = overlaps(shard, peerings, peering, identity, existing_namespaces(api, shard))
    if found:
        raise Overlap(f"this replica would serve {shard.describe()} (peering {peering!r}), but " + "; ".join(found)
                      + ". Give each shard namespaces of its own and --no-cluster-scoped to all but one, "
                        "or wait for the other replicas to stop (a killed one counts for its peering lifetime).")


def mark(api: KubeApi, peering: str, shard: Shard) -> None:
    """Say in the peering object what its replicas serve (it does not exist yet: kopf waits for it, and so
    does the mark, at the next start)."""
    api.request("PATCH", _peering_path(peering), body={"metadata": {"annotations": {
        SHARD_ANNOTATION: shard.annotation()}}}, content_type="application/merge-patch+json", ok_missing=True)


def cluster_scoped_here(memo: Any, **_: Any) -> bool:
    """kopf filter for the handlers of the cluster-scoped work."""
    return bool(memo.ctx.config.cluster_scoped)


class ShardGuard:
    """The start's check again before every run, for one namespace: one made after the start can fall to two live
    shards (say `team-*` and `!team-b-*`, once `team-a-x` exists). Neither runs anything there then, until one
    shard alone serves it. The peerings are read at most once every `every` seconds."""

    def __init__(self, read: Callable[[], list[dict]] | None = None, shard: Shard | None = None,
                 peering: str | None = None, identity: str = "", every: float = 30.0):
        self.read, self.peering, self.identity, self.every = read, peering, identity, every
        self.shard = Shard((shard or Shard()).namespaces, cluster_scoped=False)  # checked at start already
        self._peerings: list[dict] = []
        self._read_at: float | None = None

    async def others(self, namespace: str) -> list[str]:
        """What else serves `namespace`; empty when only this shard does (always for a standalone process)."""
        if self.read is None or self.peering is None:
            return []
        now = time.monotonic()
        if self._read_at is None or now - self._read_at >= self.every:
            self._peerings = await asyncio.to_thread(self.read)
            self._read_at = now
        return overlaps(self.shard, self._peerings, self.peering, self.identity, [namespace])

    async def refuse(self, namespace: str) -> str | None:
        """Why no run may start in `namespace` now, or None."""
        others = await self.others(namespace)
        if not others:
            return None
        return (f"namespace {namespace} is served by more than one shard ({'; '.join(others)}): no run here until "
                "one shard alone serves it; give the shards namespace patterns that do not overlap")


def peerings_reader(host: Any) -> Callable[[], list[dict]]:
    """Reads every peering with a client lent by `host` (clients.Lender)."""
    def read() -> list[dict]:
        with host.client() as api:
            return api.request("GET", _peering_path()).get("items") or []
    return read
