"""The pure parts of bench/many_tenants.py: tenants dealt round the namespaces, and costs per tenant as slopes."""

from __future__ import annotations

from bench import many_tenants as bench
from bench.operator_scale import requests_total


def test_tenants_are_dealt_round_the_namespaces_with_names_unique_across_them():
    dealt = bench.tenants(5, 2)
    assert dealt == [("kubenest-tenants-0", "t000"), ("kubenest-tenants-1", "t001"), ("kubenest-tenants-0", "t002"),
                     ("kubenest-tenants-1", "t003"), ("kubenest-tenants-0", "t004")]
    assert len({name for _namespace, name in bench.tenants(50, 10)}) == 50


def test_each_figure_per_tenant_is_the_slope_from_one_tenant_to_all():
    one = dict.fromkeys((key for _label, key in bench.FIGURES), 10.0)
    many = dict(one, operator_MiB=59.0, host_requests_per_min=10.0, tenants_MiB=10.0 + 49 * 200)
    costs = bench.per_tenant(one, many, 50)
    assert costs["operator_MiB"] == 1.0
    assert costs["host_requests_per_min"] == 0.0
    assert costs["tenants_MiB"] == 200.0


def test_the_host_api_servers_requests_are_summed_over_every_series_and_nothing_else():
    text = "\n".join([
        "# HELP apiserver_request_total Counter of apiserver requests",
        'apiserver_request_total{code="200",verb="GET"} 41',
        'apiserver_request_total{code="201",verb="POST"} 1.5',
        'apiserver_request_duration_seconds_count{verb="GET"} 999',
    ])
    assert requests_total(text) == 42.5


def test_fifty_tenants_ask_for_less_than_the_sandbox_machine_has():
    def mcpu(value: str) -> float:
        return float(value[:-1]) if value.endswith("m") else float(value) * 1000

    hosted = bench.SMALL_REQUESTS["control_plane_hosted_resources"].values()
    per_tenant = (sum(mcpu(c["requests"]["cpu"]) for c in hosted)
                  + mcpu(bench.SMALL_REQUESTS["etcd_hosted_resources"]["requests"]["cpu"]) + 5)  # Konnectivity's 5m
    assert per_tenant == 27
    assert 50 * per_tenant < 2000
