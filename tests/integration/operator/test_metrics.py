"""The real operator's /metrics (--metrics-address) against a real API server, after a run of the test playbook:
the run counted once with its duration and slot wait, the VirtualCluster's phase and Ready condition as the
status says, the slots free again; a deleted VirtualCluster leaves its series."""

from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.operator.operatorproc import wait_for_vc
from tests.integration.operator.test_virtualclusters import COMPLETED, completed
from tests.support.procs import free_ports, wait_until


def _scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _sum(samples, name, **labels) -> float:
    return sum(v for (n, found), v in samples.items() if n == name and set(labels.items()) <= set(found))


def test_a_run_and_its_virtual_cluster_are_in_the_metrics(kube, operators):
    ns = kube.new_namespace(sleep=1)
    (port,) = free_ports(1)
    operator = operators.start("operator", "--namespace", ns, "--metrics-address", f"127.0.0.1:{port}")
    wait_until(lambda: _sum(_scrape(port), "kubenest_runs_running") == 0, 30, "the metrics served")
    started = time.monotonic()
    kube.create_vc(ns, "alpha", {})
    wait_for_vc(kube, ns, "alpha", completed(), COMPLETED, "alpha Completed", operator)
    waited = time.monotonic() - started
    # The slot goes back just after the status is written.
    wait_until(lambda: _sum(_scrape(port), "kubenest_runs_running") == 0, 10, "the run's slot free again")
    samples = _scrape(port)
    assert _sum(samples, "kubenest_runs_total", phase="Preparing", outcome="successful") == 1
    assert _sum(samples, "kubenest_run_duration_seconds_count", phase="Preparing") == 1
    assert 0 < _sum(samples, "kubenest_run_duration_seconds_sum", phase="Preparing") <= waited
    assert _sum(samples, "kubenest_run_slot_wait_seconds_count") == 1
    assert _sum(samples, "kubenest_runs_waiting") == 0
    # The objects as listed at a scrape, at most CACHE_SECONDS (10 s) old: the scrape before the create may be it.
    wait_until(lambda: _sum(_scrape(port), "kubenest_virtualcluster_condition", namespace=ns, virtualcluster="alpha",
                            condition="Ready", status="True") == 1, 30, "alpha Ready in the metrics")
    assert _sum(_scrape(port), "kubenest_virtualclusters", phase="Completed") == 1

    kube.delete_vc(ns, "alpha")
    wait_until(lambda: kube.vc(ns, "alpha") is None, COMPLETED, "alpha deleted")
    wait_until(lambda: _sum(_scrape(port), "kubenest_virtualcluster_condition", virtualcluster="alpha") == 0, 30,
               "alpha's series gone")
    samples = _scrape(port)
    assert _sum(samples, "kubenest_runs_total", phase="Deleting", outcome="successful") == 1
