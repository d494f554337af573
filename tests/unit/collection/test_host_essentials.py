"""What the host needs stays schedulable: draining a node must not strand its DNS or the operator."""

from __future__ import annotations

from plugins.module_utils import globalnodes as gn
from plugins.module_utils.host_essentials import could_run_on, essential_pods_on, stranded_by_drain, tolerates

DNS = [{"namespace": "kube-system", "selector": {"matchLabels": {"k8s-app": "kube-dns"}}}]
CP_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def host_node(name, ready=True, unschedulable=False, taints=(), **labels):
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {"unschedulable": unschedulable, "taints": list(taints)},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name, node, namespace="kube-system", owner="ReplicaSet", selector=None, tolerations=(), phase="Running",
        **labels):
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {"k8s-app": "kube-dns"},
                         "ownerReferences": [{"kind": owner, "name": "x"}]},
            "spec": {"nodeName": node, "nodeSelector": selector or {}, "tolerations": list(tolerations)},
            "status": {"phase": phase}}


def test_only_matching_pods_on_the_node_count_and_daemonsets_do_not():
    pods = [pod("dns-1", "w1"), pod("dns-2", "w2"), pod("proxy", "w1", owner="DaemonSet"),
            pod("web", "w1", app="web"), pod("dns-done", "w1", phase="Succeeded"),
            pod("other-ns", "w1", namespace="default")]
    assert [p["metadata"]["name"] for p in essential_pods_on("w1", pods, DNS)] == ["dns-1"]


def test_a_pod_can_move_only_to_a_ready_schedulable_matching_node_it_tolerates():
    dns = pod("dns", "w1", selector={"zone": "a"})
    assert could_run_on(dns, host_node("w2", zone="a"))
    assert not could_run_on(dns, host_node("w2", zone="b"))
    assert not could_run_on(dns, host_node("w2", ready=False, zone="a"))
    assert not could_run_on(dns, host_node("w2", unschedulable=True, zone="a"))
    assert not could_run_on(dns, host_node("cp", taints=[CP_TAINT], zone="a"))
    tolerant = pod("dns", "w1", selector={"zone": "a"}, tolerations=[{"key": CP_TAINT["key"], "operator": "Exists"}])
    assert could_run_on(tolerant, host_node("cp", taints=[CP_TAINT], zone="a"))
    assert could_run_on(dns, host_node("w3", taints=[{"key": "k", "effect": "PreferNoSchedule"}], zone="a"))


def test_tolerations_follow_the_api_rules():
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert tolerates([{"operator": "Exists"}], taint)
    assert tolerates([{"key": "k", "operator": "Equal", "value": "v"}], taint)
    assert tolerates([{"key": "k", "operator": "Exists", "effect": "NoSchedule"}], taint)
    assert not tolerates([{"key": "k", "operator": "Equal", "value": "w"}], taint)
    assert not tolerates([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert not tolerates([], taint)


def test_a_drain_strands_the_dns_when_every_other_node_is_away_or_unfit():
    nodes = [host_node("cp", taints=[CP_TAINT]), host_node("w1"), host_node("w2"), host_node("w3", ready=False)]
    pods = [pod("coredns-a", "w1")]
    assert stranded_by_drain("w1", pods, nodes, set(), DNS) == []
    assert stranded_by_drain("w1", pods, nodes, {"w2"}, DNS) == ["kube-system/coredns-a"]
    assert stranded_by_drain("w2", pods, nodes, {"w1"}, DNS) == []  # nothing essential on w2


def test_the_claim_skips_a_protected_node_and_says_why():
    nodes = [gn_node("w1", pool="a"), gn_node("w2", pool="a"), gn_node("w3", pool="a")]

    def protected(name, away):
        return "draining it would leave kube-system/coredns-a nowhere to run" if name == "w1" else None

    plan = gn.plan_claim(nodes, "t1/vc1", policies=[{"labelSelector": {"matchLabels": {"pool": "a"}},
                                                     "nodeCount": 2}], protected=protected)
    assert plan.satisfied and plan.add == ["w2", "w3"]

    plan = gn.plan_claim(nodes, "t1/vc1", policies=[{"labelSelector": {"matchLabels": {"pool": "a"}},
                                                     "nodeCount": 3}], protected=protected)
    assert not plan.satisfied
    assert "w1 stays in the host: draining it would leave kube-system/coredns-a nowhere to run" in plan.message()

    plan = gn.plan_claim(nodes, "t1/vc1", names=["w1"], protected=protected)
    assert not plan.satisfied and plan.add == []
    assert plan.message() == ("0 of 1 nodes available: w1 stays in the host: draining it would leave "
                              "kube-system/coredns-a nowhere to run")


def test_the_claim_counts_its_own_choices_and_other_claims_as_away():
    seen = []
    nodes = [gn_node("w1"), gn_node("w2"), gn_node("w3", state="occupied", owner="t2/other")]

    def protected(name, away):
        seen.append((name, sorted(away)))
        return None

    gn.plan_claim(nodes, "t1/vc1", policies=[{"labelSelector": {}, "nodeCount": 2}], protected=protected)
    assert seen == [("w1", ["w3"]), ("w2", ["w1", "w3"])]


def gn_node(name, state="free", owner=None, **labels):
    status = {"state": state, **({"virtualCluster": owner} if owner else {})}
    return {"metadata": {"name": name}, "spec": {"labels": labels}, "status": status}
