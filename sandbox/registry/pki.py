"""The registry's own CA and its server certificate: trusted by the machines for pulls and nothing else."""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 3650


def _write_key(path: Path, key) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kosmos.kubenest sandbox"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _serves(cert_path: Path, ca_path: Path, address: str) -> bool:
    """Whether the server certificate exists, names `address` and was issued by the CA on disk."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        ca = x509.load_pem_x509_certificate(ca_path.read_bytes())
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (FileNotFoundError, ValueError, x509.ExtensionNotFound):
        return False
    if cert.issuer != ca.subject or cert.not_valid_after_utc < datetime.datetime.now(datetime.UTC):
        return False
    return ipaddress.ip_address(address) in sans.get_values_for_type(x509.IPAddress)


def ensure(directory: Path, address: str) -> dict[str, Path]:
    """CA and server certificate for `address` in `directory`, issued once (again only when the address changed)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {"ca": directory / "ca.crt", "ca_key": directory / "ca.key",
             "cert": directory / "server.crt", "key": directory / "server.key"}
    now = datetime.datetime.now(datetime.UTC)
    if not (files["ca"].is_file() and files["ca_key"].is_file()):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        subject = _name("kosmos.kubenest sandbox registry CA")
        ca = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
              .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(minutes=5))
              .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                           content_commitment=False, key_encipherment=False,
                                           data_encipherment=False, key_agreement=False, encipher_only=False,
                                           decipher_only=False), critical=True)
              .sign(ca_key, hashes.SHA256()))
        _write_key(files["ca_key"], ca_key)
        files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        files["cert"].unlink(missing_ok=True)  # a new CA: the old server certificate no longer chains
    if _serves(files["cert"], files["ca"], address) and files["key"].is_file():
        return files
    ca = x509.load_pem_x509_certificate(files["ca"].read_bytes())
    ca_key = serialization.load_pem_private_key(files["ca_key"].read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("kosmos.kubenest sandbox registry"))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS - 1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    _write_key(files["key"], key)
    files["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files
