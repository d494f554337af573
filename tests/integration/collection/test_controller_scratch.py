"""The controller-side actions for scratch files and in-memory certificates, through real ansible-playbook runs."""

import os
import stat

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from tests.support.playbook import run_playbook, write_play

SECRET = "client-key-data: c2VjcmV0LXZhbHVl\n"


def _run(tmp_path, tasks, *args):
    inventory = tmp_path / "inv.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    return run_playbook(write_play(tmp_path / "play.yml", tasks, hosts="localhost"), inventory,
                        tmp_path / "control", *args, extra_env={"TMPDIR": str(scratch)})


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_scratch_file_is_private_holds_its_content_and_goes(tmp_path):
    copy = tmp_path / "seen"
    tasks = [
        {"name": "file", "kosmos.kubenest.scratch_file": {"prefix": "kubenest-tenant-", "suffix": ".kubeconfig",
                                                          "content": SECRET},
         "register": "f", "no_log": True},
        {"name": "dir", "kosmos.kubenest.scratch_file": {"state": "directory"}, "register": "d"},
        {"name": "note", "ansible.builtin.copy": {"content": "{{ [f.path, d.path] | to_json }}", "dest": str(copy)}},
        {"name": "into the dir", "ansible.builtin.copy": {"content": "x", "dest": "{{ d.path }}/inner"}},
    ]
    made = _run(tmp_path, tasks)
    assert made.rc == 0, made.stderr
    file_path, dir_path = yaml.safe_load(copy.read_text())
    assert os.path.dirname(file_path) == str(tmp_path / "tmp")  # the controller's TMPDIR
    assert os.path.basename(file_path).startswith("kubenest-tenant-") and file_path.endswith(".kubeconfig")
    assert open(file_path).read() == SECRET
    assert _mode(file_path) == 0o600 and _mode(dir_path) == 0o700
    assert made.task("file", "localhost")["changed"] is False  # scratch space is no change
    assert "c2VjcmV0LXZhbHVl" not in made.stderr + yaml.safe_dump(made.data)

    removed = _run(tmp_path, [
        {"name": "rm file", "kosmos.kubenest.scratch_file": {"path": file_path, "state": "absent"}},
        {"name": "rm dir", "kosmos.kubenest.scratch_file": {"path": dir_path, "state": "absent"}},
        {"name": "rm again", "kosmos.kubenest.scratch_file": {"path": file_path, "state": "absent"}},
    ])
    assert removed.rc == 0, removed.stderr
    assert not os.path.exists(file_path) and not os.path.exists(dir_path)
    assert removed.task("rm file", "localhost")["changed"] and removed.task("rm dir", "localhost")["changed"]
    assert removed.task("rm again", "localhost")["changed"] is False


def test_scratch_file_refuses_a_name_part_with_a_separator_and_makes_nothing(tmp_path):
    result = _run(tmp_path, [{"name": "bad", "kosmos.kubenest.scratch_file": {"prefix": "../escape-"}}])
    assert result.rc != 0
    assert "prefix must not hold '/'" in result.task("bad", "localhost")["msg"]
    assert not list(tmp_path.rglob("*escape-*"))


def _ca(tmp_path):
    from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

    ca = pki.new_ca("agents-ca")
    (tmp_path / "ca.crt").write_bytes(pki.certificate_pem(ca.cert))
    (tmp_path / "ca.key").write_bytes(pki.private_key_pem(ca.key))
    return ca


def test_issue_certificate_returns_a_new_pair_signed_by_the_ca_and_writes_nothing(tmp_path):
    ca = _ca(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    issue = {"ca_path": str(tmp_path / "ca"), "common_name": "kn-w1", "dns_names": ["kn-w1"],
             "ip_addresses": ["198.18.0.12"], "usages": ["server"], "validity_days": 2}
    tasks = [
        {"name": "issue", "kosmos.kubenest.issue_certificate": issue, "register": "pair", "no_log": True},
        {"name": "again", "kosmos.kubenest.issue_certificate": issue, "register": "other", "no_log": True},
        {"name": "key", "ansible.builtin.copy": {"content": "{{ pair.private_key }}", "dest": str(out / "node.key"),
                                                 "mode": "0600"}, "no_log": True},
        {"name": "crt", "ansible.builtin.copy": {"content": "{{ pair.certificate }}", "dest": str(out / "node.crt")}},
        {"name": "facts", "ansible.builtin.copy": {
            "content": "{{ {'sha256': pair.sha256, 'other': other.sha256} | to_json }}", "dest": str(out / "f")}},
    ]
    result = _run(tmp_path, tasks, "--check")  # issuing writes nothing, so check mode issues too
    assert result.rc == 0, result.stderr
    assert list(out.iterdir()) == []
    result = _run(tmp_path, tasks)
    assert result.rc == 0, result.stderr
    assert result.task("issue", "localhost")["changed"] is False
    cert = x509.load_pem_x509_certificate((out / "node.crt").read_bytes())
    key = serialization.load_pem_private_key((out / "node.key").read_bytes(), None)
    facts = yaml.safe_load((out / "f").read_text())
    assert facts["sha256"] == cert.fingerprint(hashes.SHA256()).hex()
    assert facts["other"] != facts["sha256"]  # every call is a new pair
    cert.verify_directly_issued_by(ca.cert)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["kn-w1"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["198.18.0.12"]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [x509.ExtendedKeyUsageOID.SERVER_AUTH]
    assert 2 * 86400 <= (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds() <= 2 * 86400 + 600
    key_text = (out / "node.key").read_text().splitlines()[1]
    assert key_text not in result.stderr + yaml.safe_dump(result.data)


def test_issue_certificate_errors_name_the_problem(tmp_path):
    _ca(tmp_path)
    result = _run(tmp_path, [
        {"name": "no ca", "kosmos.kubenest.issue_certificate": {"ca_path": str(tmp_path / "missing"),
                                                                "common_name": "x"}, "ignore_errors": True},
        {"name": "bad ip", "kosmos.kubenest.issue_certificate": {"ca_path": str(tmp_path / "ca"), "common_name": "x",
                                                                 "ip_addresses": ["300.1.1.1"]},
         "ignore_errors": True},
        {"name": "no usage", "kosmos.kubenest.issue_certificate": {"ca_path": str(tmp_path / "ca"),
                                                                   "common_name": "x", "usages": []},
         "ignore_errors": True},
    ])
    assert "cannot load the CA pair" in result.task("no ca", "localhost")["msg"]
    assert "'300.1.1.1' is not an IP address" in result.task("bad ip", "localhost")["msg"]
    assert "needs at least one of server, client" in result.task("no usage", "localhost")["msg"]
