"""When a workload counts as rolled out, and which pod states end the wait at once."""

from __future__ import annotations

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils.rollout import (
    name_taints,
    pod_problem,
    rolled_out,
    untolerated_taints,
)


def workload(kind="Deployment", generation=2, wanted=1, **status):
    return {"kind": kind, "metadata": {"generation": generation}, "spec": {"replicas": wanted},
            "status": dict({"observedGeneration": generation}, **status)}


def test_a_deployment_is_rolled_out_when_every_replica_is_new_and_available():
    assert rolled_out(workload(availableReplicas=1, updatedReplicas=1, replicas=1))
    assert not rolled_out(workload(availableReplicas=1, updatedReplicas=1, replicas=2))  # an old pod still runs
    assert not rolled_out(workload(availableReplicas=0, updatedReplicas=1, replicas=1))
    stale = workload(availableReplicas=1, updatedReplicas=1, replicas=1)
    stale["status"]["observedGeneration"] = 1
    assert not rolled_out(stale)
    assert not rolled_out(None)


def test_a_statefulset_is_rolled_out_when_its_replicas_are_ready_on_the_current_revision():
    assert rolled_out(workload("StatefulSet", readyReplicas=1, currentRevision="a", updateRevision="a"))
    assert not rolled_out(workload("StatefulSet", readyReplicas=0, currentRevision="a", updateRevision="a"))
    assert not rolled_out(workload("StatefulSet", readyReplicas=1, currentRevision="a", updateRevision="b",
                                   updatedReplicas=0))


def waiting(reason, restarts=0, message="m"):
    return {"status": {"containerStatuses": [{"name": "etcd", "image": "r/etcd:1", "restartCount": restarts,
                                              "state": {"waiting": {"reason": reason, "message": message}},
                                              "lastState": {"terminated": {"exitCode": 2}}}]}}


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                                    "CreateContainerError", "ErrImageNeverPull"])
def test_waiting_reasons_that_waiting_cannot_cure_end_the_wait(reason):
    assert pod_problem(waiting(reason, message="back-off pulling")) == f"{reason}: back-off pulling"


@pytest.mark.parametrize("reason", ["ContainerCreating", "PodInitializing", "ErrImagePull"])
def test_passing_states_do_not(reason):
    assert pod_problem(waiting(reason)) is None


def test_a_crash_loop_counts_after_the_allowed_restarts():
    assert pod_problem(waiting("CrashLoopBackOff", restarts=1)) is None
    assert pod_problem(waiting("CrashLoopBackOff", restarts=2)) == \
        "CrashLoopBackOff: container etcd restarted 2 times (exit code 2)"


def test_unschedulable_counts_once_it_lasted():
    pod = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                      "message": "0/4 nodes are available: 1 node(s) didn't find available "
                                                 "persistent volumes to bind."}]}}
    assert pod_problem(pod, unschedulable_after=15, now=110.0, since=100.0) is None
    assert pod_problem(pod, unschedulable_after=15, now=115.0, since=100.0).startswith(
        "Unschedulable: 0/4 nodes are available: 1 node(s) didn't find available persistent volumes")
    assert pod_problem(pod) is None  # no time seen yet


def test_long_messages_are_cut():
    assert len(pod_problem(waiting("ImagePullBackOff", message="x " * 400))) < 330


def daemonset(desired=2, ready=2, updated=2, generation=3, observed=3):
    return {"kind": "DaemonSet", "metadata": {"generation": generation}, "spec": {},
            "status": {"observedGeneration": observed, "desiredNumberScheduled": desired, "numberReady": ready,
                       "updatedNumberScheduled": updated}}


def test_a_daemonset_is_rolled_out_when_each_chosen_node_runs_a_ready_pod_of_the_latest_template():
    assert rolled_out(daemonset())
    assert not rolled_out(daemonset(ready=1))  # one node's pod not ready yet
    assert not rolled_out(daemonset(updated=1))  # one node still runs the older template
    assert not rolled_out(daemonset(observed=2))  # the controller has not seen the latest spec
    assert rolled_out(daemonset(desired=0, ready=0, updated=0))  # no node chosen: nothing to wait for


def _node(name, *taints, labels=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": list(taints)}}


PRESSURE = {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "value": "db", "effect": "NoExecute"}
STEER = {"key": "busy", "effect": "PreferNoSchedule"}


def test_the_taints_that_keep_a_pod_off_each_node_are_named_as_the_scheduler_meant_them():
    nodes = [_node("w2", PRESSURE, STEER), _node("cp1", CONTROL_PLANE), _node("w1"), _node("w3", DEDICATED)]
    pod = {"spec": {"tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}}
    assert untolerated_taints(pod, nodes) == ["w2 node.kubernetes.io/disk-pressure:NoSchedule",
                                              "w3 dedicated=db:NoExecute"]
    # Equal needs the value; an empty key with Exists tolerates all; an effect given must be the taint's.
    assert untolerated_taints({"spec": {"tolerations": [{"key": "dedicated", "value": "db"}]}}, nodes[3:]) == []
    assert untolerated_taints({"spec": {"tolerations": [{"key": "dedicated", "value": "web"}]}}, nodes[3:]) != []
    assert untolerated_taints({"spec": {"tolerations": [{"operator": "Exists"}]}}, nodes) == []
    assert untolerated_taints({"spec": {"tolerations": [{"operator": "Exists", "effect": "NoExecute"}]}},
                              nodes[:1]) == ["w2 node.kubernetes.io/disk-pressure:NoSchedule"]
    # Nodes the pod's nodeSelector leaves out are not blamed.
    chosen = [_node("a", PRESSURE, labels={"pool": "x"}), _node("b", PRESSURE, labels={"pool": "y"})]
    assert untolerated_taints({"spec": {"nodeSelector": {"pool": "y"}}}, chosen) == [
        "b node.kubernetes.io/disk-pressure:NoSchedule"]


def test_only_an_unschedulable_problem_that_blames_taints_gets_them_named():
    message = "Unschedulable: 0/4 nodes are available: 4 node(s) had untolerated taint(s)."
    nodes = [_node(f"w{i}", PRESSURE) for i in range(8)]
    named = name_taints(message, {"spec": {}}, nodes)
    first = ", ".join(f"w{i} node.kubernetes.io/disk-pressure:NoSchedule" for i in range(6))
    assert named == f"{message} (untolerated: {first} and 2 more)"
    assert name_taints(message, {"spec": {"tolerations": [{"operator": "Exists"}]}}, nodes) == message
    other = "Unschedulable: 0/4 nodes are available: 4 Insufficient cpu."
    assert name_taints(other, {"spec": {}}, nodes) == other
    assert name_taints("ErrImageNeverPull: taint", {"spec": {}}, nodes) == "ErrImageNeverPull: taint"
