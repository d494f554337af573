"""Short-lived certificates of a real virtual cluster are renewed by the operator on its own, and the control
plane moves onto them: the apiserver serves the new certificate, clients use new ones, nothing stored is lost."""

from __future__ import annotations

import base64
import hashlib
import socket
import ssl
from urllib.parse import urlparse

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from tests.support import rotation
from tests.support.virtualclusters import (
    condition,
    create_vc,
    get_vc,
    own_operator,
    tenant_client,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-certs"
NAME = "renew"
# 0.004 days is 5.8 min, 10.8 with the clock-skew allowance: renewed in its last third, 2.2 min after issue.
VALIDITY_DAYS = 0.004


@pytest.fixture(scope="module")
def operator(host_cluster, tmp_path_factory):
    sb, api = host_cluster
    with own_operator(sb, api, NS, tmp_path_factory.mktemp("operator"), "--cert-check-interval", "10",
                      site={"kubenest_cert_validity_days": VALIDITY_DAYS}, leftovers_timeout=300):
        yield api


def _secret_cert(api, key: str) -> x509.Certificate:
    data = k8s.CoreV1Api(api).read_namespaced_secret(f"{NAME}-pki", NS).data
    return x509.load_pem_x509_certificate(base64.b64decode(data[key]))


def _sha256(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def _served_sha256(endpoint: str) -> str | None:
    url = urlparse(endpoint)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # only which certificate is served
    try:
        with socket.create_connection((url.hostname, url.port), timeout=5) as sock, \
                context.wrap_socket(sock) as tls:
            return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()
    except OSError:
        return None


def _create_config_map(tenant) -> bool:
    """Written once; an apiserver pod being replaced by a renewal may refuse the first try."""
    core = k8s.CoreV1Api(tenant)
    try:
        core.create_namespaced_config_map("default", {"metadata": {"name": "before-renewal"},
                                                      "data": {"kept": "yes"}}, _request_timeout=10)
    except ApiException as exc:
        if exc.status != 409:
            return False
    except (HTTPError, OSError):
        return False
    return True


def _read_config_map(tenant) -> dict | None:
    """Its data; {} when it is gone; None while an apiserver pod being replaced refuses the read."""
    try:
        return k8s.CoreV1Api(tenant).read_namespaced_config_map("before-renewal", "default",
                                                                _request_timeout=10).data or {}
    except ApiException as exc:
        return {} if exc.status == 404 else None
    except (HTTPError, OSError):
        return None


def _rolled_out(api, component: str, before: str) -> str | None:
    """The pod template's certificate revision once the Deployment is rolled out onto a new one."""
    dep = k8s.AppsV1Api(api).read_namespaced_deployment(f"{NAME}-{component}", NS)
    revision = (dep.spec.template.metadata.annotations or {}).get("kubenest.kosmos.io/pki-revision")
    status = dep.status
    done = (revision != before and status.observed_generation == dep.metadata.generation
            and status.updated_replicas == status.replicas == status.available_replicas == dep.spec.replicas)
    return revision if done else None


def _pod_uids(api, component: str) -> set[str]:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(
        NS, label_selector=f"kosmos.io/virtualcluster={NAME},app.kubernetes.io/component={component}").items
    return {pod.metadata.uid for pod in pods}


@rotation.turn("certificate-renewal")
def test_short_lived_certificates_are_renewed_and_taken_up(operator):
    api = operator
    create_vc(api, NS, NAME, {})
    vc = wait_ready(api, NS, NAME)
    first = _secret_cert(api, "apiserver.crt")
    lifetime = (first.not_valid_after_utc - first.not_valid_before_utc).total_seconds()
    assert 640 <= lifetime <= 650, lifetime  # 0.004 days plus the 5 min back-dating
    tenant = tenant_client(vc, api)[0]
    wait_for(lambda: _create_config_map(tenant), 120, "a ConfigMap written in the tenant", interval=3)
    revisions = {c: k8s.AppsV1Api(api).read_namespaced_deployment(f"{NAME}-{c}", NS)
                 .spec.template.metadata.annotations["kubenest.kosmos.io/pki-revision"]
                 for c in ("apiserver", "controller-manager", "scheduler")}
    etcd_pods = _pod_uids(api, "etcd")

    # Nobody touches the VirtualCluster: the operator's check finds the certificates in their window.
    wait_for(lambda: _sha256(_secret_cert(api, "apiserver.crt")) != _sha256(first), 420,
             "the apiserver certificate to be re-issued", interval=5)
    for component, before in revisions.items():
        wait_for(lambda c=component, b=before: _rolled_out(api, c, b), 300, f"{component} rolled onto it")

    def serving_the_current_one():
        current = _sha256(_secret_cert(api, "apiserver.crt"))
        return current != _sha256(first) and _served_sha256(vc["status"]["endpoint"]) == current
    wait_for(serving_the_current_one, 300, "the apiserver to serve the renewed certificate", interval=3)
    vc = wait_ready(api, NS, NAME)

    # The renewed admin credential works, and etcd kept its data: it took its certificates up without a restart.
    tenant, config = tenant_client(vc, api)
    admin = x509.load_pem_x509_certificate(base64.b64decode(config["users"][0]["user"]["client-certificate-data"]))
    assert admin.not_valid_before_utc > first.not_valid_before_utc
    assert wait_for(lambda: _read_config_map(tenant), 120, "the ConfigMap read back", interval=3) == {"kept": "yes"}
    assert _pod_uids(api, "etcd") == etcd_pods
    events = k8s.CoreV1Api(api).list_namespaced_event(NS).items
    # The check names the certificates due when it looked (etcd's, issued first, may be alone); the run renews
    # every one due by the time its role gets to it.
    assert any(e.reason == "CertificateRenewal" and f"{NAME}-" in (e.message or "") for e in events)
    # Renewal goes on every ~2 min with these lifetimes: the virtual cluster stays Ready through its runs.
    assert condition(get_vc(api, NS, NAME), "Ready")["status"] == "True"
