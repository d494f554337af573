"""kosmos.kubenest.global_node on a real API server: compare-and-swap claims, all-or-nothing, check mode."""

from __future__ import annotations

import concurrent.futures
import itertools

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from tests.support.globalnodes import GROUP, PLURAL, VERSION, put_globalnode
from tests.support.playbook import run_module


@pytest.fixture(scope="module")
def globalnodes(api_client, kosmos_crds):
    api = kubernetes.client.CustomObjectsApi(api_client)
    addresses = itertools.count(20)  # one address per node, as kubelets report them

    def make(name, labels, state="free", address=None):
        put_globalnode(api, name, {"nodeIP": address or f"198.18.0.{next(addresses)}", "labels": labels},
                       {"state": state})

    api.make = make
    return api


def module(apiserver, check=False, **args):
    """Run the module once with ansible's ad-hoc command; returns (rc, result)."""
    rc, result, _out = run_module("global_node", apiserver.kubeconfig, check=check, diff=check, **args)
    return rc, result


def state(api, name):
    status = api.get_cluster_custom_object(GROUP, VERSION, PLURAL, name).get("status") or {}
    return status.get("state"), status.get("virtualCluster")


def policy(pool, count):
    return [{"labelSelector": {"matchLabels": {"pool": pool}}, "nodeCount": count}]


def test_reserve_is_all_or_nothing_and_check_mode_writes_nothing(globalnodes, apiserver):
    globalnodes.make("gm-a1", {"pool": "m"})
    globalnodes.make("gm-a2", {"pool": "m"})
    rc, res = module(apiserver, check=True, virtual_cluster="t1/one", state="reserved", policies=policy("m", 2))
    assert rc == 0 and res["changed"] and res["added"] == ["gm-a1", "gm-a2"]
    assert res["diff"]["after"]["gm-a1"]["state"] == "reserved"
    assert state(globalnodes, "gm-a1") == ("free", None)

    rc, res = module(apiserver, virtual_cluster="t1/one", state="reserved", policies=policy("m", 3))
    assert rc == 0 and not res["satisfied"] and not res["changed"]
    assert res["message"].startswith("2 of 3 nodes available")
    assert state(globalnodes, "gm-a1") == ("free", None) and state(globalnodes, "gm-a2") == ("free", None)

    rc, res = module(apiserver, virtual_cluster="t1/one", state="reserved", policies=policy("m", 2))
    assert rc == 0 and res["satisfied"] and sorted(res["assigned"]) == ["gm-a1", "gm-a2"]
    assert state(globalnodes, "gm-a2") == ("reserved", "t1/one")
    rc, res = module(apiserver, virtual_cluster="t1/one", state="reserved", policies=policy("m", 2))
    assert rc == 0 and not res["changed"]  # idempotent


def test_a_node_reporting_another_nodes_address_makes_neither_promotable(globalnodes, apiserver):
    # A root process on a node makes its kubelet report a neighbour's address: runs meant for the neighbour
    # would then connect to it.
    globalnodes.make("gm-i1", {"pool": "i"}, address="198.18.0.250")
    globalnodes.make("gm-i2", {"pool": "i"}, address="198.18.0.250")
    rc, res = module(apiserver, virtual_cluster="t1/one", state="reserved", select_nodes=["gm-i1"])
    assert rc == 0 and not res["satisfied"] and not res["changed"]
    assert "gm-i1 stays in the host: its address 198.18.0.250 is also GlobalNode gm-i2's" in res["message"]
    rc, res = module(apiserver, virtual_cluster="t1/one", state="reserved", policies=policy("i", 1))
    assert rc == 0 and not res["satisfied"] and state(globalnodes, "gm-i2") == ("free", None)
    globalnodes.patch_cluster_custom_object(GROUP, VERSION, PLURAL, "gm-i2", {"spec": {"nodeIP": "198.18.0.251"}})
    rc, res = module(apiserver, virtual_cluster="t1/one", state="reserved", policies=policy("i", 1))
    assert rc == 0 and res["satisfied"] and res["assigned"] == ["gm-i1"]
    assert module(apiserver, virtual_cluster="t1/one", state="free", names=["gm-i1"])[0] == 0


def test_another_virtual_cluster_cannot_move_a_held_node(globalnodes, apiserver):
    globalnodes.make("gm-b1", {"pool": "b"})
    assert module(apiserver, virtual_cluster="t1/one", state="reserved", names=["gm-b1"])[0] == 0
    rc, res = module(apiserver, virtual_cluster="t2/two", state="occupied", names=["gm-b1"])
    assert rc != 0 and "reserved by a virtual cluster of another namespace, not by t2/two" in res["msg"], res
    assert "t1/one" not in res["msg"]  # t2 may not learn what t1 calls its virtual clusters
    rc, res = module(apiserver, virtual_cluster="t1/three", state="occupied", names=["gm-b1"])
    assert rc != 0 and "reserved by t1/one, not by t1/three" in res["msg"]  # its own namespace's: named
    rc, res = module(apiserver, virtual_cluster="t1/one", state="returning", names=["gm-b1"])
    assert rc == 0 and state(globalnodes, "gm-b1") == ("returning", "t1/one")
    rc, res = module(apiserver, virtual_cluster="t1/one", state="occupied", names=["gm-b1"])
    assert rc != 0 and "cannot become occupied" in res["msg"]
    assert module(apiserver, virtual_cluster="t1/one", state="free", names=["gm-b1"])[0] == 0
    assert state(globalnodes, "gm-b1") == ("free", None)


def test_racing_claims_for_one_node_have_exactly_one_winner(globalnodes, apiserver):
    globalnodes.make("gm-c1", {"pool": "race"})
    owners = [f"t{i}/racer" for i in range(6)]
    with concurrent.futures.ThreadPoolExecutor(len(owners)) as pool:
        results = list(pool.map(lambda o: module(apiserver, virtual_cluster=o, state="reserved",
                                                 policies=policy("race", 1))[1], owners))
    winners = [o for o, r in zip(owners, results, strict=True) if r.get("satisfied") and r.get("assigned")]
    assert len(winners) == 1, results
    assert state(globalnodes, "gm-c1") == ("reserved", winners[0])
    losers = [r for o, r in zip(owners, results, strict=True) if o not in winners]
    assert all(not r["satisfied"] and "0 of 1 nodes available" in r["message"] for r in losers), losers


def _host_node(core, name, labels):
    try:
        core.delete_node(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
    core.patch_node_status(name, {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test",
         "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})


def test_a_node_whose_drain_would_strand_the_host_dns_is_not_reserved(globalnodes, apiserver, api_client):
    core = kubernetes.client.CoreV1Api(api_client)
    for name in ("gm-e1", "gm-e2"):
        globalnodes.make(name, {"pool": "e"})
        _host_node(core, name, {"pool": "e"})
    try:
        core.create_namespaced_service_account("kube-system", {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    # The host's DNS runs on gm-e1 and may only run on pool "e" nodes.
    core.create_namespaced_pod("kube-system", {
        "metadata": {"name": "dns-e", "labels": {"k8s-app": "kube-dns"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "dns",
                                          "uid": "00000000-0000-0000-0000-000000000001"}]},
        "spec": {"nodeName": "gm-e1", "nodeSelector": {"pool": "e"}, "automountServiceAccountToken": False,
                 "containers": [{"name": "dns", "image": "kubenest.local/pause:3.10"}]}})
    protect = [{"namespace": "kube-system", "selector": {"matchLabels": {"k8s-app": "kube-dns"}}}]
    try:
        rc, res = module(apiserver, virtual_cluster="t1/dns", state="reserved", policies=policy("e", 2),
                         protect=protect)
        assert rc == 0 and not res["satisfied"] and not res["changed"], res
        assert ("gm-e1 stays in the host: draining it would leave kube-system/dns-e nowhere to run"
                in res["message"]), res["message"]
        rc, res = module(apiserver, virtual_cluster="t1/dns", state="reserved", select_nodes=["gm-e1"],
                         protect=protect)
        assert rc == 0 and not res["satisfied"] and "gm-e1 stays in the host" in res["message"]
        assert state(globalnodes, "gm-e1") == ("free", None)

        # One of the two may go: the DNS keeps gm-e1; the other node is taken.
        rc, res = module(apiserver, virtual_cluster="t1/dns", state="reserved", policies=policy("e", 1),
                         protect=protect)
        assert rc == 0 and res["satisfied"] and res["assigned"] == ["gm-e2"], res
        # With gm-e2 held, the DNS on gm-e1 has nowhere else to go either way.
        rc, res = module(apiserver, virtual_cluster="t2/dns", state="reserved", select_nodes=["gm-e1"],
                         protect=protect)
        assert rc == 0 and not res["satisfied"] and "kube-system/dns-e" in res["message"]
        # Without protection the same request takes it (the check is what refuses).
        rc, res = module(apiserver, check=True, virtual_cluster="t2/dns", state="reserved", select_nodes=["gm-e1"])
        assert rc == 0 and res["satisfied"]
    finally:
        core.delete_namespaced_pod("dns-e", "kube-system", grace_period_seconds=0)
        for name in ("gm-e1", "gm-e2"):
            core.delete_node(name)


def test_free_nodes_are_kept_for_a_virtual_cluster_that_asked_earlier(globalnodes, apiserver):
    globalnodes.make("gm-q1", {"pool": "q"})
    globalnodes.make("gm-q2", {"pool": "q"})
    globalnodes.make("gm-q3", {"pool": "q"}, state="occupied")
    queue = [{"virtual_cluster": "t1/big", "policies": policy("q", 3)}]
    # big (3 nodes, one of them held elsewhere) asked first and waits: small may not take what big would get.
    rc, res = module(apiserver, virtual_cluster="t2/small", state="reserved", policies=policy("q", 1), queue=queue)
    assert rc == 0 and not res["satisfied"] and not res["changed"], res
    assert "gm-q1, gm-q2 kept for a virtual cluster that asked earlier" in res["message"], res["message"]
    rc, res = module(apiserver, virtual_cluster="t2/small", state="reserved", select_nodes=["gm-q2"], queue=queue)
    assert rc == 0 and not res["satisfied"]
    assert "gm-q2 is kept for a virtual cluster that asked earlier" in res["message"]
    assert state(globalnodes, "gm-q1") == ("free", None) and state(globalnodes, "gm-q2") == ("free", None)
    # The waiter itself is never blocked by its own entry, and without a queue the small request is served.
    rc, res = module(apiserver, check=True, virtual_cluster="t1/big", state="reserved", policies=policy("q", 2),
                     queue=queue)
    assert rc == 0 and res["satisfied"]
    rc, res = module(apiserver, check=True, virtual_cluster="t2/small", state="reserved", policies=policy("q", 1))
    assert rc == 0 and res["satisfied"]


def test_a_request_larger_than_the_host_could_ever_give_keeps_nothing_for_itself(globalnodes, apiserver):
    globalnodes.make("gm-h1", {"pool": "h"})
    globalnodes.make("gm-h2", {"pool": "h"})
    queue = [{"virtual_cluster": "t1/huge", "policies": policy("h", 1000)}]
    rc, res = module(apiserver, check=True, virtual_cluster="t1/huge", state="reserved", policies=policy("h", 1000))
    assert rc == 0 and not res["satisfied"]
    assert "998 node(s) more than the host has GlobalNodes for it" in res["message"], res["message"]
    # huge asked first and still waits, yet a later request that fits is served.
    rc, res = module(apiserver, virtual_cluster="t2/fits", state="reserved", policies=policy("h", 2), queue=queue)
    assert rc == 0 and res["satisfied"] and sorted(res["added"]) == ["gm-h1", "gm-h2"], res


def test_a_namespace_takes_only_its_pool_and_at_most_its_cap(globalnodes, apiserver):
    globalnodes.make("gm-r1", {"pool": "r", "team": "red"})
    globalnodes.make("gm-r2", {"pool": "r", "team": "red"})
    globalnodes.make("gm-r3", {"pool": "r", "team": "blue"})
    rules = [{"namespaces": ["red"], "node_selector": {"matchLabels": {"team": "red"}}, "max_nodes": 1}]
    rc, res = module(apiserver, virtual_cluster="red/a", state="reserved", select_nodes=["gm-r3"],
                     namespace_rules=rules)
    assert rc == 0 and not res["satisfied"]
    assert "gm-r3 stays in the host: outside the nodes namespace red may take" in res["message"], res["message"]
    rc, res = module(apiserver, virtual_cluster="red/a", state="reserved", policies=policy("r", 1),
                     namespace_rules=rules)
    assert rc == 0 and res["satisfied"] and res["added"] == ["gm-r1"], res
    rc, res = module(apiserver, virtual_cluster="red/b", state="reserved", policies=policy("r", 1),
                     namespace_rules=rules)
    assert rc == 0 and not res["satisfied"] and not res["changed"]
    assert "namespace red may hold at most 1 node(s) (its other virtual clusters hold 1)" in res["message"]
    # another namespace, which no rule names, takes what red may not
    rc, res = module(apiserver, virtual_cluster="blue/a", state="reserved", policies=policy("r", 2),
                     namespace_rules=rules)
    assert rc == 0 and res["satisfied"] and sorted(res["added"]) == ["gm-r2", "gm-r3"], res


def test_the_holder_records_agent_certificates_and_they_outlive_the_release(globalnodes, apiserver):
    globalnodes.make("gn-p1", {})
    old, new = "a" * 64, "B" * 64
    assert module(apiserver, virtual_cluster="t/a", state="reserved", names=["gn-p1"])[0] == 0
    rc, result = module(apiserver, virtual_cluster="t/b", names=["gn-p1"], agent_certificates=[new])
    assert rc != 0 and "only its holder t/b records" in result["msg"]
    rc, result = module(apiserver, virtual_cluster="t/a", names=["gn-p1"], agent_certificates=[old, new])
    assert rc == 0 and result["changed"], result
    status = globalnodes.get_cluster_custom_object(GROUP, VERSION, PLURAL, "gn-p1")["status"]
    assert status["state"] == "reserved" and status["agent"]["certificateSHA256"] == [old, new.lower()]
    assert not module(apiserver, virtual_cluster="t/a", names=["gn-p1"], agent_certificates=[new, old])[1]["changed"]
    rc, result = module(apiserver, virtual_cluster="t/a", state="free", names=["gn-p1"], agent_certificates=[new])
    assert rc == 0 and result["changed"]
    status = globalnodes.get_cluster_custom_object(GROUP, VERSION, PLURAL, "gn-p1")["status"]
    assert status["state"] == "free" and status["agent"]["certificateSHA256"] == [new.lower()]
    rc, result = module(apiserver, virtual_cluster="t/a", state="free", names=["gn-p1"], agent_certificates=["xyz"])
    assert rc != 0 and "not a list of SHA-256 fingerprints" in result["msg"]
