"""Waiting virtual clusters are served in the order they asked."""

from __future__ import annotations

from kubenest_operator import status as st
from kubenest_operator.node_queue import waiting_before, waiting_since


def vc(namespace, name, since=None, phase=st.PENDING, deleting=False, **spec):
    meta = {"namespace": namespace, "name": name, **({"deletionTimestamp": "2026-11-23T10:00:00Z"} if deleting else {})}
    status = {"phase": phase, **({"waitingSince": since} if since else {})}
    return {"metadata": meta, "spec": spec, "status": status}


POLICY = [{"labelSelector": {"matchLabels": {"pool": "a"}}, "nodeCount": 3}]


def test_a_new_request_queues_behind_every_waiter_oldest_first():
    vcs = [vc("t2", "b", "2026-11-23T10:05:00Z", promotePolicies=POLICY),
           vc("t1", "a", "2026-11-23T10:01:00Z", promoteResources={"nodes": ["w1", "w2"]}),
           vc("t3", "ready", phase=st.COMPLETED, promotePolicies=POLICY),
           vc("t4", "gone", "2026-11-23T09:00:00Z", deleting=True, promotePolicies=POLICY),
           vc("t5", "new")]
    assert waiting_before(vcs, "t5", "new", None) == [
        {"virtual_cluster": "t1/a", "policies": [], "select_nodes": ["w1", "w2"]},
        {"virtual_cluster": "t2/b", "policies": POLICY}]


def test_a_waiter_only_yields_to_those_that_waited_longer():
    vcs = [vc("t1", "a", "2026-11-23T10:01:00Z"), vc("t2", "b", "2026-11-23T10:05:00Z"),
           vc("t3", "c", "2026-11-23T10:09:00Z")]
    assert [w["virtual_cluster"] for w in waiting_before(vcs, "t2", "b", "2026-11-23T10:05:00Z")] == ["t1/a"]
    assert waiting_before(vcs, "t1", "a", "2026-11-23T10:01:00Z") == []


def test_waiting_since_is_kept_while_pending_and_dropped_once_served():
    assert waiting_since({"waitingSince": "2026-11-23T10:01:00Z"}, st.PENDING) == "2026-11-23T10:01:00Z"
    assert waiting_since({}, st.PENDING).endswith("Z")
    assert waiting_since({"waitingSince": "2026-11-23T10:01:00Z"}, st.COMPLETED) is None
