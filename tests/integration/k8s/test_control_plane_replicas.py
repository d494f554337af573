"""A real API server takes the manifests of several API servers and the components' disruption budgets as they
are built, every field known (strict field validation, server-side dry run), and keeps what they ask for."""

from __future__ import annotations

import uuid

import kubernetes
import pytest
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest

from tests.integration.k8s.test_pod_security import SETTINGS


@pytest.fixture(scope="module")
def namespace(api_client):
    core = kubernetes.client.CoreV1Api(api_client)
    name = f"replicas-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def _vc(namespace):
    return {"name": "vc1", "namespace": namespace, "labels": {"kosmos.io/virtualcluster": "vc1"},
            "selector": {"kosmos.io/virtualcluster": "vc1"}, "owner_references": []}


@pytest.mark.parametrize(("replicas", "host_nodes"), [(2, 2), (3, 1)])
@pytest.mark.parametrize("component", ["apiserver", "controller-manager", "scheduler"])
def test_several_replicas_are_a_valid_deployment(api_client, namespace, component, replicas, host_nodes):
    settings = dict(SETTINGS, replicas=replicas, host_nodes=host_nodes,
                    konnectivity_image="kubenest.local/konnectivity-server:v0.34.0")
    manifest = hosted_manifest(component, _vc(namespace), settings)
    made = kubernetes.client.AppsV1Api(api_client).create_namespaced_deployment(
        namespace, manifest, dry_run="All", field_validation="Strict")
    assert made.spec.replicas == replicas
    assert made.spec.strategy.rolling_update.max_surge == 0
    assert made.spec.strategy.rolling_update.max_unavailable == 1
    anti = made.spec.template.spec.affinity.pod_anti_affinity
    assert bool(anti.required_during_scheduling_ignored_during_execution) == (host_nodes >= replicas)


@pytest.mark.parametrize("component", ["etcd", "apiserver", "controller-manager", "scheduler"])
def test_each_budget_is_a_valid_pod_disruption_budget(api_client, namespace, component):
    manifest = hosted_manifest(component + "-budget", _vc(namespace), SETTINGS)
    made = kubernetes.client.PolicyV1Api(api_client).create_namespaced_pod_disruption_budget(
        namespace, manifest, dry_run="All", field_validation="Strict")
    assert made.spec.max_unavailable == 1
    assert made.spec.unhealthy_pod_eviction_policy == "AlwaysAllow"
    assert made.spec.selector.match_labels == {"kosmos.io/virtualcluster": "vc1",
                                               "app.kubernetes.io/component": component}
