"""The API-server fixture is a real, secured kube-apiserver: CRDs, dry-run, RBAC and client-cert checks."""

from __future__ import annotations

import ipaddress
import time

import kubernetes
import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from kubernetes.client.rest import ApiException

GROUP = "tests.kubenest.invalid"
CRD_NAME = f"widgets.{GROUP}"


def widget_crd() -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "minimum": 1},
                        "colour": {"type": "string"},
                    }}},
                }},
            }],
        },
    }


def wait_established(extensions: kubernetes.client.ApiextensionsV1Api, name: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conditions = extensions.read_custom_resource_definition(name).status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        time.sleep(0.2)
    raise TimeoutError(f"CRD {name} not established within {timeout}s")


def client_for(apiserver, tmp_path, pair: pki.CertAndKey) -> kubernetes.client.ApiClient:
    path = apiserver.write_kubeconfig(tmp_path / "client.kubeconfig", pair)
    return kubernetes.config.new_client_from_config(config_file=str(path))


def test_crd_and_custom_objects_round_trip(api_client):
    extensions = kubernetes.client.ApiextensionsV1Api(api_client)
    custom = kubernetes.client.CustomObjectsApi(api_client)
    extensions.create_custom_resource_definition(widget_crd())
    try:
        wait_established(extensions, CRD_NAME)
        wanted = {f"widget-{i}": {"size": i + 1, "colour": colour}
                  for i, colour in enumerate(["red", "green", "blue"])}
        for name, spec in wanted.items():
            body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
            custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", body)

        listed = custom.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")["items"]
        assert {item["metadata"]["name"]: item["spec"] for item in listed} == wanted
        one = custom.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "widget-1")
        assert one["spec"] == {"size": 2, "colour": "green"}

        # The structural schema is enforced by the server.
        invalid = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "bad"}, "spec": {"size": 0}}
        with pytest.raises(ApiException) as rejected:
            custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", invalid)
        assert rejected.value.status == 422
    finally:
        extensions.delete_custom_resource_definition(CRD_NAME)


def test_server_side_dry_run_does_not_persist(api_client):
    apps = kubernetes.client.AppsV1Api(api_client)
    labels = {"app": "dry-run"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "dry-run", "labels": labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "pause", "image": "kubenest.local/pause:3.10"}]}},
        },
    }
    answer = apps.create_namespaced_deployment("default", deployment, dry_run="All")
    # Defaulting and admission ran on the server ...
    assert answer.metadata.uid
    assert answer.spec.strategy.type == "RollingUpdate"
    assert answer.spec.template.spec.containers[0].image_pull_policy == "IfNotPresent"
    # ... yet nothing was stored.
    with pytest.raises(ApiException) as missing:
        apps.read_namespaced_deployment("dry-run", "default")
    assert missing.value.status == 404
    assert apps.list_namespaced_deployment("default").items == []


def test_client_cert_from_another_ca_is_unauthorized(apiserver, tmp_path):
    intruder_ca = pki.new_ca("kubernetes")  # same name, different key
    forged_admin = pki.issue_certificate(intruder_ca, "kubenest-admin", organizations=["system:masters"], client=True)
    client = client_for(apiserver, tmp_path, forged_admin)
    try:
        with pytest.raises(ApiException) as rejected:
            kubernetes.client.CoreV1Api(client).list_namespace()
        assert rejected.value.status == 401
    finally:
        client.close()


def test_rbac_denies_a_valid_user_without_bindings(apiserver, tmp_path):
    nobody = pki.issue_certificate(apiserver.ca, "kubenest-nobody", organizations=["kubenest:no-bindings"],
                                   client=True)
    client = client_for(apiserver, tmp_path, nobody)
    try:
        with pytest.raises(ApiException) as denied:
            kubernetes.client.CoreV1Api(client).list_namespace()
        assert denied.value.status == 403
        assert "kubenest-nobody" in denied.value.body
    finally:
        client.close()


def test_admin_is_authenticated_with_its_groups(api_client):
    review = kubernetes.client.AuthenticationV1Api(api_client).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert review.status.user_info.username == "kubenest-admin"
    assert "system:masters" in review.status.user_info.groups


def test_kubernetes_service_uses_the_configured_service_cidr(apiserver, api_client):
    service = kubernetes.client.CoreV1Api(api_client).read_namespaced_service("kubernetes", "default")
    network = ipaddress.ip_network(apiserver.service_cidr)
    assert ipaddress.ip_address(service.spec.cluster_ip) == next(network.hosts())


def test_rbac_and_node_authorizers_are_enabled(apiserver):
    argv = apiserver.apiserver.argv
    assert "--authorization-mode=Node,RBAC" in argv
    assert apiserver.startup_seconds is not None and apiserver.startup_seconds < apiserver.startup_timeout
