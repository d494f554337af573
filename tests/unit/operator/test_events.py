"""The events a person reads with kubectl describe: phases, nodes gained and given back, GlobalNode moves.
kopf's posting is stubbed (conftest.py); tests/integration/operator/test_virtualclusters.py reads them from a
real API server."""

from __future__ import annotations

import logging

import kopf
import pytest

from kubenest_operator import events


def vc(phase=None, nodes=()):
    return kopf.Body({"metadata": {"namespace": "t", "name": "a"},
                      "status": {"phase": phase, "nodes": [{"name": n, "ready": r} for n, r in nodes]}})


def test_a_phase_change_is_an_event_and_no_change_is_none(posted):
    events.phase(vc(), None, "Preparing", "running virtualcluster.yml (state present)")
    events.phase(vc(), "Preparing", "Completed", "")
    events.phase(vc(), "Updating", "Failed", "InvalidRequest: no such version")
    events.phase(vc(), "Completed", "Completed", "nothing")
    assert posted == [("Normal", "Preparing", "new -> Preparing: running virtualcluster.yml (state present)"),
                      ("Normal", "Completed", "Preparing -> Completed"),
                      ("Warning", "Failed", "Updating -> Failed: InvalidRequest: no such version")]


def test_nodes_gained_and_given_back_against_the_status(posted):
    events.nodes(vc("Updating", [("kn-w1", True), ("kn-w2", True)]), [{"name": "kn-w2"}, {"name": "kn-w3"}])
    assert posted == [("Normal", "NodePromoted", "kn-w3 joined the virtual cluster"),
                      ("Normal", "NodeReturned", "kn-w1 left the virtual cluster")]


def test_a_node_turning_not_ready_and_back(posted):
    events.readiness(vc("Completed", [("kn-w1", True), ("kn-w2", True)]),
                     [{"name": "kn-w1", "ready": False}, {"name": "kn-w2", "ready": True}])
    events.readiness(vc("Initialized", [("kn-w1", False)]), [{"name": "kn-w1", "ready": True}])
    assert posted == [("Warning", "NodeNotReady", "kn-w1 is not Ready in the virtual cluster"),
                      ("Normal", "NodeReady", "kn-w1 is Ready in the virtual cluster")]


def _globalnode(state, owner=None, reason=None, message=None):
    status = {"state": state, "virtualCluster": owner}
    if reason:
        status["conditions"] = [{"type": "Claimed", "status": "True", "reason": reason, "message": message}]
    return {"metadata": {"name": "kn-w1"}, "status": status}


def test_a_globalnode_transition_names_the_protocol_reason_and_owner():
    assert events.globalnode_transition("free", _globalnode("reserved", "t/a", "Reserved", "for t/a")) == (
        "Reserved", "free -> reserved for t/a (Reserved: for t/a)")
    assert events.globalnode_transition(None, _globalnode("free")) == ("Free", "new -> free")
    # A condition another writer left behind (Claimed True, the node now free) is not quoted.
    assert events.globalnode_transition("reserved", _globalnode("free", None, "Reserved", "for t/a")) == (
        "Free", "reserved -> free")
    assert events.globalnode_transition("occupied", _globalnode("occupied", "t/a")) is None


@pytest.mark.parametrize(("kind", "seen", "expected"), [
    (None, ["free", "reserved"], []),  # the operator's start: recorded, not announced
    ("MODIFIED", ["free", "reserved"], [("Normal", "Reserved")]),
    ("MODIFIED", ["reserved", "reserved"], []),
])
def test_the_watch_announces_only_what_moved_since_it_last_looked(posted, kind, seen, expected):
    memo = kopf.Memo()
    logger = logging.getLogger("test")
    events.globalnode_moved(type=None, body=kopf.Body(_globalnode(seen[0])), memo=memo, logger=logger)
    events.globalnode_moved(type=kind, body=kopf.Body(_globalnode(seen[1], "t/a", "Reserved", "for t/a")),
                            memo=memo, logger=logger)
    assert [(t, r) for t, r, _m in posted] == expected
