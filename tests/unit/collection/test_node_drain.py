"""What a drain evicts, leaves and refuses, decided before anything is touched."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_drain import (
    classify,
    eviction,
    refs,
    room_elsewhere,
)


def pod(name, owner=None, phase="Running", mirror=False, empty_dir=False):
    meta = {"name": name, "namespace": "ns"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o"}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "x"}
    volumes = [{"name": "scratch", "emptyDir": {}}] if empty_dir else [{"name": "c", "configMap": {"name": "c"}}]
    return {"metadata": meta, "spec": {"volumes": volumes}, "status": {"phase": phase}}


def test_daemonset_and_mirror_pods_stay_and_controlled_or_finished_pods_go():
    pods = [pod("rs", "ReplicaSet"), pod("ds", "DaemonSet"), pod("static", mirror=True),
            pod("done", phase="Succeeded"), pod("ds-failed", "DaemonSet", phase="Failed"), pod("sts", "StatefulSet")]
    evict, left, refusals = classify(pods)
    assert refs(evict) == ["ns/rs", "ns/done", "ns/ds-failed", "ns/sts"]
    assert refs(left) == ["ns/ds", "ns/static"]
    assert refusals == []


def test_pods_that_would_be_lost_are_refused_and_named_unless_allowed():
    pods = [pod("bare"), pod("scratch", "ReplicaSet", empty_dir=True), pod("rs", "ReplicaSet")]
    evict, _left, refusals = classify(pods)
    assert refs(evict) == ["ns/rs"]
    assert refusals == ["pods without a controller would be lost (force deletes them): ns/bare",
                        "pods with emptyDir data would lose it (delete_emptydir_data allows it): ns/scratch"]
    evict, _left, refusals = classify(pods, force=True, delete_emptydir_data=True)
    assert refs(evict) == ["ns/bare", "ns/scratch", "ns/rs"] and refusals == []


def test_an_eviction_names_only_the_pod():
    assert eviction(pod("rs", "ReplicaSet")) == {"apiVersion": "policy/v1", "kind": "Eviction",
                                                 "metadata": {"name": "rs", "namespace": "ns"}}


def _node(name, ready=True, unschedulable=False):
    return {"metadata": {"name": name}, "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_room_elsewhere_is_a_schedulable_ready_node_other_than_the_drained_one():
    assert not room_elsewhere([_node("a")], "a")
    assert not room_elsewhere([_node("a"), _node("b", unschedulable=True), _node("c", ready=False)], "a")
    assert not room_elsewhere([_node("a"), {"metadata": {"name": "d"}}], "a")  # no status yet
    assert room_elsewhere([_node("a"), _node("b")], "a")
