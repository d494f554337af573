"""What a returning kubelet may be approved for with its bootstrap token: its own node's client identity only."""

from __future__ import annotations

import base64

import pytest
from ansible_collections.kosmos.kubenest.plugins.module_utils.csr import check_client_request
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CLIENT = ["digital signature", "client auth"]


def _request(*attributes, sans=None) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(
        [x509.NameAttribute(oid, value) for oid, value in attributes]))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    pem = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return base64.b64encode(pem).decode()


OWN = ((NameOID.ORGANIZATION_NAME, "system:nodes"), (NameOID.COMMON_NAME, "system:node:kn-w1"))


def test_the_nodes_own_request_passes():
    assert check_client_request(_request(*OWN), "kn-w1", CLIENT) is None
    assert check_client_request(_request(*OWN), "kn-w1", CLIENT + ["key encipherment"]) is None  # RSA keys


@pytest.mark.parametrize(("attributes", "usages", "sans", "says"), [
    (((NameOID.ORGANIZATION_NAME, "system:nodes"), (NameOID.COMMON_NAME, "system:node:kn-cp1")), CLIENT, None,
     "is not CN=system:node:kn-w1"),
    (((NameOID.ORGANIZATION_NAME, "system:masters"), (NameOID.COMMON_NAME, "system:node:kn-w1")), CLIENT, None,
     "is not CN=system:node:kn-w1"),
    ((*OWN, (NameOID.ORGANIZATION_NAME, "system:masters")), CLIENT, None, "is not CN=system:node:kn-w1"),
    ((*OWN, (NameOID.ORGANIZATIONAL_UNIT_NAME, "x")), CLIENT, None, "is not CN=system:node:kn-w1"),
    (OWN, ["digital signature", "server auth"], None, "not those of a TLS client"),
    (OWN, CLIENT + ["server auth"], None, "not those of a TLS client"),
    (OWN, CLIENT, [x509.DNSName("kn-w1")], "names no addresses"),
])
def test_anything_else_is_refused_with_its_reason(attributes, usages, sans, says):
    assert says in check_client_request(_request(*attributes, sans=sans), "kn-w1", usages)


def test_an_unreadable_request_is_refused():
    assert "unreadable request" in check_client_request(base64.b64encode(b"junk").decode(), "kn-w1", CLIENT)
