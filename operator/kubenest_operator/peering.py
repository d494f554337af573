"""Which replica works: kopf peering, with priorities given by seniority.

kopf pauses an operator while a live peer with a higher priority exists, and pauses *all* peers of equal
priority. Replicas therefore need distinct priorities; taking one below every live peer's means the
replica that already works keeps working and newcomers wait as standbys, so a starting replica never takes
objects away from one in the middle of a run. Before kopf starts, the replica writes its record into the
peering object and waits a moment, so replicas that start together see each other from their first event.
"""

from __future__ import annotations

import datetime
import getpass
import logging
import os
import random
import socket
import time
from collections.abc import Mapping
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApi

log = logging.getLogger(__name__)

PEERING_GROUP, PEERING_VERSION, CLUSTER_PEERINGS = "kopf.dev", "v1", "clusterkopfpeerings"
TOP_PRIORITY = 1_000_000_000
PRIORITY_SPREAD = 1_000_000
LIFETIME = 60  # kopf's default peer lifetime


def own_identity() -> str:
    """kopf's convention: the pod name when deployed (POD_ID), else user@host/pid."""
    pod = os.environ.get("POD_ID")
    if pod:
        return pod
    return f"{getpass.getuser()}@{socket.gethostname()}/{os.getpid()}"


def live_peers(status: Mapping[str, Any] | None, identity: str, now: datetime.datetime) -> dict[str, int]:
    """identity -> priority of the peers in a peering object's status that have not expired, except us."""
    peers = {}
    for peer_id, info in (status or {}).items():
        if peer_id == identity or not isinstance(info, Mapping):
            continue
        try:
            lastseen = datetime.datetime.fromisoformat(info["lastseen"])
            if lastseen.tzinfo is None:
                lastseen = lastseen.replace(tzinfo=datetime.UTC)
            lifetime = datetime.timedelta(seconds=int(info.get("lifetime", LIFETIME)))
            priority = int(info.get("priority", 0))
        except (KeyError, TypeError, ValueError):
            continue
        if lastseen + lifetime > now:
            peers[peer_id] = priority
    return peers


def junior_priority(peer_priorities: list[int], rng: random.Random | None = None) -> int:
    """A priority below every live peer's; random within a wide spread so simultaneous starters differ."""
    ceiling = min([TOP_PRIORITY, *peer_priorities])
    return ceiling - (rng or random).randint(1, PRIORITY_SPREAD)


def _record(priority: int, now: datetime.datetime) -> dict[str, Any]:
    return {"priority": priority, "lifetime": LIFETIME, "lastseen": now.isoformat()}


def claim_priority(api: KubeApi, peering: str, identity: str, settle: float = 3.0, attempts: int = 5) -> int:
    """Register in the peering object with a junior priority; returns the priority to run kopf with."""
    path = f"/apis/{PEERING_GROUP}/{PEERING_VERSION}/{CLUSTER_PEERINGS}/{peering}"
    for _attempt in range(attempts):
        obj = api.request("GET", path, ok_missing=True)
        if obj is None:
            log.error("ClusterKopfPeering %r does not exist; kopf will wait for it (deploy/operator/peering.yaml)",
                      peering)
            return TOP_PRIORITY - PRIORITY_SPREAD - 1
        now = datetime.datetime.now(datetime.UTC)
        priority = junior_priority(list(live_peers(obj.get("status"), identity, now).values()))
        api.request("PATCH", path, body={"status": {identity: _record(priority, now)}},
                    content_type="application/merge-patch+json")
        time.sleep(settle)
        obj = api.request("GET", path)
        others = live_peers(obj.get("status"), identity, datetime.datetime.now(datetime.UTC))
        if priority not in others.values():
            log.info("peering %r: priority %d, %d live peer(s)", peering, priority, len(others))
            return priority
        log.warning("peering %r: a peer took the same priority %d; choosing again", peering, priority)
    raise RuntimeError(f"could not find a free priority in peering {peering!r}")


def leave(api: KubeApi, peering: str, identity: str) -> None:
    """Take this replica's record out of the peering object (kopf does so itself at a clean stop)."""
    path = f"/apis/{PEERING_GROUP}/{PEERING_VERSION}/{CLUSTER_PEERINGS}/{peering}"
    api.request("PATCH", path, body={"status": {identity: None}}, content_type="application/merge-patch+json",
                ok_missing=True)
