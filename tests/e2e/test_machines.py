"""Node machines end to end: `make nodes` boots them, Ansible reaches each through the agent, containerd runs
inside, a second `make nodes` changes nothing and `make nodes-down` leaves nothing behind.

The machines get their own state dir, bridge, range and names, so a developer's sandbox (.sandbox, knbr0, kn-*)
keeps running meanwhile. Select with `-m machines`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from sandbox.machines import cgroups, mounts, processes
from sandbox.machines.config import REPO_ROOT, from_env
from tests.support.awx import MACHINE, AwxJob, job_template
from tests.support.playbook import run_playbook, write_play

BRIDGE = "kntest0"
CIDR = "198.18.1.0/24"  # RFC 2544 range, next to the default sandbox's 198.18.0.0/24
PREFIX = "kt"
MAKE_TIMEOUT = 900  # a cold cache builds the base rootfs first (debootstrap, minutes)

pytestmark = [
    pytest.mark.machines,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="node machines need root"),
    pytest.mark.skipif(not (shutil.which("systemd-nspawn") and shutil.which("debootstrap")),
                       reason="needs systemd-nspawn (systemd-container) and debootstrap"),
]

timings: dict[str, str] = {}


def _make(target: str, env: dict, timeout: float = MAKE_TIMEOUT) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run(["make", "--no-print-directory", "-C", str(REPO_ROOT), target], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    return proc, time.monotonic() - started


def _make_ok(target: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    proc = _make(target, env, timeout)[0]
    assert proc.returncode == 0, f"make {target} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def sandbox_env(tmp_path_factory):
    state = tmp_path_factory.mktemp("nodes") / "state"
    env = {**os.environ, "KUBENEST_SANDBOX_DIR": str(state), "KUBENEST_BRIDGE": BRIDGE,
           "KUBENEST_NODE_CIDR": CIDR, "KUBENEST_NODE_PREFIX": PREFIX, "KUBENEST_CONTROL_PLANES": "1",
           "KUBENEST_WORKERS": "3"}
    yield env
    _make("nodes-down", env, timeout=300)  # whatever happened above


@pytest.fixture(scope="module")
def machines(sandbox_env):
    proc, seconds = _make("nodes", sandbox_env)
    assert proc.returncode == 0, f"make nodes failed:\n{proc.stdout}\n{proc.stderr}"
    timings["first make nodes"] = f"{seconds:.1f}s"
    sb = from_env(state_dir=sandbox_env["KUBENEST_SANDBOX_DIR"], bridge=BRIDGE, cidr=CIDR, prefix=PREFIX)
    return sb


def _status(sandbox_env) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "sandbox.machines", "status", "--json"], env=sandbox_env,
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out)


def _in_machine(sandbox_env, name: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sandbox.machines", "run", name, "--", *argv], env=sandbox_env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def test_inventory_lists_every_machine(machines):
    inv = yaml.safe_load(machines.inventory_path.read_text())
    groups = inv["all"]["children"]
    assert sorted(groups["control_plane"]["hosts"]) == ["kt-cp1"]
    assert sorted(groups["workers"]["hosts"]) == ["kt-w1", "kt-w2", "kt-w3"]
    for group in groups.values():
        for host in group["hosts"].values():
            assert host["ansible_connection"] == "kosmos.kubenest.nodeagent"
            assert host["ansible_host"].startswith("198.18.1.")
            for key in ("ca_file", "cert_file", "key_file"):
                assert Path(host[f"kubenest_agent_{key}"]).is_file()


def test_machines_run_systemd_and_the_agent(machines, sandbox_env):
    rows = _status(sandbox_env)
    assert [(r["name"], r["running"], r["systemd"], r["agent"]) for r in rows] == [
        (n, True, "running", "ok") for n in ("kt-cp1", "kt-w1", "kt-w2", "kt-w3")]
    usage = sum(r["memory_mib"] for r in rows)
    rss = sum(r["processes_rss_mib"] for r in rows)
    timings["memory of 4 idle machines"] = (f"{usage:.0f} MiB cgroup usage (incl. page cache), "
                                            f"{sum(r['memory_rss_mib'] for r in rows):.0f} MiB cgroup rss, "
                                            f"{rss:.0f} MiB summed process RSS")


def test_playbook_reaches_every_node_through_the_agent(machines, tmp_path):
    tasks = [
        {"name": "ping", "ansible.builtin.ping": {}},
        {"name": "hostname", "ansible.builtin.command": "hostname", "changed_when": False},
        {"name": "copy", "ansible.builtin.copy": {"content": "{{ inventory_hostname }}\n",
                                                  "dest": "/var/tmp/kubenest-e2e-copy.txt", "mode": "0644"}},
        {"name": "read back", "ansible.builtin.command": "cat /var/tmp/kubenest-e2e-copy.txt", "changed_when": False},
        {"name": "see the others", "ansible.builtin.command": "ping -c1 -W2 {{ item }}", "changed_when": False,
         "loop": "{{ groups['all'] | difference([inventory_hostname]) }}"},
        {"name": "no way out", "ansible.builtin.command": "ip route show default", "changed_when": False},
    ]
    play = write_play(tmp_path / "play.yml", tasks)
    result = run_playbook(play, machines.inventory_path, tmp_path / "cp", timeout=300)
    assert result.rc == 0, result.stderr
    for node in machines.nodes:
        stats = result.host_stats(node.name)
        assert stats["failures"] == 0 and stats["unreachable"] == 0, stats
        assert result.task("ping", node.name)["ping"] == "pong"
        assert result.task("hostname", node.name)["stdout"] == node.name
        assert result.task("read back", node.name)["stdout"] == node.name
        seen = [r["item"] for r in result.task("see the others", node.name)["results"] if r["rc"] == 0]
        assert sorted(seen) == sorted(n.name for n in machines.nodes if n != node)
        assert result.task("no way out", node.name)["stdout"] == ""


def test_containerd_runs_as_a_unit_in_a_machine(machines, sandbox_env):
    proc = _in_machine(sandbox_env, "kt-w1", "systemctl", "start", "containerd.service")
    assert proc.returncode == 0, proc.stderr
    proc = _in_machine(sandbox_env, "kt-w1", "ctr", "version")
    assert proc.returncode == 0, proc.stderr
    assert "Server:" in proc.stdout and "Revision:" in proc.stdout.split("Server:")[1]
    # the remount unit made the machine's own cgroup controllers writable (nested containers need that)
    proc = _in_machine(sandbox_env, "kt-w1", "findmnt", "-n", "-t", "cgroup", "-o", "OPTIONS")
    assert proc.stdout.split() and all(opts.startswith("rw") for opts in proc.stdout.split())


def test_containerd_runs_a_container_in_a_machine(machines, sandbox_env):
    archives = sorted((Path(sandbox_env.get("KUBENEST_CACHE") or Path.home() / ".cache/kubenest")
                       / "images").glob("*/pause.oci.tar"))
    if not archives:
        pytest.skip("no pause image archive (make images)")
    root = machines.machine_dir("kt-w2") / "rootfs"
    shutil.copy(archives[-1], root / "var/tmp/pause.oci.tar")
    script = ("set -e; systemctl start containerd; ctr -n e2e images import /var/tmp/pause.oci.tar >/dev/null;"
              " ref=$(ctr -n e2e images ls -q | head -1); ctr -n e2e run -d \"$ref\" p1; sleep 1;"
              " ctr -n e2e task ls; ctr -n e2e task kill -s KILL p1; sleep 1; ctr -n e2e task rm p1;"
              " ctr -n e2e containers rm p1")
    proc = _in_machine(sandbox_env, "kt-w2", "sh", "-c", script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RUNNING" in proc.stdout


def test_a_stale_agent_is_updated_in_place(machines, sandbox_env):
    state_file = machines.machine_dir("kt-w1") / "machine.json"
    state = json.loads(state_file.read_text())
    pid_before = int((machines.machine_dir("kt-w1") / "nspawn.pid").read_text())
    state_file.write_text(json.dumps({**state, "image_key": "stale"}))
    proc = _make_ok("nodes", sandbox_env, timeout=300)
    assert "updated the agent on kt-w1" in proc.stderr
    assert json.loads(state_file.read_text())["image_key"] == state["image_key"]
    assert int((machines.machine_dir("kt-w1") / "nspawn.pid").read_text()) == pid_before  # not rebooted


def test_a_killed_machine_is_booted_again(machines, sandbox_env):
    pid = int((machines.machine_dir("kt-w3") / "nspawn.pid").read_text())
    os.kill(pid, signal.SIGKILL)  # what the end of a session does to background processes
    processes.wait_gone([pid], 10)
    proc = _make_ok("nodes", sandbox_env, timeout=300)
    assert "booted kt-w3" in proc.stderr
    assert [r["agent"] for r in _status(sandbox_env)] == ["ok"] * 4


def _changed(result, host: str) -> list[str]:
    stats = result.host_stats(host)
    failed = [(t["task"]["name"], t["hosts"][host].get("msg") or t["hosts"][host].get("stderr"))
              for play in result.data["plays"] for t in play["tasks"]
              if t["hosts"].get(host, {}).get("failed") or t["hosts"].get(host, {}).get("unreachable")]
    assert stats["failures"] == 0 and stats["unreachable"] == 0, (failed, result.stderr[-3000:])
    changed = [t["task"]["name"] for play in result.data["plays"] for t in play["tasks"]
               if t["hosts"].get(host, {}).get("changed")]
    assert stats["changed"] == 0 or changed, stats
    return changed


def test_install_agent_over_ssh_on_a_machine_without_it_then_remove_it(machines, tmp_path):
    """playbooks/install_agent.yml over plain SSH onto a machine that has sshd and no agent: an ad-hoc command
    then runs through the agent connection, a second run changes nothing, and remove_agent.yml leaves nothing."""
    from sandbox.machines import bare, image, pki
    from sandbox.machines.cli import hosts_file

    ssh_key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh_key)], check=True)
    name, ip = f"{PREFIX}-b1", str(list(machines.network.hosts())[-5])
    machine = bare.up(machines, name, ip, ssh_key.with_suffix(".pub").read_text(), hosts_file(machines))
    agent_paths = ["/opt/kubenest-agent", "/etc/kubenest-agent", "/var/lib/kubenest-agent", "/var/cache/kubenest-agent",
                   "/usr/local/bin/kubenest-agent", "/etc/systemd/system/kubenest-agent.service"]

    def present() -> list[str]:
        return [p for p in agent_paths if machine.nsenter(["test", "-e", p], check=False).returncode == 0]
    jobs: list[Path] = []  # the AWX jobs' directories
    try:
        assert present() == []
        ssh_inventory = tmp_path / "ssh.yml"
        ssh_inventory.write_text(yaml.safe_dump({"all": {"hosts": {name: {
            "ansible_host": ip, "ansible_user": "root", "ansible_connection": "ssh",
            "ansible_ssh_private_key_file": str(ssh_key), "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"}}}}))
        client = pki.client_files(machines)
        wheelhouse = image.ensure_image(machines)[1]
        args = ["-e", json.dumps({"kubenest_agent_wheelhouse": str(wheelhouse),
                                  "kubenest_agent_ca_path": str(machines.pki_dir / "ca"),
                                  "kubenest_agent_ca_file": client["ca"], "kubenest_agent_cert_file": client["cert"],
                                  "kubenest_agent_key_file": client["key"]})]
        install = REPO_ROOT / "playbooks/install_agent.yml"
        first = run_playbook(install, ssh_inventory, tmp_path / "cp", *args, timeout=600)
        assert _changed(first, name)
        second = run_playbook(install, ssh_inventory, tmp_path / "cp", *args, timeout=600)
        assert _changed(second, name) == []

        agent_inventory = tmp_path / "agent.yml"
        agent_inventory.write_text(yaml.safe_dump({"all": {"hosts": {name: {
            "ansible_host": ip, "ansible_connection": "kosmos.kubenest.nodeagent",
            "ansible_python_interpreter": "/usr/bin/python3", "kubenest_agent_ca_file": client["ca"],
            "kubenest_agent_cert_file": client["cert"], "kubenest_agent_key_file": client["key"]}}}}))
        adhoc = subprocess.run([str(Path(sys.executable).parent / "ansible"), "-i", str(agent_inventory), name,
                                "-m", "ansible.builtin.command", "-a", "cat /etc/hostname"],
                               capture_output=True, text=True, timeout=120, check=False,
                               env={**os.environ, "KUBENEST_AGENT_CONTROL_DIR": str(tmp_path / "cp"),
                                    "ANSIBLE_NOCOLOR": "1"})
        assert adhoc.returncode == 0 and f"{name} | CHANGED | rc=0 >>\n{name}" in adhoc.stdout, adhoc.stdout

        remove = REPO_ROOT / "playbooks/remove_agent.yml"
        assert _changed(run_playbook(remove, ssh_inventory, tmp_path / "cp", timeout=300), name)

        def removed():
            assert present() == []
            units = machine.nsenter(["systemctl", "list-units", "--all", "--plain", "--no-legend", "kubenest-agent*"])
            assert units.stdout.strip() == ""
            assert machine.nsenter(["ss", "-Hltn", "sport = :7443"]).stdout.strip() == ""

        removed()

        # The same through the AWX job templates, run as AWX runs them (tests/support/awx.py): the machines'
        # inventory and their Machine credential chosen at launch, the CA pair from its credential type.
        ssh_vars = {k: v for k, v in yaml.safe_load(ssh_inventory.read_text())["all"]["hosts"][name].items()
                    if k not in ("ansible_user", "ansible_ssh_private_key_file")}
        awx_inventory = {"_meta": {"hostvars": {name: ssh_vars}}, "all": {"children": ["ungrouped"]},
                         "ungrouped": {"hosts": [name]}}
        credentials = {
            MACHINE: {"username": "root", "ssh_key_data": ssh_key.read_text()},
            "kosmos.kubenest node agent CA": {"ca_cert": (machines.pki_dir / "ca.crt").read_text(),
                                              "ca_key": (machines.pki_dir / "ca.key").read_text()},
            "kosmos.kubenest node agent client": {"ca_cert": Path(client["ca"]).read_text(),
                                                  "client_cert": Path(client["cert"]).read_text(),
                                                  "client_key": Path(client["key"]).read_text()}}

        def launch(template: str, answers: dict, workdir: str) -> tuple[list[str], list[str]]:
            """(the tasks that ran on the machine, those of them that changed it)"""
            needed = job_template(template)["credential_types"]
            # A short directory: the agent connection's control socket lives under it (AF_UNIX paths are short).
            job = AwxJob(Path(tempfile.mkdtemp(prefix=f"{workdir}-")), template, answers,
                         {k: credentials[k] for k in needed}, inventory=awx_inventory)
            jobs.append(job.workdir)
            result = job.run(timeout=600)
            assert result.status == "successful", result.stdout[-3000:]
            ran = [e["event_data"] for e in result.events()
                   if e.get("event") == "runner_on_ok" and e["event_data"].get("host") == name]
            return [d.get("task") for d in ran], [d.get("task") for d in ran if d.get("res", {}).get("changed")]

        ran, changed = launch("kosmos.kubenest install the node agent",
                              {"kubenest_agent_hosts": name, "kubenest_agent_wheelhouse": str(wheelhouse)},
                              "awx-install")
        assert changed and present(), changed
        # The client credential's pair reaches the connection: the install ends by connecting through the agent.
        assert "Check that the agent answers with its new certificate" in ran, ran
        # What the template installed is what the playbook would: a plain run after it changes nothing.
        assert _changed(run_playbook(install, ssh_inventory, tmp_path / "cp", *args, timeout=600), name) == []
        assert launch("kosmos.kubenest remove the node agent", {"kubenest_agent_hosts": name}, "awx-remove")[1]
        removed()
        assert _changed(run_playbook(remove, ssh_inventory, tmp_path / "cp", timeout=300), name) == []
    finally:
        machine.destroy()
        for workdir in jobs:
            shutil.rmtree(workdir, ignore_errors=True)


def test_fewer_and_more_workers(machines, sandbox_env):
    _make_ok("nodes", {**sandbox_env, "KUBENEST_WORKERS": "2"}, timeout=300)
    assert [r["name"] for r in _status(sandbox_env)] == ["kt-cp1", "kt-w1", "kt-w2"]
    assert "kt-w3" not in machines.inventory_path.read_text()
    assert "kt-w3" not in (machines.machine_dir("kt-cp1") / "rootfs/etc/hosts").read_text()
    assert not any("vb-kt-w3" in line for line in _links())
    proc = _make_ok("nodes", sandbox_env, timeout=300)
    assert "booted kt-w3" in proc.stderr
    assert [r["agent"] for r in _status(sandbox_env)] == ["ok"] * 4
    assert "198.18.1.14\tkt-w3" in (machines.machine_dir("kt-cp1") / "rootfs/etc/hosts").read_text()


def _links() -> list[str]:
    return subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout.splitlines()


def _snapshot(sb) -> dict:
    leaders = {}
    for node in sb.nodes:
        pid = int((sb.machine_dir(node.name) / "nspawn.pid").read_text())
        leaders[node.name] = (pid, processes.children(pid))
    inv = sb.inventory_path
    return {"pids": leaders, "inventory": (inv.read_text(), inv.stat().st_mtime_ns),
            "bridge": Path(f"/sys/class/net/{BRIDGE}/ifindex").read_text()}


def test_make_nodes_twice_changes_nothing(machines, sandbox_env):
    before = _snapshot(machines)
    proc, seconds = _make("nodes", sandbox_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    timings["second make nodes"] = f"{seconds:.1f}s"
    assert "all machines were running" in proc.stderr
    assert _snapshot(machines) == before
    assert all(r["agent"] == "ok" for r in _status(sandbox_env))


def test_nodes_down_leaves_nothing(machines, sandbox_env):
    state = machines.state_dir
    proc, seconds = _make("nodes-down", sandbox_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    timings["make nodes-down"] = f"{seconds:.1f}s"
    # (the connection plugin's idle helpers on the controller side end by themselves; they are not machines)
    marker = str(machines.machines_dir)
    leftovers = [p for p in processes.all_pids() if any(marker in a for a in processes.cmdline(p))]
    assert leftovers == []
    assert [line for line in _links() if BRIDGE in line or f"vb-{PREFIX}-" in line] == []
    assert mounts.under(state.parent) == []
    assert cgroups.find_groups(machines.cgroup_group) == []
    assert not state.exists() or list(state.iterdir()) == []
    # and a second teardown is a no-op
    _make_ok("nodes-down", sandbox_env, timeout=120)
