import ipaddress
import stat

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubenest_agent.devpki import ensure_dev_pki


def _cert(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_node_cert_has_name_and_ip_sans(tmp_path):
    ensure_dev_pki(tmp_path, "node-a", ["192.0.2.10"])
    cert = _cert(tmp_path / "node-a.crt")
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["node-a"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("192.0.2.10")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_second_node_reuses_ca_and_client(tmp_path):
    ensure_dev_pki(tmp_path, "node-a")
    ca_before = (tmp_path / "ca.crt").read_bytes()
    client_before = (tmp_path / "client.crt").read_bytes()
    ensure_dev_pki(tmp_path, "node-b")
    assert (tmp_path / "ca.crt").read_bytes() == ca_before
    assert (tmp_path / "client.crt").read_bytes() == client_before
    ca = _cert(tmp_path / "ca.crt")
    for name in ("node-a", "node-b", "client"):
        assert _cert(tmp_path / f"{name}.crt").issuer == ca.subject


def test_client_identity_and_key_permissions(tmp_path):
    ensure_dev_pki(tmp_path, "node-a")
    client = _cert(tmp_path / "client.crt")
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubenest-controller"
    for key in tmp_path.glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_without_a_node_only_the_ca_and_the_client_pair_are_written_and_kept(tmp_path):
    """`kubenest-agent certs --out DIR` before playbooks/install_agent.yml, which issues each node's pair."""
    from kubenest_agent.cli import main

    assert main(["certs", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "ca.key", "client.crt", "client.key"]
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    paths = ensure_dev_pki(tmp_path, None)
    assert paths["ca_path"] == str(tmp_path / "ca") and "cert" not in paths
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert _cert(tmp_path / "client.crt").issuer == _cert(tmp_path / "ca.crt").subject
