"""Which promoted nodes belong to a vanished virtual cluster, and that each gets one return run at a time."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from kubenest_operator import orphans


def gn(name, state, owner=None):
    return {"metadata": {"name": name}, "status": {"state": state, **({"virtualCluster": owner} if owner else {})}}


def test_only_promoted_nodes_with_a_proper_owner_count():
    assert orphans.orphan_owner(gn("w1", "occupied", "t1/vc")) == ("t1", "vc")
    assert orphans.orphan_owner(gn("w1", "returning", "t1/vc")) == ("t1", "vc")
    assert orphans.orphan_owner(gn("w1", "reserved", "t1/vc")) is None  # released by the resync itself
    assert orphans.orphan_owner(gn("w1", "held", "t1/vc")) is None  # kept on purpose
    assert orphans.orphan_owner(gn("w1", "free")) is None
    assert orphans.orphan_owner(gn("w1", "occupied", "nonsense")) is None


class Api:
    def __init__(self, vcs=(), secrets=(), forbidden=False):
        self.vcs, self.secrets, self.forbidden = set(vcs), set(secrets), forbidden

    async def virtualcluster_exists(self, namespace, name):
        if self.forbidden:
            raise KubeApiError("GET x", status=403)
        return (namespace, name) in self.vcs

    async def read_secret_data(self, namespace, name):
        if (namespace, name) not in self.secrets:
            raise KubeApiError("GET x", status=404)
        return {"kubeconfig": "x"}


@pytest.mark.parametrize(("api", "returned"), [
    (Api(), ["t1/gone"]),
    (Api(vcs={("t1", "gone")}), []),  # still there (deleting: its own handler returns the nodes)
    (Api(secrets={("t1", "gone-admin-kubeconfig")}), []),  # a plain-playbook virtual cluster
    (Api(forbidden=True), []),  # cannot tell: leave it
])
def test_a_run_starts_only_for_a_virtual_cluster_that_is_really_gone(monkeypatch, api, returned):
    started = []

    async def fake_return(ctx, namespace, name, logger):
        started.append(f"{namespace}/{name}")
        await asyncio.sleep(0.05)

    monkeypatch.setattr(orphans, "_return_nodes", fake_return)

    async def scenario():
        tracker = orphans.OrphanReturns()
        ctx = SimpleNamespace(api=api)
        nodes = [gn("w1", "occupied", "t1/gone"), gn("w2", "returning", "t1/gone"), gn("w3", "free")]
        await tracker.look(ctx, nodes, logging.getLogger("test"))
        await tracker.look(ctx, nodes, logging.getLogger("test"))  # the first run is still going
        for _tick in range(200):  # its end, however slow the machine (bounded: 2 s)
            if not tracker.running:
                break
            await asyncio.sleep(0.01)
        assert tracker.running == {}
        await tracker.stop()

    asyncio.run(scenario())
    assert started == returned
