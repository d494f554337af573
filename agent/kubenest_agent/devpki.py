"""Development PKI for sandboxes and tests: a CA, per-node server certs, one controller client cert.

Production installs get agent certificates issued by the operator; this is deliberately simple.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_CLIENT_NAME = "kubenest-controller"
CA_DAYS = 5 * 365
LEAF_DAYS = 365


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _write_public(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def new_ca(common_name: str = "kubenest-agent-ca", days: int = CA_DAYS):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(ca_cert, ca_key, common_name: str, *, server: bool, dns=(), ips=(),
          not_before: dt.datetime | None = None, not_after: dt.datetime | None = None):
    """Issue a leaf certificate; validity bounds are overridable so tests can make expired ones."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - dt.timedelta(minutes=5))
        .not_valid_after(not_after or now + dt.timedelta(days=LEAF_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def write_pair(directory: Path, stem: str, cert, key) -> None:
    _write_public(directory / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM))
    _write_private(directory / f"{stem}.key", _key_pem(key))


def load_pair(directory: Path, stem: str):
    cert = x509.load_pem_x509_certificate((directory / f"{stem}.crt").read_bytes())
    key = serialization.load_pem_private_key((directory / f"{stem}.key").read_bytes(), None)
    return cert, key


def ensure_dev_pki(out: Path, node: str | None, ips=(), client_name: str = DEFAULT_CLIENT_NAME) -> dict:
    """Create or reuse the CA and client cert in ``out``; (re)issue the node's server cert. Without a node, only
    the CA and the client pair: playbooks/install_agent.yml issues each node's certificate from the CA."""
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    if (out / "ca.crt").exists() and (out / "ca.key").exists():
        ca_cert, ca_key = load_pair(out, "ca")
    else:
        ca_cert, ca_key = new_ca()
        write_pair(out, "ca", ca_cert, ca_key)
    if not (out / "client.crt").exists():
        cert, key = issue(ca_cert, ca_key, client_name, server=False)
        write_pair(out, "client", cert, key)
    paths = {"ca": str(out / "ca.crt"), "ca_path": str(out / "ca"), "client_cert": str(out / "client.crt"),
             "client_key": str(out / "client.key")}
    if node is None:
        return paths
    cert, key = issue(ca_cert, ca_key, node, server=True, dns=[node], ips=ips)
    write_pair(out, node, cert, key)
    return {**paths, "cert": str(out / f"{node}.crt"), "key": str(out / f"{node}.key")}
