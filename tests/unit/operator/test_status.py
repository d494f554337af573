"""Status patches: only the operator's fields, stale values nulled, conditions keyed by type."""

from __future__ import annotations

import pytest

from kubenest_operator import status as st
from kubenest_operator.progress import Progress

OWNED = {"phase", "message", "reason", "observedGeneration", "endpoint", "nodes", "nodeCount", "nodesReady",
         "kubeconfigSecretRef", "progress", "waitingSince", "kubernetesVersion"}


def progress(**kw) -> dict:
    snapshot = Progress(kw.get("role"), kw.get("task"), kw.get("done", 0), kw.get("total"), 1)
    return st.progress_fields("run-1", "virtualcluster.yml", "2026-01-01T00:00:00Z", snapshot)


def test_run_start_sets_phase_and_fresh_progress_with_nulls_for_the_unknown():
    patch = st.run_started("Preparing", "run-1", "virtualcluster.yml", "2026-01-01T00:00:00Z",
                           Progress(None, None, 0, None, 0), "present")
    assert patch == {"status": {
        "phase": "Preparing", "reason": None, "message": "running virtualcluster.yml (state present)",
        "progress": {"runID": "run-1", "playbook": "virtualcluster.yml", "currentRole": None, "currentTask": None,
                     "tasksDone": 0, "tasksTotal": None, "summary": "0/?", "startedAt": "2026-01-01T00:00:00Z"}}}


def test_progress_patch_touches_only_progress():
    patch = st.progressed("run-1", "virtualcluster.yml", "t0", Progress("etcd", "Start etcd", 4, 20, 7))
    assert list(patch["status"]) == ["progress"]
    assert patch["status"]["progress"]["currentRole"] == "etcd" and patch["status"]["progress"]["tasksTotal"] == 20
    assert patch["status"]["progress"]["summary"] == "4/20 Start etcd"


def test_the_progress_column_names_the_step_and_keeps_to_one_line():
    assert st.progress_summary(12, 40, "Step Kubelet") == "12/40 Step Kubelet"
    assert st.progress_summary(3, None, None) == "3/?"
    long = st.progress_summary(1, 2, "Wait until every evicted pod of the node is gone from the host cluster")
    assert long.startswith("1/2 Wait until every evicted") and long.endswith("…")
    assert len(long) == len("1/2 ") + st.SUMMARY_TASK_CHARS


def test_success_records_the_result_and_makes_this_run_the_next_estimate():
    nodes = st.node_entries([{"name": "n1", "ip": "198.18.0.12", "ready": True}, {"name": "n2", "ready": False},
                             "junk", {"ip": "no-name"}])
    patch = st.succeeded(generation=4, endpoint="https://192.0.2.1:31443", nodes=nodes, wanted=2,
                         secret_name="vc1-admin-kubeconfig", secret_key="kubeconfig",
                         progress=progress(role="etcd", task="last", done=17, total=12), kubernetes_version="v1.36.3")
    status = patch["status"]
    assert set(status) <= OWNED
    assert status["phase"] == "Completed" and status["reason"] is None and status["message"] is None
    assert status["observedGeneration"] == 4 and status["nodeCount"] == 2 and status["nodesReady"] == "1/2"
    assert status["nodes"] == [{"name": "n1", "ip": "198.18.0.12", "ready": True}, {"name": "n2", "ready": False}]
    assert status["kubeconfigSecretRef"] == {"name": "vc1-admin-kubeconfig", "key": "kubeconfig"}
    assert status["kubernetesVersion"] == "v1.36.3"
    assert status["progress"]["tasksTotal"] == 17 and status["progress"]["currentTask"] is None
    assert status["progress"]["summary"] == "17/17 done"


def test_permanent_failure_is_failed_with_the_reason_and_observes_the_generation():
    patch = st.failed_permanently(generation=2, reason="Unsatisfiable", message="only 1 node", progress=progress())
    assert patch["status"]["phase"] == "Failed" and patch["status"]["reason"] == "Unsatisfiable"
    assert patch["status"]["observedGeneration"] == 2 and set(patch["status"]) <= OWNED


def test_transient_failure_keeps_the_phase_and_says_when_it_retries():
    patch = st.failed_transiently(message="task 'x' failed", delay=40.0, progress=progress())
    assert "phase" not in patch["status"] and "observedGeneration" not in patch["status"]
    assert patch["status"]["message"] == "task 'x' failed (retrying in 40s)"
    assert patch["status"]["reason"] == "RunFailed"


def test_queued_marks_only_a_fresh_object_pending():
    assert st.queued(None)["status"]["phase"] == "Pending"
    assert "phase" not in st.queued("Completed")["status"]


def test_condition_transition_time_moves_only_when_the_status_changes():
    before = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
              {"type": "NodesReady", "status": "False"}]
    same = st.condition("Ready", "True", "Reconciled", "ok", 3, before, at="2026-02-02T00:00:00Z")
    assert same["lastTransitionTime"] == "2026-01-01T00:00:00Z" and same["observedGeneration"] == 3
    flipped = st.condition("Ready", "False", "RunFailed", "x", 3, before, at="2026-02-02T00:00:00Z")
    assert flipped["lastTransitionTime"] == "2026-02-02T00:00:00Z"
    new = st.condition("Ready", "Unknown", "Reconciling", "x", None, [], at="2026-02-02T00:00:00Z")
    assert "observedGeneration" not in new and new["lastTransitionTime"] == "2026-02-02T00:00:00Z"


def test_conditions_are_applied_as_an_object_naming_only_ours():
    body = st.conditions_apply_body("tenants", "vc1", [{"type": "Ready", "status": "True"}])
    assert body == {"apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster",
                    "metadata": {"namespace": "tenants", "name": "vc1"},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def test_addons_ready_follows_the_run_and_says_no_nodes_when_there_are_none():
    assert st.addons_condition({"ready": True, "reason": "AddonsReady", "message": "DNS answers"}, 2) == \
        ("True", "AddonsReady", "DNS answers")
    assert st.addons_condition({"ready": False, "reason": "NoNodes", "message": "waits"}, 0)[:2] == \
        ("False", "NoNodes")
    assert st.addons_condition({"ready": False, "reason": "DNSNotReady", "message": "x"}, 2)[:2] == \
        ("False", "DNSNotReady")
    assert st.addons_condition(None, 1)[:2] == ("Unknown", "NotReported")


def test_ready_needs_the_addons_only_when_there_are_nodes():
    assert st.addons_allow_ready("False", 0) and st.addons_allow_ready("True", 3)
    assert not st.addons_allow_ready("False", 1) and not st.addons_allow_ready("Unknown", 1)


def test_readiness_is_one_decision_for_a_runs_report_and_the_look_at_the_nodes():
    addons_ok, addons_bad = ("True", "AddonsReady", "dns up"), ("False", "AddonsNotReady", "coredns 0/1")
    kwargs = {"reconciled": "ran", "not_ready": ("NodesNotReady", "1 of 2 nodes Ready")}
    done = st.readiness(2, 2, addons_ok, **kwargs)
    assert (done.phase, done.message, done.nodes, done.ready) == (
        "Completed", None, ("True", "AllNodesReady", "2 of 2 nodes Ready"), ("True", "Reconciled", "ran"))
    # Nodes but no DNS: not a working cluster.
    no_dns = st.readiness(2, 2, addons_bad, **kwargs)
    assert (no_dns.phase, no_dns.message, no_dns.ready) == (
        "Initialized", "add-ons not ready: coredns 0/1", ("False", "AddonsNotReady", "coredns 0/1"))
    # Without nodes the control plane alone makes it Ready.
    assert st.readiness(0, 0, ("False", "NoNodes", "waits"), **kwargs).phase == "Completed"
    short = st.readiness(1, 2, addons_ok, note="kn-w3 kept back", **kwargs)
    assert short.phase == "Initialized" and short.ready == short.nodes == (
        "False", "NodesNotReady", "1 of 2 nodes Ready; kn-w3 kept back")
    waiting = st.readiness(0, 2, None, satisfied=False, **kwargs)
    assert (waiting.phase, waiting.message, waiting.ready) == (
        "Pending", "waiting for nodes: 0 of 2 nodes available",
        ("False", "WaitingForNodes", "waiting for nodes: 0 of 2 nodes available"))
    told = st.readiness(0, 2, None, satisfied=False, waiting="the pool has 1 node", **kwargs)
    assert told.message == "waiting for nodes: the pool has 1 node" and told.nodes[2] == "the pool has 1 node"


@pytest.mark.parametrize(("reported", "expected"), [
    ({"replicas": "1", "hostNodes": "1"}, ("True", "SingleReplica")),
    ({"replicas": 2, "hostNodes": 3}, ("True", "OnePerHostNode")),
    ({"replicas": "3", "hostNodes": "3"}, ("True", "OnePerHostNode")),
    ({"replicas": 2, "hostNodes": 1}, ("False", "TooFewHostNodes")),
    ({"replicas": 3, "hostNodes": 0}, ("False", "TooFewHostNodes")),
])
def test_control_plane_spread_says_whether_each_replica_has_a_host_node_of_its_own(reported, expected):
    status, reason, message = st.spread_condition(reported)
    assert (status, reason) == expected
    assert message and (status == "True" or f"share {reported['hostNodes']} schedulable host node" in message)


@pytest.mark.parametrize("reported", [None, "2", {"replicas": "two"}])
def test_no_spread_condition_from_a_run_that_reported_none(reported):
    """An older collection's run, or nonsense: the previous condition stays rather than a guess."""
    assert st.spread_condition(reported) is None


def test_the_spread_condition_is_carried_by_every_status_apply():
    assert st.SPREAD in st.OWNED_CONDITIONS


@pytest.mark.parametrize(("etcd", "expected"), [
    ({"members": 3, "hostNodes": 3}, ("True", "OnePerHostNode", "3 etcd members, each on a host node of its own")),
    ({"members": "3", "hostNodes": "1"}, ("False", "TooFewHostNodes", "3 etcd members share 1 schedulable")),
    ({"members": 1, "hostNodes": 0}, ("True", "SingleReplica", "1 etcd member")),
])
def test_etcd_members_count_toward_the_spread(etcd, expected):
    status, reason, message = st.spread_condition({"replicas": 1, "hostNodes": 1}, etcd)
    assert (status, reason) == expected[:2]
    assert expected[2] in message


def test_api_servers_and_etcd_short_of_nodes_are_both_named():
    status, reason, message = st.spread_condition({"replicas": 2, "hostNodes": 1}, {"members": 3, "hostNodes": 1})
    assert (status, reason) == ("False", "TooFewHostNodes")
    assert "2 API servers share 1" in message and "3 etcd members share 1" in message


def test_etcd_alone_is_no_report_of_the_control_plane():
    assert st.spread_condition(None, {"members": 3, "hostNodes": 3}) is None
