"""namespace_rule and virtualclusters_ahead: the site's rule for a namespace, and a VirtualCluster's place in it."""

from __future__ import annotations

from plugins.filter.namespace_rule import namespace_rule
from plugins.filter.virtualclusters_ahead import virtualclusters_ahead


def _vc(name, created, deleting=False):
    meta = {"name": name, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    return {"metadata": meta}


def test_older_ones_come_first_and_ties_go_by_name():
    listed = [_vc("c", "2026-01-01T00:00:02Z"), _vc("b", "2026-01-01T00:00:01Z"), _vc("a", "2026-01-01T00:00:01Z")]
    assert virtualclusters_ahead(listed, "c") == ["a", "b"]
    assert virtualclusters_ahead(listed, "a") == []


def test_ones_being_deleted_make_room_and_one_not_listed_comes_last():
    listed = [_vc("old", "2026-01-01T00:00:00Z", deleting=True), _vc("mid", "2026-01-01T00:00:01Z")]
    assert virtualclusters_ahead(listed, "mid") == []
    assert virtualclusters_ahead(listed, "new") == ["mid"]
    assert virtualclusters_ahead(None, "new") == []


def test_the_filter_gives_the_first_rule_naming_the_namespace():
    rules = [{"namespaces": ["a"], "max_nodes": 1}, {"namespaces": ["*"], "max_nodes": 5}]
    assert namespace_rule(rules, "a")["max_nodes"] == 1
    assert namespace_rule(rules, "b")["max_nodes"] == 5
    assert namespace_rule([], "b") == {}
