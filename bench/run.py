"""``make bench``: the same plays through the kubenest agent and through OpenSSH at its best.

Baseline: OpenSSH on loopback with ControlMaster/ControlPersist and pipelining on. Each metric is the
median of several runs; ratios are agent/SSH. Results also go to bench/results/agent-vs-ssh.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from bench.record import record  # noqa: E402
from bench.sshd import LoopbackSSHD  # noqa: E402
from tests.support.agentproc import AgentProcess, free_port, shutdown_muxes  # noqa: E402

VENV_BIN = Path(sys.executable).parent
PYTHON = "/usr/bin/python3"


def write(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def play(tasks) -> list:
    return [{"hosts": "all", "gather_facts": False, "tasks": tasks}]


def timed_playbook(playbook: Path, inventory: Path, env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)],
                          capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
        raise RuntimeError(f"{playbook.name} via {inventory.name} failed:\n{tail}")
    return elapsed


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kubenest-bench-") as tmp:
        root = Path(tmp)
        agent = AgentProcess.with_fresh_pki(root / "agent").start()
        sshd = LoopbackSSHD(root / "ssh", free_port()).start()
        control = root / "control"
        env = {**os.environ, "ANSIBLE_HOST_KEY_CHECKING": "0", "ANSIBLE_NOCOLOR": "1",
               "ANSIBLE_SSH_CONTROL_PATH_DIR": str(root / "ssh"), "KUBENEST_AGENT_CONTROL_DIR": str(control),
               "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}
        common = {"ansible_python_interpreter": PYTHON, "ansible_pipelining": True,
                  "ansible_remote_tmp": str(root / "remote-tmp")}
        files = agent.client_files
        inventories = {
            "agent": write(root / "agent.yml", {"all": {"vars": {
                **common, "ansible_connection": "kosmos.kubenest.nodeagent", "ansible_port": agent.port,
                "kubenest_agent_ca_file": files["ca_file"], "kubenest_agent_cert_file": files["cert_file"],
                "kubenest_agent_key_file": files["key_file"]}, "hosts": {"node1": {"ansible_host": "127.0.0.1"}}}}),
            "ssh": write(root / "ssh.yml", {"all": {"vars": {
                **common, "ansible_connection": "ansible.builtin.ssh", "ansible_port": sshd.port,
                "ansible_user": "root",
                "ansible_ssh_common_args": " ".join(sshd.client_args()) +
                " -o ControlMaster=auto -o ControlPersist=120s"},
                "hosts": {"node1": {"ansible_host": "127.0.0.1"}}}}),
        }
        big = root / "big.bin"
        with open(big, "wb") as fh:
            for _chunk in range(args.size_mb):
                fh.write(os.urandom(1 << 20))
        remote = root / "remote"
        remote.mkdir()
        plays = {
            "empty": write(root / "empty.yml", play([])),
            "module": write(root / "module.yml", play(
                [{"name": f"t{i}", "ansible.builtin.command": "/bin/true", "changed_when": False}
                 for i in range(args.tasks)])),
            "raw": write(root / "raw.yml", play(
                [{"name": f"t{i}", "ansible.builtin.raw": "true", "changed_when": False} for i in range(args.tasks)])),
            "copy": write(root / "copy.yml", play([{"ansible.builtin.copy": {
                "src": str(big), "dest": str(remote / "big.bin"), "mode": "0644", "force": True}}])),
            "fetch": write(root / "fetch.yml", play([{"ansible.builtin.fetch": {
                "src": str(remote / "big.bin"), "dest": str(root / "fetched.bin"), "flat": True}}])),
        }
        results: dict[str, dict[str, list[float]]] = {t: {} for t in inventories}
        try:
            for inventory in inventories.values():
                timed_playbook(plays["empty"], inventory, env)  # warm: connection persisted
                timed_playbook(plays["raw"], inventory, env)
            for _run in range(args.runs):
                for transport, inventory in inventories.items():
                    r = results[transport]
                    base = timed_playbook(plays["empty"], inventory, env)
                    r.setdefault("empty_s", []).append(base)
                    r.setdefault("module_task_ms", []).append(
                        (timed_playbook(plays["module"], inventory, env) - base) / args.tasks * 1000)
                    r.setdefault("raw_task_ms", []).append(
                        (timed_playbook(plays["raw"], inventory, env) - base) / args.tasks * 1000)
                    (remote / "big.bin").unlink(missing_ok=True)
                    copy_s = timed_playbook(plays["copy"], inventory, env) - base
                    r.setdefault("copy_MBps", []).append(args.size_mb / copy_s)
                    if sha256(remote / "big.bin") != sha256(big):
                        raise RuntimeError(f"copy through {transport} corrupted the file")
                    (root / "fetched.bin").unlink(missing_ok=True)
                    fetch_s = timed_playbook(plays["fetch"], inventory, env) - base
                    r.setdefault("fetch_MBps", []).append(args.size_mb / fetch_s)
                    if sha256(root / "fetched.bin") != sha256(big):
                        raise RuntimeError(f"fetch through {transport} corrupted the file")
        finally:
            shutdown_muxes(control)
            sshd.stop()
            agent.stop()

    med = {t: {k: statistics.median(v) for k, v in m.items()} for t, m in results.items()}
    rows = [("latency per module task (command)", "module_task_ms", "ms", "<= 0.5", lambda r: r <= 0.5),
            ("latency per raw task", "raw_task_ms", "ms", "<= 0.5", lambda r: r <= 0.5),
            (f"copy {args.size_mb} MB throughput", "copy_MBps", "MB/s", ">= 1.0", lambda r: r >= 1.0),
            (f"fetch {args.size_mb} MB throughput", "fetch_MBps", "MB/s", ">= 1.0", lambda r: r >= 1.0)]
    print(f"\nkubenest agent vs OpenSSH (baseline: ssh, ControlPersist + pipelining), median of {args.runs} runs,"
          f" {args.tasks} tasks")
    print(f"{'metric':38} {'agent':>10} {'ssh':>10} {'agent/ssh':>10} {'target':>8}  met")
    summary = {}
    for label, key, unit, target, ok in rows:
        a, s = med["agent"][key], med["ssh"][key]
        ratio = a / s
        summary[key] = {"agent": a, "ssh": s, "ratio": ratio, "target": target, "met": ok(ratio)}
        print(f"{label:38} {a:8.1f}{unit[:2]:>2} {s:8.1f}{unit[:2]:>2} {ratio:10.2f} {target:>8}  "
              f"{'yes' if ok(ratio) else 'NO'}")
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "agent-vs-ssh.json").write_text(json.dumps({"median": summary, "runs": results}, indent=2))
    record("agent-vs-ssh", {"median": summary, "runs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
