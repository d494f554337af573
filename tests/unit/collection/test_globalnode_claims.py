"""The GlobalNode claim protocol: node choice and allowed transitions (pure functions, no API)."""

from __future__ import annotations

import pytest

from plugins.module_utils import globalnodes as gn

OWNER, OTHER = "t1/vc1", "t2/vc2"


def node(name, state="free", owner=None, labels=None, rv="1"):
    status = {"state": state}
    if owner:
        status["virtualCluster"] = owner
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"labels": labels or {}}, "status": status}


def policy(count, **labels):
    return {"labelSelector": {"matchLabels": labels}, "nodeCount": count}


def test_free_matching_nodes_are_chosen_in_name_order():
    nodes = [node("w3", labels={"pool": "a"}), node("w1", labels={"pool": "a"}), node("w2", labels={"pool": "b"})]
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(1, pool="a")])
    assert plan.satisfied and plan.add == ["w1"] and plan.keep == [] and plan.surplus == []
    assert plan.message() == "1 of 1 nodes available"


def test_nodes_already_held_are_kept_before_free_ones_are_taken():
    nodes = [node("w1", labels={"pool": "a"}), node("w2", "occupied", OWNER, {"pool": "a"})]
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(1, pool="a")])
    assert plan.keep == ["w2"] and plan.add == []


def test_policies_add_up_and_a_node_counts_once():
    nodes = [node("w1", labels={"pool": "a", "gpu": "y"}), node("w2", labels={"pool": "a"})]
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(1, pool="a"), policy(1, gpu="y")])
    # greedy: the first policy takes w1, the second finds no other gpu node
    assert not plan.satisfied and plan.wanted == 2 and plan.available == 1
    assert "promotePolicies[1] matches 0 free node(s), wants 1" in plan.message()


def test_nodes_of_another_virtual_cluster_are_never_chosen():
    nodes = [node("w1", "reserved", OTHER, {"pool": "a"}), node("w2", "occupied", OTHER, {"pool": "a"})]
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(1, pool="a")])
    assert not plan.satisfied and plan.add == []
    assert plan.message().startswith("0 of 1 nodes available")


def test_named_nodes_say_why_each_is_missing():
    nodes = [node("w1"), node("w2", "occupied", OTHER), node("w3")]
    plan = gn.plan_claim(nodes, OWNER, names=["w1", "w2", "w9", "w3"], exclude={"w3"})
    assert not plan.satisfied and plan.add == ["w1"]
    text = plan.message()
    assert "w2 is occupied by a virtual cluster of another namespace" in text and "t2/vc2" not in text
    assert "w9 is not a GlobalNode" in text and "w3 runs the operator" in text


def test_surplus_is_what_the_request_no_longer_asks_for():
    nodes = [node("w1", "occupied", OWNER, {"pool": "a"}), node("w2", "occupied", OWNER, {"pool": "a"})]
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(1, pool="a")])
    assert plan.keep == ["w1"] and plan.surplus == ["w2"]
    assert gn.plan_claim(nodes, OWNER, policies=[]).surplus == ["w1", "w2"]


def test_blocked_free_nodes_are_left_for_earlier_requests():
    nodes = [node("w1", labels={"pool": "a"})]
    assert not gn.plan_claim(nodes, OWNER, policies=[policy(1, pool="a")], blocked={"w1"}).satisfied


@pytest.mark.parametrize(("state", "owner", "target", "allowed"), [
    ("free", None, "reserved", True),
    ("reserved", OWNER, "occupied", True),
    ("occupied", OWNER, "returning", True),
    ("returning", OWNER, "free", True),
    ("free", None, "occupied", False),       # promotion needs a reservation first
    ("reserved", OTHER, "occupied", False),  # never someone else's node
    ("occupied", OTHER, "free", False),
    ("returning", OWNER, "occupied", False),
])
def test_transitions(state, owner, target, allowed):
    n = node("w1", state, owner)
    if allowed:
        assert gn.check_transition(n, OWNER, target) is True
    else:
        with pytest.raises(gn.ClaimError):
            gn.check_transition(n, OWNER, target)


def test_freeing_a_free_node_changes_nothing():
    assert gn.check_transition(node("w1"), OWNER, "free") is False


def test_patch_is_guarded_by_the_resource_version_and_clears_the_holder_when_free():
    patch = gn.transition_patch(node("w1", "returning", OWNER, rv="77"), OWNER, "free", "Returned", "back", at="T")
    assert patch["metadata"] == {"resourceVersion": "77"}
    assert patch["status"]["state"] == "free" and patch["status"]["virtualCluster"] is None
    assert patch["status"]["conditions"][0] == {"type": "Claimed", "status": "False", "reason": "Returned",
                                                "message": "back", "lastTransitionTime": "T"}


def test_an_earlier_waiter_keeps_the_free_nodes_it_would_take_so_a_later_small_request_cannot_starve_it():
    nodes = [node("w1", labels={"pool": "a"}), node("w2", labels={"pool": "a"}),
             node("w3", "occupied", OTHER, {"pool": "a"})]
    queue = [{"virtual_cluster": "t3/big", "policies": [policy(3, pool="a")]}]
    kept = gn.kept_for_queue(nodes, queue)
    assert kept == {"w1", "w2"}  # big cannot be met yet (w3 is held), and still keeps what is free
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(1, pool="a")], blocked=kept)
    assert not plan.satisfied and plan.add == []
    assert "w1, w2 kept for a virtual cluster that asked earlier" in plan.message()


def test_waiters_are_served_oldest_first_and_a_later_request_gets_what_they_leave():
    nodes = [node(f"w{i}", labels={"pool": "a"}) for i in range(1, 5)]
    queue = [{"virtual_cluster": "t3/first", "policies": [policy(2, pool="a")]},
             {"virtual_cluster": "t4/second", "select_nodes": ["w3"]}]
    kept = gn.kept_for_queue(nodes, queue)
    assert kept == {"w1", "w2", "w3"}
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(1, pool="a")], blocked=kept)
    assert plan.satisfied and plan.add == ["w4"]
    named = gn.plan_claim(nodes, OWNER, names=["w1"], blocked=kept)
    assert not named.satisfied and "w1 is kept for a virtual cluster that asked earlier" in named.message()


def test_a_waiter_asking_for_more_than_the_host_has_keeps_nothing_from_later_requests():
    nodes = [node("w1", labels={"pool": "a"}), node("w2", labels={"pool": "a"}),
             node("w3", "occupied", OTHER, {"pool": "a"})]
    queue = [{"virtual_cluster": "t3/huge", "policies": [{"labelSelector": {}, "nodeCount": 1000}]},
             {"virtual_cluster": "t4/gone", "select_nodes": ["w1", "w9"]},  # w9 is no GlobalNode
             {"virtual_cluster": "t5/operator", "select_nodes": ["w2"]}]
    assert gn.kept_for_queue(nodes, queue, exclude={"w2"}) == set()
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(2, pool="a")], blocked=set())
    assert plan.satisfied and plan.add == ["w1", "w2"]


def test_a_request_beyond_the_pool_says_it_can_never_be_met_and_one_that_fits_only_waits():
    nodes = [node("w1", labels={"pool": "a"}), node("w2", "occupied", OTHER, {"pool": "a"})]
    huge = gn.plan_claim(nodes, OWNER, policies=[policy(3, pool="a")])
    assert huge.beyond_pool == 1
    assert "1 node(s) more than the host has GlobalNodes for it" in huge.message()
    waiting = gn.plan_claim(nodes, OWNER, policies=[policy(2, pool="a")])
    assert not waiting.satisfied and waiting.beyond_pool == 0
    assert "never" not in waiting.message()
    # nodes held by others, or two nodes reporting one address, are in the pool: they may come back
    twins = [node("w1", labels={"pool": "a"}), node("w2", labels={"pool": "a"})]
    for twin in twins:
        twin["spec"]["nodeIP"] = "10.0.0.9"
    assert gn.beyond_pool(twins, OWNER, policies=[policy(2, pool="a")]) == 0


RULES = [{"namespaces": ["team-a"], "node_selector": {"matchLabels": {"pool": "a"}}, "max_nodes": 2},
         {"namespaces": ["*"], "node_selector": {"matchLabels": {"pool": "shared"}}}]


def test_the_first_rule_naming_a_namespace_applies_and_a_namespace_no_rule_names_has_none():
    assert gn.namespace_rule(RULES, "team-a") is RULES[0]
    assert gn.namespace_rule(RULES, "team-b") is RULES[1]
    assert gn.namespace_rule(RULES[:1], "team-b") == {}


def test_a_namespace_takes_only_the_nodes_its_rule_selects():
    nodes = [node("a1", labels={"pool": "a"}), node("s1", labels={"pool": "shared"})]
    rule = gn.namespace_rule(RULES, "team-b")
    any_node = {"labelSelector": {}, "nodeCount": 2}
    plan = gn.plan_claim(nodes, "team-b/vc", policies=[any_node], rule=rule)
    assert not plan.satisfied and plan.add == ["s1"]
    assert "namespace team-b may take only the nodes its rule selects" in plan.message()
    assert plan.beyond_pool == 1  # its pool has one node: it keeps nothing from others while it waits
    named = gn.plan_claim(nodes, "team-b/vc", names=["a1"], rule=rule)
    assert "a1 stays in the host: outside the nodes namespace team-b may take" in named.message()
    assert gn.plan_claim(nodes, "team-a/vc", names=["a1"], rule=gn.namespace_rule(RULES, "team-a")).satisfied


def test_a_namespace_holds_at_most_its_cap_across_its_virtual_clusters():
    nodes = [node("a1", "occupied", "team-a/one", {"pool": "a"}), node("a2", labels={"pool": "a"}),
             node("a3", labels={"pool": "a"}), node("a4", "held", "team-a/gone", {"pool": "a"})]
    rule = gn.namespace_rule(RULES, "team-a")
    two = gn.plan_claim(nodes, "team-a/two", policies=[policy(2, pool="a")], rule=rule)
    assert not two.satisfied and two.add == ["a2"]
    assert "namespace team-a may hold at most 2 node(s) (its other virtual clusters hold 1)" in two.message()
    assert two.beyond_pool == 0  # the cap is the namespace's, which team-a/one may free again
    assert gn.plan_claim(nodes, "team-a/two", policies=[policy(1, pool="a")], rule=rule).satisfied
    # what a virtual cluster holds stays its own when the cap is lowered
    lowered = {**rule, "max_nodes": 0}
    assert gn.plan_claim(nodes, "team-a/one", names=["a1"], rule=lowered).satisfied
    assert gn.beyond_pool(nodes, "team-a/two", policies=[policy(3, pool="a")], rule=rule) == 1


def test_a_waiter_is_held_to_its_own_namespaces_rule():
    nodes = [node("a1", labels={"pool": "a"}), node("s1", labels={"pool": "shared"}),
             node("s2", labels={"pool": "shared"})]
    queue = [{"virtual_cluster": "team-b/first", "policies": [{"labelSelector": {}, "nodeCount": 2}]}]
    kept = gn.kept_for_queue(nodes, queue, rules=RULES)
    assert kept == {"s1", "s2"}  # not a1: team-b may not take it
    plan = gn.plan_claim(nodes, "team-a/vc", policies=[policy(1, pool="a")], blocked=kept,
                         rule=gn.namespace_rule(RULES, "team-a"))
    assert plan.satisfied and plan.add == ["a1"]


OLD, NEW = "a" * 64, "b" * 64


def test_only_the_holder_records_agent_certificates_and_a_change_is_a_change():
    held = node("w1", "returning", "t/vc1")
    assert gn.check_pins(held, "t/vc1", [OLD, NEW])
    held["status"]["agent"] = {"certificateSHA256": [NEW, OLD]}
    assert not gn.check_pins(held, "t/vc1", [OLD, NEW])
    for other, owner in ((held, "t/vc2"), (node("w2"), "t/vc1")):
        with pytest.raises(gn.ClaimError, match="only its holder t/vc. records"):
            gn.check_pins(other, owner, [NEW])


def test_a_release_records_the_new_certificate_and_keeps_it_on_the_free_node():
    held = node("w1", "returning", "t/vc1")
    patch = gn.transition_patch(held, "t/vc1", gn.FREE, "Returned", "", at="2026-01-01T00:00:00Z", pins=[NEW])
    assert patch["status"]["agent"] == {"certificateSHA256": [NEW], "recordedAt": "2026-01-01T00:00:00Z"}
    assert patch["status"]["state"] == "free" and patch["status"]["virtualCluster"] is None
    assert gn.agent_pins_of({"status": patch["status"]}) == [NEW]
    assert "agent" not in gn.transition_patch(held, "t/vc1", gn.FREE, "Returned", "")["status"]


def test_recording_certificates_in_place_keeps_the_time_the_state_began():
    held = node("w1", "returning", "t/vc1")
    held["status"]["stateSince"] = "2026-01-01T00:00:00Z"
    patch = gn.transition_patch(held, "t/vc1", gn.RETURNING, "AgentCertificateRenewal", "", pins=[OLD, NEW])
    assert patch["status"]["stateSince"] == "2026-01-01T00:00:00Z"


def _at(global_node, address):
    global_node["spec"]["nodeIP"] = address
    return global_node


def test_two_nodes_reporting_one_address_are_never_promoted_by_name_or_by_policy():
    # A kubelet that reports another node's address would have runs meant for that node connect to it.
    nodes = [_at(node("w1", labels={"pool": "a"}), "192.0.2.11"), _at(node("w2", labels={"pool": "a"}), "192.0.2.11"),
             _at(node("w3", labels={"pool": "a"}), "192.0.2.13")]
    plan = gn.plan_claim(nodes, OWNER, names=["w1"])
    assert plan.add == [] and plan.shortfall == [
        (1, "w1 stays in the host: its address 192.0.2.11 is also GlobalNode w2's (spec.nodeIP); no node is "
            "promoted while two report one address")]
    plan = gn.plan_claim(nodes, OWNER, policies=[policy(2, pool="a")])
    assert plan.add == ["w3"] and not plan.satisfied
    assert "w1 stays in the host: its address 192.0.2.11 is also GlobalNode w2's" in plan.message()


def test_a_node_already_held_is_kept_when_another_reports_its_address():
    nodes = [_at(node("w1", "occupied", OWNER), "192.0.2.11"), _at(node("w2"), "192.0.2.11")]
    plan = gn.plan_claim(nodes, OWNER, names=["w1"])
    assert plan.keep == ["w1"] and plan.satisfied


def test_a_message_names_the_holder_only_to_its_own_namespace():
    held = node("w1", "occupied", "t1/other")
    assert gn.holder_seen_by(held, "t1/mine") == "t1/other"
    assert gn.holder_seen_by(held, "t2/vc") == "a virtual cluster of another namespace"
    assert gn.holder_seen_by(node("w2"), "t2/vc") == "nobody"
    with pytest.raises(gn.ClaimError) as refused:
        gn.check_transition(held, "t2/vc", "occupied")
    assert "t1/other" not in str(refused.value)
    with pytest.raises(gn.ClaimError) as refused:
        gn.check_pins(held, "t2/vc", ["a" * 64])
    assert "t1/other" not in str(refused.value)
