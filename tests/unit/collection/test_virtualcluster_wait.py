"""Waiting for a VirtualCluster: when the wait is over, and the line a person reads meanwhile."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.plugin_utils import virtualcluster_wait as vw


def vc(generation=2, **status):
    return {"metadata": {"generation": generation}, "spec": {"kubeconfig": "c2VjcmV0"}, "status": status}


READY = [{"type": "Ready", "status": "True", "reason": "Reconciled"}]


def test_ready_only_once_the_current_generation_is_taken_up_and_ready():
    assert vw.verdict(vc(observedGeneration=2, conditions=READY)) == vw.READY
    assert vw.verdict(vc(observedGeneration=1, conditions=READY)) == vw.WAITING  # an older spec was Ready
    assert vw.verdict(vc(observedGeneration=2, conditions=[{"type": "Ready", "status": "False"}])) == vw.WAITING
    assert vw.verdict(vc(phase="Failed", observedGeneration=2)) == vw.FAILED
    assert vw.verdict({"metadata": {"generation": 1}}) == vw.WAITING


def test_the_line_says_phase_progress_nodes_and_why_it_is_not_ready():
    waiting = vc(phase="Updating", progress={"summary": "31/74 Step Kubelet"}, nodesReady="0/1",
                 conditions=[{"type": "Ready", "status": "False", "reason": "NodesNotReady",
                              "message": "0 of 1 nodes Ready"}])
    assert vw.progress_line("t/a", waiting) == \
        "t/a: Updating, 31/74 Step Kubelet, nodes 0/1, NodesNotReady: 0 of 1 nodes Ready"
    assert vw.progress_line("t/a", vc(generation=1)) == "t/a: no status yet (waiting for the operator to take it up)"
    assert "c2VjcmV0" not in vw.progress_line("t/a", waiting)


def test_a_failure_says_whether_it_failed_or_ran_out_of_time_with_the_operators_words():
    failed = vc(phase="Failed", reason="Unsatisfiable", message="only 1 node matches")
    assert vw.failure_message("t/a", failed, timed_out=False) == \
        "VirtualCluster t/a failed: Failed Unsatisfiable only 1 node matches"
    slow = vc(phase="Preparing", message="running virtualcluster.yml (state present)")
    assert vw.failure_message("t/a", slow, timed_out=True) == \
        "VirtualCluster t/a is not Ready in time: Preparing running virtualcluster.yml (state present)"
