"""Replicas sharing the work by namespace, each shard with its own kopf peering (operator/kubenest_operator/shards.py):
each virtual cluster is run by its shard only, the cluster-scoped work by the one shard that does it, and a
replica that would serve what a live one of another shard serves refuses to start."""

from __future__ import annotations

import uuid

from kubernetes.client.rest import ApiException

from tests.integration.operator.operatorproc import condition, phase, wait_for_vc
from tests.support.procs import wait_until

TIMEOUT = 120
PEERINGS = ("kopf.dev", "v1", "clusterkopfpeerings")


def new_peering(kube, name: str) -> None:
    kube.custom.create_cluster_custom_object(*PEERINGS, {
        "apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}})


def delete_quietly(call, *args) -> None:
    try:
        call(*args)
    except ApiException as exc:
        if exc.status != 404:
            raise


def ready(vc: dict | None) -> bool:
    return phase(vc) == "Completed" and condition(vc).get("status") == "True"


def test_each_shard_runs_its_own_namespaces_and_one_the_cluster_scoped_work(kube, operators):
    tag = uuid.uuid4().hex[:6]
    peering_a, peering_rest = f"kn-shard-a-{tag}", f"kn-shard-rest-{tag}"
    node = f"shard-node-{tag}"
    for name in (peering_a, peering_rest):
        new_peering(kube, name)
    team_a, other = kube.new_namespace(f"sa{tag}", sleep=0), kube.new_namespace(f"sb{tag}", sleep=0)
    try:
        shard_a = operators.start("shard-a", "--namespace", f"sa{tag}-*", "--no-cluster-scoped",
                                  "--peering", peering_a, standalone=False)
        # Two patterns: rest also serves sa<tag>-late-*, a namespace that does not exist yet.
        rest = operators.start("shard-rest", "--namespace", f"sb{tag}-*", f"sa{tag}-late-*", "--peering",
                               peering_rest, standalone=False)
        kube.create_vc(team_a, "alpha", {})
        kube.create_vc(other, "beta", {})
        wait_for_vc(kube, team_a, "alpha", ready, TIMEOUT, "alpha Ready", shard_a)
        wait_for_vc(kube, other, "beta", ready, TIMEOUT, "beta Ready", rest)
        assert "alpha] run " in shard_a.log() and "beta] run " not in shard_a.log()
        assert "beta] run " in rest.log() and "alpha] run " not in rest.log()
        assert kube.runs(team_a, "alpha")["present"] == 1 and kube.runs(other, "beta")["present"] == 1

        # A worker Node gets its GlobalNode from the shard doing the cluster-scoped work, and only from it.
        kube.core.create_node({"metadata": {"name": node}})
        wait_until(lambda: f"GlobalNode {node} created" in rest.log(), 60, f"GlobalNode {node}", rest.process)
        assert node not in shard_a.log()

        # Each peering says what its replicas serve.
        marks = {name: kube.custom.get_cluster_custom_object(*PEERINGS, name)["metadata"]["annotations"][
            "kubenest.kosmos.io/shard"] for name in (peering_a, peering_rest)}
        assert marks == {peering_a: f'{{"clusterScoped": false, "namespaces": ["sa{tag}-*"]}}',
                         peering_rest: f'{{"clusterScoped": true, "namespaces": ["sb{tag}-*", "sa{tag}-late-*"]}}'}

        # A namespace made after both started that both serve: neither runs its virtual cluster, and it says why.
        late = f"sa{tag}-late-1"
        kube.core.create_namespace({"metadata": {"name": late}})
        kube.set_control(late, sleep=0)
        kube.create_vc(late, "gamma", {})
        wait_for_vc(kube, late, "gamma", lambda vc: condition(vc).get("reason") == "ShardOverlap", TIMEOUT,
                    "gamma refused by both shards", shard_a)
        assert condition(kube.vc(late, "gamma"))["message"].startswith(
            f"namespace {late} is served by more than one shard (peering ")
        wait_until(lambda: "served by more than one shard" in rest.log(), 60, "the second refusal", rest.process)
        assert kube.runs(late, "gamma")["present"] == 0

        # A replica of another peering that would also serve team_a refuses to start, naming what overlaps,
        # and leaves nothing behind in its peering.
        peering_wide = f"kn-shard-wide-{tag}"
        new_peering(kube, peering_wide)
        wide = operators.new("shard-wide", "--namespace", f"sa{tag}-*", f"sb{tag}-*", "--no-cluster-scoped",
                             "--peering", peering_wide, standalone=False)
        wide.process.start()
        wait_until(lambda: not wide.running(), 60, "the overlapping replica to stop", None)
        assert wide.process.proc.returncode == 2, wide.log()[-3000:]
        assert f"peering '{peering_a}' has 1 live replica(s) serving namespaces sa{tag}-*" in wide.log()
        assert f"both would serve namespaces {team_a}, {late}" in wide.log()
        assert not (kube.custom.get_cluster_custom_object(*PEERINGS, peering_wide).get("status") or {})
        assert "alpha] run " not in wide.log()

        # A second shard doing the cluster-scoped work is refused too.
        lab = operators.new("shard-lab", "--namespace", f"sc{tag}-*", "--peering", peering_wide, standalone=False)
        lab.process.start()
        wait_until(lambda: not lab.running(), 60, "the second cluster-scoped replica to stop", None)
        assert lab.process.proc.returncode == 2
        assert "both would serve the cluster-scoped work" in lab.log()

        # Once both have stopped, the wider shard may start: it serves team_a's changes and the late namespace.
        assert shard_a.stop() == 0 and rest.stop() == 0
        wide = operators.start("shard-wide-again", "--namespace", f"sa{tag}-*", f"sb{tag}-*", "--no-cluster-scoped",
                               "--peering", peering_wide, standalone=False)
        wait_for_vc(kube, late, "gamma", ready, TIMEOUT, "gamma Ready once one shard serves it", wide)
        changed = kube.patch_vc_spec(team_a, "alpha", {"externalIP": "192.0.2.30"})
        wait_for_vc(kube, team_a, "alpha", lambda vc: ready(vc) and vc["status"].get("observedGeneration", 0) >=
                    changed["metadata"]["generation"], TIMEOUT, "alpha updated by the wider shard", wide)
        assert "alpha] run " in wide.log()
    finally:
        delete_quietly(kube.core.delete_node, node)
        delete_quietly(kube.custom.delete_cluster_custom_object, "kosmos.io", "v1alpha1", "globalnodes", node)
        for name in (peering_a, peering_rest, f"kn-shard-wide-{tag}"):
            delete_quietly(kube.custom.delete_cluster_custom_object, *PEERINGS, name)
