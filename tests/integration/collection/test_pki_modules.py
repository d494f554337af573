"""The PKI modules through real ansible-playbook runs on the controller."""

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from tests.support.playbook import run_playbook, write_play


def _inventory(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))
    return inv


def _run(tmp_path, tasks, *args):
    return run_playbook(write_play(tmp_path / "play.yml", tasks, hosts="localhost"), _inventory(tmp_path),
                        tmp_path / "control", *args)


def _tasks(pki, ips=("198.18.0.11",)):
    return [
        {"name": "ca", "kosmos.kubenest.certificate": {"path": f"{pki}/ca", "is_ca": True,
                                                       "common_name": "kubernetes-ca"}},
        {"name": "apiserver", "kosmos.kubenest.certificate": {
            "path": f"{pki}/apiserver", "ca_path": f"{pki}/ca", "common_name": "kube-apiserver",
            "usages": ["server"], "dns_names": ["kubernetes", "kubernetes.default"], "ip_addresses": list(ips)}},
        {"name": "admin", "kosmos.kubenest.certificate": {
            "path": f"{pki}/admin", "ca_path": f"{pki}/ca", "common_name": "kubenest-admin",
            "organizations": ["system:masters"]}},
        {"name": "sa", "kosmos.kubenest.service_account_key": {"path": f"{pki}/sa"}},
        {"name": "kubeconfig", "kosmos.kubenest.kubeconfig": {
            "dest": f"{pki}/admin.kubeconfig", "server": "https://198.18.0.11:6443", "ca_file": f"{pki}/ca.crt",
            "cert_path": f"{pki}/admin"}},
    ]


def test_create_then_unchanged(tmp_path):
    pki = tmp_path / "pki"
    pki.mkdir()
    first = _run(tmp_path, _tasks(pki))
    assert first.rc == 0, first.stderr
    assert first.host_stats("localhost")["changed"] == 5
    second = _run(tmp_path, _tasks(pki))
    assert second.host_stats("localhost")["changed"] == 0
    cert = x509.load_pem_x509_certificate((pki / "apiserver.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default" in sans.get_values_for_type(x509.DNSName)
    assert oct((pki / "admin.key").stat().st_mode & 0o777) == "0o600"
    assert oct((pki / "admin.kubeconfig").stat().st_mode & 0o777) == "0o600"
    # the service-account key is its own key, not any certificate's
    sa_pub = (pki / "sa.pub").read_bytes()
    for name in ("ca", "apiserver", "admin"):
        crt = x509.load_pem_x509_certificate((pki / f"{name}.crt").read_bytes())
        from cryptography.hazmat.primitives import serialization
        assert crt.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo) != sa_pub


def test_changed_sans_reissue_only_that_certificate(tmp_path):
    pki = tmp_path / "pki"
    pki.mkdir()
    _run(tmp_path, _tasks(pki))
    before = (pki / "apiserver.crt").read_bytes()
    result = _run(tmp_path, _tasks(pki, ips=("198.18.0.11", "192.0.2.7")))
    assert result.host_stats("localhost")["changed"] == 1
    assert result.task("apiserver", "localhost")["reason"] == "IP addresses differ"
    assert (pki / "apiserver.crt").read_bytes() != before


def test_check_mode_writes_nothing(tmp_path):
    pki = tmp_path / "pki"
    pki.mkdir()
    result = _run(tmp_path, _tasks(pki)[:1], "--check")
    assert result.rc == 0 and result.host_stats("localhost")["changed"] == 1
    assert list(pki.iterdir()) == []


def test_bad_input_is_a_clear_error_and_writes_nothing(tmp_path):
    pki = tmp_path / "pki"
    pki.mkdir()
    tasks = _tasks(pki)[:1] + [{"name": "bad ip", "kosmos.kubenest.certificate": {
        "path": f"{pki}/x", "ca_path": f"{pki}/ca", "common_name": "x", "ip_addresses": ["300.1.1.1"]}}]
    result = _run(tmp_path, tasks)
    assert result.host_stats("localhost")["failures"] == 1
    assert "'300.1.1.1' is not an IP address" in result.task("bad ip", "localhost")["msg"]
    assert not (pki / "x.crt").exists() and not (pki / "x.key").exists()


def test_certificate_from_another_ca_is_reissued(tmp_path):
    pki, other = tmp_path / "pki", tmp_path / "other"
    pki.mkdir()
    other.mkdir()
    _run(tmp_path, _tasks(pki))
    _run(tmp_path, _tasks(other)[:1])
    (pki / "ca.crt").write_bytes((other / "ca.crt").read_bytes())
    (pki / "ca.key").write_bytes((other / "ca.key").read_bytes())
    result = _run(tmp_path, _tasks(pki))
    assert result.task("apiserver", "localhost")["reason"] == "not signed by the given CA"


def _short_lived(pki, validity_days):
    return _tasks(pki)[:1] + [{"name": "short", "kosmos.kubenest.certificate": {
        "path": f"{pki}/short", "ca_path": f"{pki}/ca", "common_name": "short", "validity_days": validity_days}}]


def test_a_short_lived_certificate_is_renewed_in_the_last_third_of_its_life(tmp_path):
    pki = tmp_path / "pki"
    pki.mkdir()
    # 0.01 days is 14.4 min, 19.4 with the clock-skew allowance: its renewal window is its last 6.5 min, not
    # the default 30 days, which would re-issue it on every run.
    first = _run(tmp_path, _short_lived(pki, 0.01))
    assert first.rc == 0, first.stderr
    cert = x509.load_pem_x509_certificate((pki / "short.crt").read_bytes())
    assert 1150 <= (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds() <= 1170
    assert first.task("short", "localhost")["sha256"] == cert.fingerprint(hashes.SHA256()).hex()
    again = _run(tmp_path, _short_lived(pki, 0.01))
    assert again.task("short", "localhost")["reason"] == "unchanged"
    assert again.host_stats("localhost")["changed"] == 0

    # 0.0005 days (43 s) of a 5.7 min lifetime: inside its last third as soon as it is issued.
    (pki / "short.crt").unlink()
    _run(tmp_path, _short_lived(pki, 0.0005))
    due = _run(tmp_path, _short_lived(pki, 0.0005))
    assert due.task("short", "localhost")["reason"] == "expires in 0 minutes"
    assert due.task("short", "localhost")["sha256"] != first.task("short", "localhost")["sha256"]
