"""The operator's metrics and a tenant's, scraped by a real Prometheus (Debian's package): one VirtualCluster is
created with a node, which is promoted, and deleted, which returns the node; Prometheus, scraping the operator's
--metrics-address and the tenant's API server (with a token of a tenant ServiceAccount allowed /metrics only, the
configuration docs/metrics.md gives), answers for the create's duration, the promotion's and the return's steps,
the VirtualCluster's phase and conditions, its certificates' expiry and the tenant's own request counts."""

from __future__ import annotations

import base64
import time

import pytest
from kubernetes import client as k8s

from tests.support.procs import free_ports
from tests.support.prometheus import Prometheus
from tests.support.virtualclusters import create_vc, delete_vc, get_vc, own_operator, tenant_client, wait_ready

NS = "kubenest-e2e-metrics"
NAME = "measured"
NODE = "kn-w1"
# Steps of a promotion and of a return (roles/node_promote/tasks; docs/node-promotion.md).
PROMOTION_STEPS = ("Drain", "Kubelet", "Ready")
RETURN_STEPS = ("TenantDrain", "HostRejoin", "HostReady")


def _metrics_reader(tenant) -> str:
    """A token of the tenant's ServiceAccount kube-system/prometheus, allowed GET /metrics and nothing else."""
    rbac, core = k8s.RbacAuthorizationV1Api(tenant), k8s.CoreV1Api(tenant)
    rbac.create_cluster_role({"metadata": {"name": "kubenest-metrics-reader"},
                              "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
    core.create_namespaced_service_account("kube-system", {"metadata": {"name": "prometheus"}})
    rbac.create_cluster_role_binding({
        "metadata": {"name": "kubenest-metrics-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubenest-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "kube-system"}]})
    return core.create_namespaced_service_account_token("prometheus", "kube-system", {
        "spec": {"expirationSeconds": 3600}}).status.token


@pytest.fixture(scope="module")
def measured(host_cluster, tmp_path_factory):
    """The operator with --metrics-address, the VirtualCluster with NODE created, and Prometheus scraping both."""
    sb, api = host_cluster
    log_dir = tmp_path_factory.mktemp("operator")
    (port,) = free_ports(1)
    with own_operator(sb, api, NS, log_dir, "--metrics-address", f"127.0.0.1:{port}", "--node-wait-interval", "5"):
        try:
            started = time.monotonic()
            create_vc(api, NS, NAME, {"promoteResources": {"nodes": [NODE]}})
            vc = wait_ready(api, NS, NAME, timeout=900)
            waited = time.monotonic() - started
            tenant, kubeconfig = tenant_client(vc, api)
            work = tmp_path_factory.mktemp("scrape")
            (work / "token").write_text(_metrics_reader(tenant))
            (work / "ca.crt").write_bytes(base64.b64decode(kubeconfig["clusters"][0]["cluster"][
                "certificate-authority-data"]))
            tenant_address = vc["status"]["endpoint"].removeprefix("https://")
            jobs = [
                {"job_name": "kubenest-operator", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]},
                {"job_name": "tenant-apiserver", "scheme": "https",
                 "static_configs": [{"targets": [tenant_address], "labels": {"virtualcluster": f"{NS}/{NAME}"}}],
                 "tls_config": {"ca_file": str(work / "ca.crt")},
                 "authorization": {"credentials_file": str(work / "token")}},
            ]
            with Prometheus(jobs, log_dir) as prometheus:
                yield api, prometheus, waited
        finally:
            if get_vc(api, NS, NAME) is not None:
                delete_vc(api, NS, NAME, timeout=900)


def test_prometheus_scrapes_the_operator_and_the_tenants_api_server(measured):
    _api, prometheus, _waited = measured
    for job in ("kubenest-operator", "tenant-apiserver"):
        prometheus.wait_for(f'up{{job="{job}"}}', lambda up: up == 1, 30, f"{job} scraped")
    requests = prometheus.wait_for('sum(apiserver_request_total{job="tenant-apiserver"})', lambda n: n > 0, 30,
                                   "the tenant's own request count")
    ready = prometheus.wait_for(f'kubenest_virtualcluster_condition{{virtualcluster="{NAME}",condition="Ready"}}',
                                lambda v: v == 1, 30, "the Ready condition")
    condition = prometheus.query(f'kubenest_virtualcluster_condition{{virtualcluster="{NAME}",condition="Ready"}}')
    assert ready == 1 and condition[0]["metric"]["status"] == "True", condition
    assert prometheus.value('kubenest_virtualclusters{phase="Completed"}') >= 1
    held = prometheus.query("kubenest_globalnodes")
    assert sum(r["value"] for r in held) >= 1 and {r["metric"]["state"] for r in held}, held
    expiry = prometheus.wait_for(f'kubenest_certificate_expiry_timestamp_seconds{{virtualcluster="{NAME}",'
                                 f'secret="{NAME}-pki",certificate="apiserver.crt"}}', lambda t: t > 0, 30,
                                 "the API server certificate's expiry")
    assert expiry > time.time() + 30 * 86400
    print(f"\ntenant API server: {requests:.0f} requests counted; its certificate expires in "
          f"{(expiry - time.time()) / 86400:.0f} days")


def test_the_create_and_its_promotion_are_measured(measured):
    _api, prometheus, waited = measured
    create = prometheus.wait_for('sum(kubenest_run_duration_seconds_sum{phase="Preparing",outcome="successful"})',
                                 lambda s: s > 0, 30, "the create run's duration")
    assert prometheus.value('sum(kubenest_runs_total{phase="Preparing",outcome="successful"})') >= 1
    # The create's run is part of the wait for Ready, which also covers the operator's noticing the object.
    assert create <= waited, (create, waited)
    steps = {}
    for step in PROMOTION_STEPS:
        steps[step] = prometheus.wait_for(f'kubenest_node_step_duration_seconds_sum{{step="{step}"}}',
                                          lambda s: s > 0, 30, f"promotion step {step}")
    promotion = prometheus.value('sum(kubenest_node_step_duration_seconds_sum{step!~"Returning|TenantDrain|Host.*"})')
    assert sum(steps.values()) <= promotion <= create, (steps, promotion, create)
    print(f"\ncreate run {create:.1f}s (ready after {waited:.1f}s); promotion steps {promotion:.1f}s: "
          + ", ".join(f"{step} {seconds:.1f}s" for step, seconds in steps.items()))


def test_the_delete_and_the_nodes_return_are_measured(measured):
    api, prometheus, _waited = measured
    took = delete_vc(api, NS, NAME, timeout=900)
    deleted = prometheus.wait_for('sum(kubenest_run_duration_seconds_sum{phase="Deleting",outcome="successful"})',
                                  lambda s: s > 0, 30, "the delete run's duration")
    steps = {step: prometheus.wait_for(f'kubenest_node_step_duration_seconds_sum{{step="{step}"}}',
                                       lambda s: s > 0, 30, f"return step {step}") for step in RETURN_STEPS}
    assert sum(steps.values()) <= deleted <= took, (steps, deleted, took)
    prometheus.wait_for(f'count(kubenest_virtualcluster_condition{{virtualcluster="{NAME}"}}) or vector(0)',
                        lambda n: n == 0, 30, "the deleted VirtualCluster gone from the metrics")
    print(f"\ndelete run {deleted:.1f}s (gone after {took:.1f}s); return steps: "
          + ", ".join(f"{step} {seconds:.1f}s" for step, seconds in steps.items()))
