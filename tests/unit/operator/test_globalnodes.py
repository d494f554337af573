"""Node -> GlobalNode translation and the compare-and-swap patches."""

from __future__ import annotations

from kubenest_operator.globalnodes import (
    Record,
    desired_spec,
    free_patch,
    internal_ip,
    is_control_plane,
    new_globalnode,
    release_patch,
    sync_patch,
)


def node(name="w1", labels=None, addresses=(("InternalIP", "10.0.0.11"), ("Hostname", "w1"))) -> dict:
    return {"metadata": {"name": name, "labels": labels if labels is not None else {"zone": "a"}},
            "status": {"addresses": [{"type": t, "address": a} for t, a in addresses]}}


def record(state=None, labels=None, ip="10.0.0.11") -> Record:
    return Record("w1", "41", state, ip, labels if labels is not None else {"zone": "a"})


def test_control_plane_nodes_are_recognised():
    assert is_control_plane(node(labels={"node-role.kubernetes.io/control-plane": ""}))
    assert is_control_plane(node(labels={"node-role.kubernetes.io/master": ""}))
    assert not is_control_plane(node(labels={"node-role.kubernetes.io/worker": ""}))
    assert not is_control_plane({"metadata": {}})


def test_new_globalnode_copies_name_ip_and_labels():
    body = new_globalnode(node())
    assert body["metadata"]["name"] == "w1" and body["kind"] == "GlobalNode"
    assert body["spec"] == {"nodeIP": "10.0.0.11", "labels": {"zone": "a"}}


def test_a_node_without_an_internal_ip_gets_no_ip_yet():
    assert internal_ip(node(addresses=(("ExternalIP", "203.0.113.1"),))) is None
    assert desired_spec(node(addresses=())) == {"labels": {"zone": "a"}}


def test_sync_adds_changes_and_removes_labels_under_the_seen_resource_version():
    patch = sync_patch(record(labels={"zone": "a", "old": "x"}), node(labels={"zone": "b", "gpu": "true"}))
    assert patch == {"metadata": {"resourceVersion": "41"},
                     "spec": {"labels": {"zone": "b", "gpu": "true", "old": None}}}


def test_sync_follows_a_new_ip_and_does_nothing_when_equal():
    expected = {"metadata": {"resourceVersion": "41"}, "spec": {"nodeIP": "10.0.0.11"}}
    assert sync_patch(record(ip="10.0.0.99"), node()) == expected
    assert sync_patch(record(), node()) is None
    assert sync_patch(record(), node(addresses=())) is None  # a vanished address does not erase the known one


def test_a_node_away_from_the_host_keeps_its_record_and_a_free_one_follows_its_node():
    changed = node(labels={"zone": "z"})
    for state in ("reserved", "occupied", "returning", "held"):
        assert sync_patch(record(state=state), changed) is None
    assert sync_patch(record(state="free"), changed) is not None


def test_only_a_stateless_record_is_marked_free():
    assert free_patch(record(), at="2026-01-02T03:04:05Z") == {
        "metadata": {"resourceVersion": "41"},
        "status": {"state": "free", "virtualCluster": None, "stateSince": "2026-01-02T03:04:05Z", "conditions": [
            {"type": "Claimed", "status": "False", "reason": "Registered", "message": "in the pool of its host Node",
             "lastTransitionTime": "2026-01-02T03:04:05Z"}]}}
    assert free_patch(record(state="reserved")) is None


def test_record_from_a_globalnode_body():
    body = {"metadata": {"name": "w1", "resourceVersion": "7"}, "spec": {"nodeIP": "10.0.0.1", "labels": {"a": "b"}},
            "status": {"state": "occupied", "virtualCluster": "t/vc"}}
    assert Record.from_body(body) == Record("w1", "7", "occupied", "10.0.0.1", {"a": "b"})
    assert Record.from_body({"metadata": {"name": "w2", "resourceVersion": "8"}}) == Record("w2", "8", None, None, {})


def test_a_released_reservation_moves_as_the_protocol_moves_it():
    """The operator's release of a reservation whose virtual cluster is gone writes what the collection's own
    transition writes: stateSince and the Claimed condition move with the state."""
    body = {"metadata": {"name": "w1", "resourceVersion": "9"},
            "status": {"state": "reserved", "virtualCluster": "t/gone", "stateSince": "2026-01-01T00:00:00Z",
                       "conditions": [{"type": "Claimed", "status": "True", "reason": "Reserved", "message": "m",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    assert release_patch(body, at="2026-01-02T00:00:00Z") == {
        "metadata": {"resourceVersion": "9"},
        "status": {"state": "free", "virtualCluster": None, "stateSince": "2026-01-02T00:00:00Z", "conditions": [
            {"type": "Claimed", "status": "False", "reason": "VirtualClusterGone",
             "message": "released: its virtual cluster t/gone is gone", "lastTransitionTime": "2026-01-02T00:00:00Z"}]}}
