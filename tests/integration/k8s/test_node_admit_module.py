"""kosmos.kubenest.node_admit on a real API server: a Node registers, its kubelet asks for a serving
certificate as the node itself, and the module approves only what the node may have."""

from __future__ import annotations

import base64
import ipaddress
import threading
import time

import kubernetes
import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from kubernetes.client.rest import ApiException

from tests.support.playbook import run_module


def module(apiserver, check=False, **args):
    rc, result, _out = run_module("node_admit", apiserver.kubeconfig, check=check, **args)
    return rc, result


def serving_request(node: str, ips: list[str]) -> str:
    """What a kubelet with serverTLSBootstrap sends: CN=system:node:<node>, O=system:nodes, its addresses."""
    key = pki.generate_private_key("ec")
    csr = (x509.CertificateSigningRequestBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                                    x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}")]))
           .add_extension(x509.SubjectAlternativeName([x509.DNSName(node)]
                                                      + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]),
                          critical=False)
           .sign(key, hashes.SHA256()))
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


@pytest.fixture
def node_factory(apiserver, api_client, tmp_path):
    core = kubernetes.client.CoreV1Api(api_client)
    made = []

    def make(name, pod_cidr="198.18.64.0/24", ip="198.18.0.77", register=True):
        """A Node (as the admin: spec.podCIDR set up front) and a client that authenticates as its kubelet."""
        if register:
            core.create_node({"metadata": {"name": name, "labels": {"keep": "me"}},
                              "spec": {"podCIDR": pod_cidr} if pod_cidr else {}})
            core.patch_node_status(name, {"status": {"addresses": [{"type": "InternalIP", "address": ip}]}})
            made.append(name)
        ident = pki.issue_certificate(apiserver.ca, f"system:node:{name}", organizations=["system:nodes"],
                                      client=True)
        config = apiserver.write_kubeconfig(tmp_path / f"{name}.conf", ident)
        kubelet = kubernetes.config.new_client_from_config(config_file=str(config))
        certs = kubernetes.client.CertificatesV1Api(kubelet)

        def ask(ips, csr_name=None):
            body = {"metadata": {"name": csr_name or f"{name}-serving-{len(ips)}-{time.monotonic_ns()}"},
                    "spec": {"request": serving_request(name, ips), "signerName": "kubernetes.io/kubelet-serving",
                             "usages": ["digital signature", "server auth"]}}
            return certs.create_certificate_signing_request(body).metadata.name

        return ask

    yield make
    for name in made:
        try:
            core.delete_node(name)
        except ApiException:
            pass


def approved(api_client, csr_name: str) -> bool:
    csr = kubernetes.client.CertificatesV1Api(api_client).read_certificate_signing_request(csr_name)
    return any(c.type == "Approved" for c in (csr.status.conditions or []))


def test_admits_a_registered_node_once(apiserver, api_client, node_factory):
    ask = node_factory("kn-admit1")
    csr = ask(["198.18.0.77"])

    rc, check = module(apiserver, check=True, node="kn-admit1", labels={"kosmos.io/globalnode": "kn-admit1"},
                       timeout=5)
    assert rc == 0, check
    assert check["approved"] == [csr] and check["labels_changed"] and not approved(api_client, csr)

    rc, result = module(apiserver, node="kn-admit1", labels={"kosmos.io/globalnode": "kn-admit1"}, timeout=5)
    assert rc == 0, result
    assert result["changed"] and result["approved"] == [csr] and approved(api_client, csr)
    assert result["node"] == {"name": "kn-admit1", "pod_cidr": "198.18.64.0/24", "addresses": ["198.18.0.77"]}
    labels = kubernetes.client.CoreV1Api(api_client).read_node("kn-admit1").metadata.labels
    assert labels["kosmos.io/globalnode"] == "kn-admit1" and labels["keep"] == "me"

    rc, again = module(apiserver, node="kn-admit1", labels={"kosmos.io/globalnode": "kn-admit1"}, timeout=5)
    assert rc == 0 and not again["changed"] and again["issued"] == [csr], again


def test_waits_for_a_late_registration_and_request(apiserver, api_client, node_factory):
    ask = node_factory("kn-admit2", register=False)
    core = kubernetes.client.CoreV1Api(api_client)
    names = []

    def kubelet_starts_late():
        time.sleep(2)
        core.create_node({"metadata": {"name": "kn-admit2"}, "spec": {"podCIDR": "198.18.65.0/24"}})
        time.sleep(1)
        names.append(ask(["198.18.0.78"]))

    late = threading.Thread(target=kubelet_starts_late)
    late.start()
    try:
        rc, result = module(apiserver, node="kn-admit2", ip_addresses=["198.18.0.78"], timeout=60)
    finally:
        late.join()
        core.delete_node("kn-admit2")
    assert rc == 0, result
    assert result["approved"] == names and result["node"]["pod_cidr"] == "198.18.65.0/24"


def test_refuses_foreign_addresses_and_names_the_reason(apiserver, api_client, node_factory):
    ask = node_factory("kn-admit3")
    csr = ask(["198.18.0.77", "10.9.9.9"])
    rc, result = module(apiserver, node="kn-admit3", timeout=2)
    assert rc != 0
    assert "no acceptable kubelet-serving request from kn-admit3 within 2 s" in result["msg"]
    assert "10.9.9.9" in result["msg"] and result["refused"][0]["name"] == csr
    assert not approved(api_client, csr)


def test_a_node_that_never_registers_fails_clearly(apiserver, node_factory):
    node_factory("kn-admit4", pod_cidr="")
    rc, result = module(apiserver, node="kn-admit4", timeout=1)
    assert rc != 0 and result["msg"] == "the Node kn-admit4 did not register with a pod subnet within 1 s", result
    rc, result = module(apiserver, node="kn-absent", timeout=1, require_pod_cidr=False)
    assert rc != 0 and result["msg"] == "the Node kn-absent did not register within 1 s", result
