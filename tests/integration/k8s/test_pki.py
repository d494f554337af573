"""module_utils.pki and module_utils.kubeconfig: the certificates they make are what Kubernetes expects."""

from __future__ import annotations

import base64
import datetime

import kubernetes
import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig, pki
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store


def lifetime(cert: x509.Certificate) -> datetime.timedelta:
    return cert.not_valid_after_utc - cert.not_valid_before_utc


def test_ca_is_a_ten_year_self_signed_ca():
    ca = pki.new_ca("kubernetes")
    constraints = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    assert ca.cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert ca.cert.issuer == ca.cert.subject
    assert abs(lifetime(ca.cert) - datetime.timedelta(days=3650) - pki.CLOCK_SKEW) < datetime.timedelta(seconds=5)


def test_server_certificate_verifies_for_its_names_and_ips():
    ca = pki.new_ca("kubernetes")
    leaf = pki.issue_certificate(ca, "kube-apiserver", dns_names=["kubernetes.default.svc"],
                                 ip_addresses=["127.0.0.1", "198.19.128.1"], server=True)
    san = leaf.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["kubernetes.default.svc"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "198.19.128.1"]
    assert list(leaf.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == \
        [ExtendedKeyUsageOID.SERVER_AUTH]
    assert abs(lifetime(leaf.cert) - datetime.timedelta(days=365) - pki.CLOCK_SKEW) < datetime.timedelta(seconds=5)

    verifier = PolicyBuilder().store(Store([ca.cert])).build_server_verifier(x509.DNSName("kubernetes.default.svc"))
    verifier.verify(leaf.cert, [])
    other = PolicyBuilder().store(Store([ca.cert])).build_server_verifier(x509.DNSName("example.invalid"))
    with pytest.raises(x509.verification.VerificationError):
        other.verify(leaf.cert, [])


def test_client_certificate_carries_groups_as_organizations():
    ca = pki.new_ca("kubernetes")
    leaf = pki.issue_certificate(ca, "alice", organizations=["team-a", "team-b"], client=True, key_type="ec")
    assert [a.value for a in leaf.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == \
        ["team-a", "team-b"]
    assert leaf.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert isinstance(leaf.key, ec.EllipticCurvePrivateKey)
    assert not leaf.cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_encipherment


def test_leaf_needs_a_usage_and_never_outlives_its_ca():
    short_ca = pki.new_ca("short", validity_days=30)
    with pytest.raises(ValueError):
        pki.issue_certificate(short_ca, "nothing")
    leaf = pki.issue_certificate(short_ca, "capped", client=True)
    assert leaf.cert.not_valid_after_utc == short_ca.cert.not_valid_after_utc


@pytest.mark.parametrize("key_type", ["rsa", "ec"])
def test_service_account_key_round_trips_through_pem(key_type):
    key = pki.new_service_account_key(key_type)
    assert isinstance(key, {"rsa": rsa.RSAPrivateKey, "ec": ec.EllipticCurvePrivateKey}[key_type])
    reloaded = pki.load_private_key_pem(pki.private_key_pem(key))
    assert pki.public_key_pem(reloaded) == pki.public_key_pem(key)
    assert pki.private_key_pem(key).startswith(b"-----BEGIN PRIVATE KEY-----")


def test_kubeconfig_embeds_credentials():
    ca = pki.new_ca("kubernetes")
    admin = pki.issue_certificate(ca, "admin", organizations=["system:masters"], client=True)
    config = kubeconfig.client_cert_kubeconfig("https://127.0.0.1:6443", pki.certificate_pem(ca.cert),
                                               pki.certificate_pem(admin.cert), pki.private_key_pem(admin.key),
                                               cluster_name="c1", user_name="admin", namespace="kube-system")
    parsed = yaml.safe_load(kubeconfig.dump_kubeconfig(config))
    assert parsed == config
    assert parsed["current-context"] == "admin@c1"
    assert parsed["contexts"][0]["context"] == {"cluster": "c1", "user": "admin", "namespace": "kube-system"}
    user = parsed["users"][0]["user"]
    assert pki.load_certificate_pem(base64.b64decode(user["client-certificate-data"])) == admin.cert


def test_apiserver_accepts_an_ec_client_certificate(apiserver, tmp_path):
    viewer = pki.issue_certificate(apiserver.ca, "ec-admin", organizations=["system:masters"], client=True,
                                   key_type="ec")
    client = kubernetes.config.new_client_from_config(
        config_file=str(apiserver.write_kubeconfig(tmp_path / "ec.kubeconfig", viewer)))
    try:
        names = {ns.metadata.name for ns in kubernetes.client.CoreV1Api(client).list_namespace().items}
        assert {"default", "kube-system"} <= names
    finally:
        client.close()
