"""Real ansible-playbook plays through kosmos.kubenest.nodeagent against a real agent."""

import hashlib
import os

import pytest

from tests.support.agentproc import AgentProcess, free_port, shutdown_muxes
from tests.support.playbook import run_playbook, write_inventory, write_play


@pytest.fixture
def env(tmp_path):
    agent = AgentProcess.with_fresh_pki(tmp_path / "node").start()
    control = tmp_path / "control"
    yield agent, write_inventory(tmp_path / "inventory.yml", agent), control
    shutdown_muxes(control)
    agent.stop()


def _sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def test_modules_and_unicode_through_the_agent(env, tmp_path):
    agent, inventory, control = env
    work = tmp_path / "remote-ü"
    tpl = tmp_path / "tmpl-ß.j2"
    tpl.write_text("Grüße {{ who }} — ✓\n")
    d = str(work)
    tasks = [
        {"name": "mkdir", "ansible.builtin.file": {"path": d, "state": "directory", "mode": "0755"}},
        {"name": "raw", "ansible.builtin.raw": "echo 'räw ✓'", "register": "raw_out", "changed_when": False},
        {"name": "command", "ansible.builtin.command": "echo 'κόσμε'", "register": "cmd_out",
         "changed_when": False},
        {"name": "copy", "ansible.builtin.copy": {"content": "inhalt ünïcødé\n", "dest": f"{d}/dätei-名前.txt",
                                                  "mode": "0644"}},
        {"name": "template", "ansible.builtin.template": {"src": str(tpl), "dest": f"{d}/tmpl-ß.txt",
                                                          "mode": "0600"}, "vars": {"who": "Wörld"}},
        {"name": "lineinfile", "ansible.builtin.lineinfile": {"path": f"{d}/dätei-名前.txt", "line": "zweite ✓"}},
        {"name": "stat", "ansible.builtin.stat": {"path": f"{d}/tmpl-ß.txt"}, "register": "st"},
        {"name": "slurp", "ansible.builtin.slurp": {"src": f"{d}/dätei-名前.txt"}, "register": "sl"},
        {"name": "fetch", "ansible.builtin.fetch": {"src": f"{d}/tmpl-ß.txt", "dest": f"{tmp_path}/fetched-ü/",
                                                    "flat": True}},
        {"name": "become", "ansible.builtin.command": "id -u", "become": True, "register": "who",
         "changed_when": False},
    ]
    result = run_playbook(write_play(tmp_path / "play.yml", tasks), inventory, control)
    assert result.rc == 0, result.stderr
    assert result.task("raw")["stdout"].strip() == "räw ✓"
    assert result.task("command")["stdout"] == "κόσμε"
    assert (work / "dätei-名前.txt").read_text() == "inhalt ünïcødé\nzweite ✓\n"
    assert (work / "tmpl-ß.txt").read_text() == "Grüße Wörld — ✓\n"
    assert result.task("stat")["stat"]["mode"] == "0600"
    import base64
    assert base64.b64decode(result.task("slurp")["content"]).decode() == "inhalt ünïcødé\nzweite ✓\n"
    assert (tmp_path / "fetched-ü" / "tmpl-ß.txt").read_text() == "Grüße Wörld — ✓\n"
    assert result.task("become")["stdout"] == "0"
    # the whole play used one websocket
    assert [e["event"] for e in agent.audit_events()].count("connect") == 2  # startup probe + the play


def test_second_run_changes_nothing(env, tmp_path):
    _agent, inventory, control = env
    tasks = [{"name": "copy", "ansible.builtin.copy": {"content": "x\n", "dest": f"{tmp_path}/idem",
                                                       "mode": "0644"}}]
    play = write_play(tmp_path / "play.yml", tasks)
    assert run_playbook(play, inventory, control).host_stats()["changed"] == 1
    assert run_playbook(play, inventory, control).host_stats()["changed"] == 0


def test_failing_command_is_failed_with_its_real_output(env, tmp_path):
    _agent, inventory, control = env
    tasks = [{"name": "fails", "ansible.builtin.shell": "echo to-out; echo to-err >&2; exit 42"}]
    result = run_playbook(write_play(tmp_path / "play.yml", tasks), inventory, control)
    task = result.task("fails")
    assert result.rc == 2 and result.host_stats()["failures"] == 1
    assert (task["rc"], task["stdout"], task["stderr"]) == (42, "to-out", "to-err")


def test_large_file_both_ways(env, tmp_path):
    _agent, inventory, control = env
    big = tmp_path / "big.bin"
    with open(big, "wb") as fh:
        for _i in range(200):
            fh.write(os.urandom(1 << 20))
    remote = tmp_path / "remote" / "big-copy.bin"
    remote.parent.mkdir()
    tasks = [{"name": "copy", "ansible.builtin.copy": {"src": str(big), "dest": str(remote), "mode": "0644"}},
             {"name": "fetch", "ansible.builtin.fetch": {"src": str(remote), "dest": f"{tmp_path}/back.bin",
                                                         "flat": True}}]
    result = run_playbook(write_play(tmp_path / "play.yml", tasks), inventory, control)
    assert result.rc == 0, result.stderr
    assert _sha(big) == _sha(remote) == _sha(tmp_path / "back.bin")


def test_agent_restarted_between_tasks_reconnects(env, tmp_path):
    agent, inventory, control = env
    restart = tmp_path / "restart.py"
    restart.write_text(
        "import os, signal, sys, time\n"
        f"os.kill({agent.proc.pid}, signal.SIGKILL)\n")
    tasks = [{"name": "before", "ansible.builtin.command": "echo before", "changed_when": False},
             {"name": "kill agent", "ansible.builtin.command": f"python3 {restart}", "delegate_to": "localhost",
              "connection": "local", "changed_when": False},
             {"name": "wait", "ansible.builtin.wait_for": {"path": str(tmp_path / "restarted"), "timeout": 30},
              "delegate_to": "localhost", "connection": "local"},
             {"name": "after", "ansible.builtin.command": "echo after", "changed_when": False}]
    import threading
    import time

    def restart_agent():
        agent.proc.wait(60)
        time.sleep(0.5)
        agent.start()
        (tmp_path / "restarted").touch()

    watcher = threading.Thread(target=restart_agent)
    watcher.start()
    result = run_playbook(write_play(tmp_path / "play.yml", tasks), inventory, control)
    watcher.join(60)
    assert result.rc == 0, result.stderr
    assert result.task("after")["stdout"] == "after"


def test_unreachable_agent_names_the_cause(env, tmp_path):
    agent, _inventory, control = env
    inventory = write_inventory(tmp_path / "down.yml", agent, ansible_port=free_port())
    result = run_playbook(write_play(tmp_path / "play.yml", [{"name": "t", "ansible.builtin.ping": {}}]),
                          inventory, control)
    assert result.host_stats()["unreachable"] == 1
    assert "refused" in result.task("t")["msg"]


def test_wrong_ca_is_unreachable_with_tls_reason(env, tmp_path):
    agent, _inventory, control = env
    from kubenest_agent.devpki import ensure_dev_pki

    other = ensure_dev_pki(tmp_path / "other", "x")
    inventory = write_inventory(tmp_path / "wrongca.yml", agent, kubenest_agent_ca_file=other["ca"])
    result = run_playbook(write_play(tmp_path / "play.yml", [{"name": "t", "ansible.builtin.ping": {}}]),
                          inventory, control)
    assert result.host_stats()["unreachable"] == 1
    assert "not trusted" in result.task("t")["msg"]


def test_client_cert_from_other_ca_is_unreachable(env, tmp_path):
    agent, _inventory, control = env
    from kubenest_agent.devpki import ensure_dev_pki

    other = ensure_dev_pki(tmp_path / "other", "x")
    inventory = write_inventory(tmp_path / "wrongcert.yml", agent, kubenest_agent_cert_file=other["client_cert"],
                                kubenest_agent_key_file=other["client_key"])
    result = run_playbook(write_play(tmp_path / "play.yml", [{"name": "t", "ansible.builtin.ping": {}}]),
                          inventory, control)
    assert result.host_stats()["unreachable"] == 1
    assert "did not accept our client certificate" in result.task("t")["msg"]


def test_killed_agent_mid_copy_fails_without_partial_file(env, tmp_path):
    agent, _inventory, control = env
    inventory = write_inventory(tmp_path / "inv.yml", agent, ansible_remote_tmp=str(tmp_path / "remote-tmp"))
    big = tmp_path / "big.bin"
    with open(big, "wb") as fh:
        fh.truncate(512 << 20)  # sparse 512 MiB: long enough to kill the agent mid-transfer
    dest = tmp_path / "remote-dest.bin"
    import threading
    import time

    def kill_when_uploading():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(p.name.endswith(".kubenest-part") for p in (tmp_path.rglob("*") if tmp_path.exists() else [])
                   if p.stat().st_size > 10 << 20):
                agent.kill()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_uploading)
    killer.start()
    tasks = [{"name": "copy", "ansible.builtin.copy": {"src": str(big), "dest": str(dest), "mode": "0644"}}]
    result = run_playbook(write_play(tmp_path / "play.yml", tasks), inventory, control)
    killer.join(70)
    assert agent.proc.poll() is not None, "the agent was never seen mid-transfer"
    stats = result.host_stats()
    assert stats["unreachable"] + stats["failures"] == 1
    assert not dest.exists()
    agent.start()
    leftovers = [p for p in tmp_path.rglob("*.kubenest-part") if "control" not in p.parts]
    assert not leftovers


def test_node_files_read_returns_several_files_in_one_run_through_the_agent(env, tmp_path):
    agent, inventory, control = env
    import base64

    (tmp_path / "kubelet.conf").write_text("apiVersion: v1\nkind: Config\n")
    (tmp_path / "ca.crt").write_bytes(b"\x00\x01binary\xff")
    paths = [str(tmp_path / "kubelet.conf"), str(tmp_path / "no-such-file"), str(tmp_path / "ca.crt")]
    tasks = [
        {"name": "read", "kosmos.kubenest.node_files_read": {"paths": paths}, "register": "read"},
        {"name": "a directory", "kosmos.kubenest.node_files_read": {"paths": [str(tmp_path)]},
         "ignore_errors": True},
    ]
    result = run_playbook(write_play(tmp_path / "play.yml", tasks), inventory, control)
    assert result.rc == 0, result.stderr
    read = result.task("read")
    assert read["changed"] is False
    assert {p: base64.b64decode(c) for p, c in read["contents"].items()} == {
        paths[0]: b"apiVersion: v1\nkind: Config\n", paths[2]: b"\x00\x01binary\xff"}
    assert read["missing"] == [paths[1]]
    refused = result.task("a directory")
    assert refused["failed"] and refused["msg"] == f"{tmp_path} is not a regular file"
