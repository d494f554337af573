"""Agent certificates for the machines, issued with `kubenest-agent certs` into <state>/pki."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from .config import Node, Sandbox
from .errors import SandboxError


def client_files(sb: Sandbox) -> dict[str, str]:
    """The controller's side: CA, client certificate and key (what the inventory points at)."""
    return {"ca": str(sb.pki_dir / "ca.crt"), "cert": str(sb.pki_dir / "client.crt"),
            "key": str(sb.pki_dir / "client.key")}


def _matches(cert_path: Path, node: Node) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (FileNotFoundError, ValueError, x509.ExtensionNotFound):
        return False
    return (ipaddress.ip_address(node.ip) in sans.get_values_for_type(x509.IPAddress)
            and node.name in sans.get_values_for_type(x509.DNSName))


def node_files(sb: Sandbox, node: Node) -> dict[str, str]:
    """The node's server certificate (issued once, again only if its name or address no longer match)."""
    cert = sb.pki_dir / f"{node.name}.crt"
    if not (_matches(cert, node) and (sb.pki_dir / "client.crt").is_file()):
        argv = [sys.executable, "-m", "kubenest_agent.cli", "certs", "--out", str(sb.pki_dir),
                "--node", node.name, "--ip", node.ip]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SandboxError(f"kubenest-agent certs failed for {node.name}: {proc.stderr.strip()}")
    return {"ca": str(sb.pki_dir / "ca.crt"), "cert": str(cert), "key": str(sb.pki_dir / f"{node.name}.key")}


def reissued_in_machine(pki_in_machine: Path, node: Node, ca_file: Path) -> bool:
    """Whether the machine holds its own certificate for this node from the same CA, with its key: one the
    node_promote role re-issued when the node came back from a virtual cluster. It stays; putting back the
    first one would present a certificate its GlobalNode no longer accepts."""
    cert_path, key_path = pki_in_machine / "node.crt", pki_in_machine / "node.key"
    if not (_matches(cert_path, node) and key_path.is_file()):
        return False
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
    try:
        cert.verify_directly_issued_by(ca)
        key = load_pem_private_key(key_path.read_bytes(), password=None)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return key.public_key().public_numbers() == cert.public_key().public_numbers()
