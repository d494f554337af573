"""The pure parts of bench/operator_scale.py: copies of a tenant name the copy everywhere, keep only what a run
wrote, and per-tenant costs are slopes."""

from __future__ import annotations

from bench import operator_scale as scale


def test_a_copy_names_the_new_tenant_in_names_labels_and_selectors():
    obj = {"metadata": {"name": "t0000-apiserver", "labels": {"kosmos.io/virtualcluster": "t0000"}},
           "spec": {"selector": {"matchLabels": {"test-component": "t0000-apiserver"}}}}
    copied = scale.renamed(obj, "t0000", "t0042")
    assert copied["metadata"] == {"name": "t0042-apiserver", "labels": {"kosmos.io/virtualcluster": "t0042"}}
    assert copied["spec"]["selector"]["matchLabels"]["test-component"] == "t0042-apiserver"
    assert obj["metadata"]["name"] == "t0000-apiserver"  # the source is left as it was


def test_only_what_the_run_wrote_is_copied():
    obj = {"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}, "status": {"x": 1},
           "metadata": {"name": "s", "namespace": "scale", "uid": "u", "resourceVersion": "7", "managedFields": [],
                        "labels": {"a": "b"}, "ownerReferences": [{"uid": "o"}]}}
    assert scale.writable(obj) == {"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="},
                                   "metadata": {"name": "s", "namespace": "scale", "labels": {"a": "b"},
                                                "ownerReferences": [{"uid": "o"}]}}


def test_the_cost_per_tenant_is_the_slope_between_the_first_and_last_count():
    rows = [{"tenants": 1, "memory_mib": 100.0}, {"tenants": 100, "memory_mib": 120.0},
            {"tenants": 1001, "memory_mib": 300.0}]
    assert scale.slope(rows, "memory_mib") == 0.2


def test_ready_is_completed_with_the_ready_condition_true():
    assert scale.ready({"status": {"phase": "Completed", "conditions": [{"type": "Ready", "status": "True"}]}})
    assert not scale.ready({"status": {"phase": "Updating", "conditions": [{"type": "Ready", "status": "True"}]}})
    assert not scale.ready(None)
