"""The operator's metrics: runs and steps as recorded, objects by phase, condition and state as listed (cached for
a few seconds), certificate expiry as the checks report it, and a scrape that still answers when listing fails."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest

from kubenest_operator import metrics


def _value(name: str, labels: dict | None = None) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, labels or {})


def _vc(namespace, name, phase=None, ready=None):
    status = {"phase": phase} if phase else {}
    if ready:
        status["conditions"] = [{"type": "Ready", "status": ready[0], "reason": ready[1]}]
    return {"metadata": {"namespace": namespace, "name": name}, "status": status}


@pytest.fixture
def collector():
    listed = {"calls": 0, "fail": False}

    def list_objects():
        listed["calls"] += 1
        if listed["fail"]:
            raise OSError("connection refused")
        return ([_vc("t", "a", "Completed", ("True", "Reconciled")), _vc("t", "b", "Failed", ("False", "RunFailed")),
                 _vc("u", "c")],
                [{"status": {"state": "free"}}, {"status": {"state": "free"}}, {"status": {"state": "inUse"}}, {}])

    found = metrics.ObjectsCollector(list_objects)
    found.listed = listed
    return found


def _samples(collector):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in collector.collect()
            for s in family.samples}


def test_objects_by_phase_condition_and_state(collector):
    samples = _samples(collector)
    assert samples[("kubenest_virtualclusters", (("phase", "Completed"),))] == 1
    assert samples[("kubenest_virtualclusters", (("phase", "Pending"),))] == 1  # no status yet
    assert samples[("kubenest_virtualcluster_condition", (
        ("condition", "Ready"), ("namespace", "t"), ("reason", "RunFailed"), ("status", "False"),
        ("virtualcluster", "b")))] == 1
    assert samples[("kubenest_globalnodes", (("state", "free"),))] == 2
    assert samples[("kubenest_globalnodes", (("state", "Unknown"),))] == 1


def test_a_scrape_lists_at_most_once_per_cache_period_and_answers_when_listing_fails(collector, monkeypatch):
    _samples(collector)
    _samples(collector)
    assert collector.listed["calls"] == 1
    monkeypatch.setattr(metrics, "CACHE_SECONDS", 0.0)
    collector.listed["fail"] = True
    samples = _samples(collector)
    assert not [key for key in samples if key[0] == "kubenest_virtualclusters"]
    assert collector.listed["calls"] == 2


def test_certificates_expire_per_virtual_cluster_and_are_forgotten_with_it(collector):
    metrics.set_certificates("t", "a", {("a-pki", "ca.crt"): 2000000000.0, ("a-pki", "apiserver.crt"): 1900000000.0})
    labels = (("certificate", "ca.crt"), ("namespace", "t"), ("secret", "a-pki"), ("virtualcluster", "a"))
    assert _samples(collector)[("kubenest_certificate_expiry_timestamp_seconds", labels)] == 2000000000.0
    metrics.set_certificates("t", "a", None)
    assert ("kubenest_certificate_expiry_timestamp_seconds", labels) not in _samples(collector)


def test_certificates_of_a_virtual_cluster_gone_past_the_operator_are_dropped_by_the_next_listing(collector):
    labels = (("certificate", "ca.crt"), ("namespace", "t"), ("secret", "z-pki"), ("virtualcluster", "z"))
    _samples(collector)  # a listing without t/z, kept for the cache period
    metrics.set_certificates("t", "z", {("z-pki", "ca.crt"): 2000000000.0})
    assert ("kubenest_certificate_expiry_timestamp_seconds", labels) in _samples(collector)  # newer than the listing
    collector._cached = None  # the next scrape lists again, still without t/z
    assert ("kubenest_certificate_expiry_timestamp_seconds", labels) not in _samples(collector)


def test_runs_failures_and_steps_are_counted():
    before = _value("kubenest_runs_total", {"playbook": "virtualcluster.yml", "phase": "Preparing",
                                            "outcome": "successful"}) or 0
    metrics.record_run("virtualcluster.yml", "Preparing", "successful", 42.0)
    metrics.record_failure("RunFailed")
    metrics.record_steps([("Drain", 3.0), ("Drain", 1.0)])
    assert _value("kubenest_runs_total", {"playbook": "virtualcluster.yml", "phase": "Preparing",
                                          "outcome": "successful"}) == before + 1
    bucket = {"playbook": "virtualcluster.yml", "phase": "Preparing", "outcome": "successful", "le": "45.0"}
    assert _value("kubenest_run_duration_seconds_bucket", bucket) >= 1
    assert _value("kubenest_run_failures_total", {"reason": "RunFailed"}) >= 1
    assert _value("kubenest_node_step_duration_seconds_count", {"step": "Drain"}) >= 2
    assert b"kubenest_runs_waiting" in generate_latest(metrics.REGISTRY)


def test_the_scrape_configuration_in_the_docs_is_the_one_the_e2e_test_uses():
    """docs/metrics.md shows the jobs tests/e2e/test_metrics.py scrapes with: the operator's, and a tenant API
    server's over HTTPS with a token file."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "metrics.md").read_text()
    blocks = [yaml.safe_load(block.split("```")[0]) for block in text.split("```yaml\n")[1:]]
    jobs = {job["job_name"]: job for block in blocks if isinstance(block, dict)
            for job in block.get("scrape_configs", [])}
    assert set(jobs) >= {"kubenest-operator", "tenant-apiserver"}
    tenant = jobs["tenant-apiserver"]
    assert tenant["scheme"] == "https" and "credentials_file" in tenant["authorization"]
    assert "ca_file" in tenant["tls_config"]
    e2e = (Path(__file__).resolve().parents[2] / "e2e" / "test_metrics.py").read_text()
    assert '"nonResourceURLs": ["/metrics"], "verbs": ["get"]' in e2e and "nonResourceURLs: [/metrics]" in text


def test_the_dashboard_queries_only_metrics_the_operator_exports():
    """dashboards/kubenest.json: valid JSON, one Prometheus data source variable, and every kubenest_ series in its
    queries a series the operator's registry produces (a renamed metric would leave a panel empty)."""
    dashboard = json.loads((Path(__file__).resolve().parents[3] / "dashboards" / "kubenest.json").read_text())
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    # The families with a sample each (labelled ones get one here), then the names of their samples.
    metrics.record_run("virtualcluster.yml", "Preparing", "successful", 1.0)
    metrics.record_failure("RunFailed")
    metrics.record_steps([("Drain", 1.0)])
    exported = {sample.name for family in metrics.REGISTRY.collect() for sample in family.samples}
    exported |= {"kubenest_virtualclusters", "kubenest_virtualcluster_condition", "kubenest_globalnodes",
                 "kubenest_certificate_expiry_timestamp_seconds"}  # from ObjectsCollector, tested above
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bkubenest_[a-z_]+", target["expr"])}
    assert queried and queried <= exported, queried - exported
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
