"""Run real ansible-playbook through the nodeagent connection and read per-task results as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

VENV_BIN = Path(sys.executable).parent


@dataclass
class PlayResult:
    rc: int
    data: dict
    stderr: str

    def host_stats(self, host: str = "node1") -> dict:
        return self.data["stats"][host]

    def task(self, name: str, host: str = "node1") -> dict:
        for play in self.data["plays"]:
            for task in play["tasks"]:
                if task["task"]["name"] == name:
                    return task["hosts"][host]
        raise KeyError(f"no task named {name!r} in the play output")


def write_inventory(path: Path, agent, host: str = "node1", **extra_vars) -> Path:
    files = agent.client_files
    host_vars = {"ansible_host": "127.0.0.1", "ansible_port": agent.port, **extra_vars}
    inventory = {"all": {"vars": {"ansible_connection": "kosmos.kubenest.nodeagent",
                                  "kubenest_agent_ca_file": files["ca_file"],
                                  "kubenest_agent_cert_file": files["cert_file"],
                                  "kubenest_agent_key_file": files["key_file"],
                                  "ansible_python_interpreter": "/usr/bin/python3"},
                         "hosts": {host: host_vars}}}
    path.write_text(yaml.safe_dump(inventory))
    return path


def run_playbook(playbook: Path, inventory: Path, control_dir: Path, *args, timeout: float = 600,
                 extra_env: dict | None = None) -> PlayResult:
    env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_HOST_KEY_CHECKING": "0", "ANSIBLE_RETRY_FILES_ENABLED": "0",
           "KUBENEST_AGENT_CONTROL_DIR": str(control_dir), "KUBENEST_AGENT_PERSIST_SECONDS": "20",
           "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", **(extra_env or {})}
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(playbook), *args],
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        output = f"{proc.stdout}\n{proc.stderr}"
        raise AssertionError(f"ansible-playbook printed no JSON (rc={proc.returncode}):\n{output}") from None
    return PlayResult(proc.returncode, data, proc.stderr)


def write_play(path: Path, tasks: list, hosts: str = "all", **play) -> Path:
    path.write_text(yaml.safe_dump([{"name": "test", "hosts": hosts, "gather_facts": False, **play,
                                     "tasks": tasks}], allow_unicode=True, sort_keys=False))
    return path


def run_module(module: str, kubeconfig: Path, /, check: bool = False, diff: bool = False,
               extra_env: dict | None = None, **args) -> tuple[int, dict, str]:
    """One ad-hoc run of the collection module `module` on localhost: (rc, its result, ansible's stdout)."""
    env = {**os.environ, "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
           "ANSIBLE_NOCOLOR": "1", **(extra_env or {})}
    argv = [str(VENV_BIN / "ansible"), "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
            "-m", f"kosmos.kubenest.{module}", "-a", json.dumps({"kubeconfig": str(kubeconfig), **args})]
    argv += ["--check"] * check + ["--diff"] * diff
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    data = json.loads(proc.stdout[proc.stdout.index("{"):])
    return proc.returncode, data["plays"][0]["tasks"][0]["hosts"]["localhost"], proc.stdout
