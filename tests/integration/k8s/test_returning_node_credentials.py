"""A node that comes back from a tenant gets host credentials for its own name only, on a real API server.

Its bootstrap token's group may ask for a node client certificate but is approved for nothing automatically (the
host's CSR approver asks RBAC whether the requester may create `certificatesigningrequests/nodeclient`; the
SubjectAccessReview here asks the same). The return approves the request for the node's name, and denies what a
root process the tenant left on the node asks for with the same token: another node's identity."""

from __future__ import annotations

import base64
import copy
from pathlib import Path

import kubernetes
import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import kube_api
from ansible_collections.kosmos.kubenest.plugins.module_utils.csr import CLIENT_SIGNER, approve_client_requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

REPO = Path(__file__).resolve().parents[3]
DEFAULTS = yaml.safe_load((REPO / "roles/node_promote/defaults/main.yml").read_text())
GROUPS = DEFAULTS["node_promote_host_bootstrap_groups"]
TOKEN_ID = "rtn0de"
USER = f"system:bootstrap:{TOKEN_ID}"
NODE = "kn-returning"

# What hosts bind for their own joins: this collection's (roles/kubelet/tasks/rbac.yml) and kubeadm's.
HOST_AUTO_APPROVALS = {"kubenest:node-autoapprove-bootstrap": "system:bootstrappers:kubenest",
                       "kubeadm:node-autoapprove-bootstrap": "system:bootstrappers:kubeadm:default-node-token"}


@pytest.fixture(scope="module")
def host(api_client):
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    for name, group in HOST_AUTO_APPROVALS.items():
        try:
            rbac.create_cluster_role_binding({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "system:certificates.k8s.io:certificatesigningrequests:nodeclient"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]})
        except ApiException as exc:
            if exc.status != 409:
                raise
    # The binding an operator install ships (deploy/operator/rbac.yaml).
    dynamic = DynamicClient(api_client)
    for doc in yaml.safe_load((REPO / "deploy/operator/rbac.yaml").read_text())["items"]:
        if doc["kind"] == "ClusterRoleBinding" and doc["metadata"]["name"] == DEFAULTS[
                "node_promote_host_bootstrap_binding"]:
            try:
                dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"]).create(body=doc)
            except ApiException as exc:
                if exc.status != 409:
                    raise
    return api_client


def _may(api_client, subresource=None) -> bool:
    review = kubernetes.client.AuthorizationV1Api(api_client).create_subject_access_review({
        "spec": {"user": USER, "groups": ["system:bootstrappers", *GROUPS, "system:authenticated"],
                 "resourceAttributes": {"group": "certificates.k8s.io", "resource": "certificatesigningrequests",
                                        "verb": "create", "subresource": subresource}}})
    return review.status.allowed


def test_the_token_group_may_ask_for_a_node_certificate_but_is_never_approved_automatically(host):
    assert _may(host)
    assert not _may(host, "nodeclient"), f"{GROUPS} would be approved for any node name by the host's approver"


def _as_token(api_client):
    impersonating = kubernetes.client.ApiClient(copy.copy(api_client.configuration))
    impersonating.set_default_header("Impersonate-User", USER)
    impersonating.set_default_header("Impersonate-Group", GROUPS[0])  # one header, one group: the one bound
    return impersonating


def _request(cn: str, org: str = "system:nodes") -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
    pem = csr.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return base64.b64encode(pem).decode()


def _csr(api, admin, name: str, cn: str, signer: str = CLIENT_SIGNER, usages=("digital signature", "client auth")):
    try:
        admin.delete_certificate_signing_request(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
    api.create_certificate_signing_request({"metadata": {"name": name}, "spec": {
        "request": _request(cn), "signerName": signer, "usages": list(usages)}})


def _conditions(api, name: str) -> list[str]:
    status = api.read_certificate_signing_request(name).status
    return [c.type for c in (status.conditions or [])]


def test_the_return_approves_its_nodes_name_and_denies_anything_else_asked_with_the_token(host, apiserver):
    from kubernetes import client as k8s

    approver = kube_api.connect(str(apiserver.kubeconfig))  # the client kubelet_client_csr uses

    admin = k8s.CertificatesV1Api(host)
    token = k8s.CertificatesV1Api(_as_token(host))
    _csr(token, admin, "rtn-own", f"system:node:{NODE}")
    _csr(token, admin, "rtn-other-node", "system:node:kn-cp1")  # what a root process left by the tenant asks for
    _csr(token, admin, "rtn-serving", f"system:node:{NODE}", signer="kubernetes.io/kubelet-serving",
         usages=("digital signature", "server auth"))
    _csr(admin, admin, "rtn-someone-else", f"system:node:{NODE}")  # not made with the node's token: not ours to judge
    assert k8s.CertificatesV1Api(host).read_certificate_signing_request("rtn-own").spec.username == USER

    planned = approve_client_requests(approver, NODE, USER, check_mode=True)
    assert planned["approved"] == ["rtn-own"] and _conditions(admin, "rtn-own") == []

    result = approve_client_requests(approver, NODE, USER)
    assert result["approved"] == ["rtn-own"]
    refused = {r["name"]: r["reason"] for r in result["refused"]}
    assert set(refused) == {"rtn-other-node", "rtn-serving"}
    assert "is not CN=system:node:kn-returning" in refused["rtn-other-node"]
    assert "signer kubernetes.io/kubelet-serving" in refused["rtn-serving"]
    assert _conditions(admin, "rtn-own") == ["Approved"]
    assert _conditions(admin, "rtn-other-node") == ["Denied"] and _conditions(admin, "rtn-serving") == ["Denied"]
    assert _conditions(admin, "rtn-someone-else") == []

    again = approve_client_requests(approver, NODE, USER)  # idempotent: nothing left to judge
    assert again == {"approved": [], "issued": ["rtn-own"], "refused": []}
    for name in ("rtn-own", "rtn-other-node", "rtn-serving", "rtn-someone-else"):
        admin.delete_certificate_signing_request(name)
