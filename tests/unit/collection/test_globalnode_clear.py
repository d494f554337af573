"""Asking for held nodes to be cleared: which names are refused, when the wait is over, and what a person reads."""

from __future__ import annotations

from ansible_collections.kosmos.kubenest.plugins.module_utils import globalnodes as protocol
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import globalnode_clear as gc


def gn(state, owner=None, annotations=None, reason=None):
    status = {"state": state, **({"virtualCluster": owner} if owner else {})}
    if reason:
        status["conditions"] = [{"type": "Claimed", "status": "True", "reason": reason}]
    return {"metadata": {"name": "w1", "annotations": annotations or {}}, "status": status}


ASKED = {protocol.CLEAR_ANNOTATION: "asked"}


def test_only_held_nodes_may_be_asked_for_and_each_refusal_is_named():
    assert protocol.clear_refusals({"w1": gn("held", "t/a")}) == []
    assert protocol.clear_refusals({"w1": gn("held"), "w2": None, "w3": gn("occupied", "t/a"), "w4": gn("free")}) == [
        "no GlobalNode w2", "w3 is occupied by t/a, not held", "w4 is free, not held"]


def test_the_wait_ends_when_the_node_leaves_held_or_the_operator_answers_without_clearing_it():
    assert gc.verdict(gn("held", annotations=ASKED)) == gc.WAITING
    assert gc.verdict(gn("free")) == gc.CLEARED
    assert gc.verdict(gn("reserved", "t/b")) == gc.CLEARED  # free, then claimed at once: cleared all the same
    failed = gn("held", annotations={protocol.CLEAR_FAILED_ANNOTATION: "task 'Wipe' failed on w1: disk busy"})
    assert gc.verdict(failed) == gc.FAILED
    assert gc.failure("w1", failed) == "w1: task 'Wipe' failed on w1: disk busy"
    assert gc.verdict(gn("held")) == gc.FAILED
    assert "withdrawn" in gc.failure("w1", gn("held"))
    assert gc.verdict(None) == gc.FAILED and "deleted" in gc.failure("w1", None)


def test_the_line_says_state_reason_and_whether_it_is_being_cleared():
    assert gc.progress_line("w1", gn("held", "t/a", ASKED, reason="AgentUnreachable")) == \
        "w1: held (AgentUnreachable), clearing"
    assert gc.progress_line("w1", gn("free")) == "w1: free"
    assert gc.progress_line("w1", None) == "w1: gone"
