"""Shards by namespace: what a replica serves, and when it must not start."""

from __future__ import annotations

import asyncio
import datetime
from types import SimpleNamespace

import kopf
import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from kubenest_operator import shards
from kubenest_operator.cli import config_from_args, parser
from kubenest_operator.kube import Api as HostApi
from kubenest_operator.shards import SHARD_ANNOTATION, Overlap, Shard, overlaps

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
NAMESPACES = ["default", "kube-system", "team-a-dev", "team-a-prod", "team-b", "lab"]


def peering(name: str, shard: Shard | None, *peers: str, seconds_ago: int = 5) -> dict:
    annotations = {SHARD_ANNOTATION: shard.annotation()} if shard is not None else {}
    lastseen = (NOW - datetime.timedelta(seconds=seconds_ago)).isoformat()
    return {"metadata": {"name": name, "annotations": annotations},
            "status": {peer: {"priority": 1, "lifetime": 60, "lastseen": lastseen} for peer in peers}}


def test_a_shard_serves_what_its_kopf_patterns_match():
    shard = Shard(("team-a-*", "lab"))
    assert [ns for ns in NAMESPACES if shard.serves(ns)] == ["team-a-dev", "team-a-prod", "lab"]
    rest = Shard(("!team-a-*, !lab",))
    assert [ns for ns in NAMESPACES if rest.serves(ns)] == ["default", "kube-system", "team-b"]
    assert all(Shard().serves(ns) for ns in NAMESPACES)


def test_a_peering_that_says_nothing_serves_everything():
    assert Shard.from_annotation(None) == Shard((), True)
    assert Shard.from_annotation("not json") == Shard((), True)
    assert Shard.from_annotation("[1]") == Shard((), True)
    said = Shard(("team-a-*",), cluster_scoped=False)
    assert Shard.from_annotation(said.annotation()) == said


def test_disjoint_shards_with_one_doing_the_cluster_scoped_work_start():
    a = Shard(("team-a-*",), cluster_scoped=False)
    rest = Shard(("!team-a-*",), cluster_scoped=True)
    assert overlaps(a, [peering("kn-rest", rest, "r1")], "kn-a", "a1", NAMESPACES, NOW) == []
    assert overlaps(rest, [peering("kn-a", a, "a1")], "kn-rest", "r1", NAMESPACES, NOW) == []


def test_a_shard_overlapping_a_live_one_is_refused_with_the_namespaces_named():
    a = Shard(("team-a-*",), cluster_scoped=False)
    wide = Shard(("team-*",), cluster_scoped=False)
    found = overlaps(wide, [peering("kn-a", a, "a1", "a2")], "kn-wide", "w1", NAMESPACES, NOW)
    assert found == ["peering 'kn-a' has 2 live replica(s) serving namespaces team-a-*; "
                     "both would serve namespaces team-a-dev, team-a-prod"]


def test_two_shards_doing_the_cluster_scoped_work_are_refused():
    found = overlaps(Shard(("lab",)), [peering("kn-a", Shard(("team-a-*",)), "a1")], "kn-lab", "l1", NAMESPACES, NOW)
    assert len(found) == 1 and "both would serve the cluster-scoped work" in found[0]


def test_a_live_replica_from_before_shards_serves_everything():
    found = overlaps(Shard(("lab",), cluster_scoped=False), [peering("kubenest", None, "old")], "kn-lab", "l1",
                     NAMESPACES, NOW)
    assert len(found) == 1 and "serving all namespaces and the cluster-scoped work" in found[0]
    assert "namespace lab" in found[0]


def test_replicas_of_the_own_peering_and_stopped_ones_do_not_count():
    everything = Shard()
    assert overlaps(everything, [peering("kubenest", None, "other-replica")], "kubenest", "me", NAMESPACES,
                    NOW) == []
    assert overlaps(everything, [peering("kn-a", Shard(("team-a-*",)), "a1", seconds_ago=61)], "kubenest", "me",
                    NAMESPACES, NOW) == []
    assert overlaps(everything, [peering("kn-a", Shard(("team-a-*",)), "me")], "kubenest", "me", NAMESPACES,
                    NOW) == []


class Api:
    """Stub of the collection's client: answers GET by path, records the rest."""

    def __init__(self, answers: dict):
        self.answers, self.sent = answers, []

    def request(self, method, path, body=None, **kwargs):
        if method != "GET":
            self.sent.append((method, path, body))
            return {}
        answer = self.answers[path]
        if isinstance(answer, Exception):
            raise answer
        return answer


PEERINGS = "/apis/kopf.dev/v1/clusterkopfpeerings"


def test_refusal_names_the_way_out():
    live = peering("kn-a", Shard(("team-a-*",)), "a1", seconds_ago=0)
    live["status"]["a1"]["lastseen"] = datetime.datetime.now(datetime.UTC).isoformat()
    api = Api({PEERINGS: {"items": [live]}, "/api/v1/namespaces": {"items": [{"metadata": {"name": "team-a-x"}}]}})
    with pytest.raises(Overlap, match=r"namespace team-a-x.*--no-cluster-scoped to all but one"):
        shards.refuse_overlaps(api, Shard(("team-*",)), "kn-wide", "w1")


def test_without_the_right_to_list_namespaces_the_named_ones_are_compared():
    api = Api({"/api/v1/namespaces": KubeApiError("forbidden", status=403)})
    assert shards.existing_namespaces(api, Shard(("lab", "team-*", "!x"))) == ["lab"]


def test_the_mark_says_what_the_shard_serves():
    api = Api({})
    shards.mark(api, "kn-a", Shard(("team-a-*",), cluster_scoped=False))
    (method, path, body), = api.sent
    assert (method, path) == ("PATCH", f"{PEERINGS}/kn-a")
    assert Shard.from_annotation(body["metadata"]["annotations"][SHARD_ANNOTATION]) == Shard(("team-a-*",), False)


def test_the_flag_leaves_the_cluster_scoped_work_to_another_shard(tmp_path):
    given = ["--kubeconfig", str(tmp_path / "kubeconfig"), "--playbook-dir", str(tmp_path)]
    config = config_from_args(parser().parse_args([*given, "--namespace", "team-a-*", "--no-cluster-scoped"]))
    assert config.shard == Shard(("team-a-*",), cluster_scoped=False)
    assert config_from_args(parser().parse_args(given)).shard == Shard((), cluster_scoped=True)


def test_listing_a_shards_virtualclusters_keeps_those_its_patterns_match(monkeypatch):
    items = [{"metadata": {"namespace": ns, "name": "vc"}} for ns in NAMESPACES]

    def request_now(self, method, path, **_):
        assert path == "/apis/kosmos.io/v1alpha1/virtualclusters"
        return {"items": items}

    monkeypatch.setattr(HostApi, "request_now", request_now)
    api = HostApi.__new__(HostApi)
    assert [vc["metadata"]["namespace"] for vc in api.virtualclusters_now(("team-a-*",))] == [
        "team-a-dev", "team-a-prod"]
    assert len(api.virtualclusters_now()) == len(NAMESPACES)


def live(name: str, shard: Shard, *peers: str) -> dict:
    found = peering(name, shard, *peers)
    for record in found["status"].values():
        record["lastseen"] = datetime.datetime.now(datetime.UTC).isoformat()
    return found


def test_a_namespace_made_after_the_start_that_two_shards_serve_gets_no_run_from_either():
    reads = []

    def read():
        reads.append(1)
        return [live("kn-wide", Shard(("team-*",), cluster_scoped=False), "w1")]

    guard = shards.ShardGuard(read, Shard(("!team-b-*",), cluster_scoped=True), "kn-rest", "r1", every=3600)
    refused = asyncio.run(guard.refuse("team-a-new"))
    assert refused.startswith("namespace team-a-new is served by more than one shard (peering 'kn-wide' has 1 live "
                              "replica(s) serving namespaces team-*; both would serve namespace team-a-new)")
    assert asyncio.run(guard.refuse("lab")) is None
    assert asyncio.run(guard.refuse("team-b-x")) is None
    assert len(reads) == 1  # read once per period, not once per run
    # The cluster-scoped work was checked at the start; here only namespaces count.
    assert "cluster-scoped" not in refused


def test_a_standalone_process_and_the_default_guard_refuse_nothing():
    assert asyncio.run(shards.ShardGuard().refuse("anything")) is None
    assert asyncio.run(shards.ShardGuard(lambda: [live("x", Shard(), "p")], Shard(), None).refuse("ns")) is None


def test_no_run_slot_is_taken_in_a_namespace_two_shards_serve():
    from kubenest_operator.slots import ObjectLocks, RunSlots, exclusive_run

    guard = shards.ShardGuard(lambda: [live("kn-wide", Shard(("team-*",)), "w1")], Shard(("team-a-*",)), "kn-a",
                              "a1", every=45)
    ctx = SimpleNamespace(shard_guard=guard, slots=RunSlots(1, 1), locks=ObjectLocks())

    async def attempt():
        async with exclusive_run(ctx, "team-a-x", "vc", "Completed"):
            raise AssertionError("a run slot was taken")

    with pytest.raises(kopf.TemporaryError, match="served by more than one shard") as caught:
        asyncio.run(attempt())
    assert caught.value.delay == 45
