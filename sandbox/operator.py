"""python -m sandbox.operator {deploy,start,stop,status}: the sandbox cluster's operator.

`deploy` (what `make up` does) runs it in the host cluster from its image (sandbox/operator_in_cluster.py);
`start` runs `kubenest-operator --kubeconfig <state dir>/kubeconfig` as a local process instead, with its pid and
log in the state dir, the way a developer runs it. `stop` pauses whichever runs (the in-cluster one is scaled to
zero) and `start` brings it back the same way; `status` exits 0 while one runs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from sandbox.machines.config import NETWORK_VARS, RETURN_VARS, from_env
from sandbox.machines.pki import client_files


def _paths():
    sb = from_env()
    return sb.state_dir / "operator.pid", sb.state_dir / "operator.log", sb.state_dir / "kubeconfig"


def _mode_file() -> Path:
    return from_env().state_dir / "operator.mode"


def _mode() -> dict:
    try:
        return json.loads(_mode_file().read_text())
    except (FileNotFoundError, ValueError):
        return {"mode": "local"}


def deploy() -> int:
    from sandbox import operator_in_cluster

    stop_local()
    rc = operator_in_cluster.deploy(from_env())
    if rc == 0:
        _mode_file().write_text(json.dumps({"mode": "in-cluster", "replicas": 2}))
    return rc


def write_site_vars(state_dir: Path) -> Path:
    """What the operator's runs need to reach the machines: the agent's client credentials and the images."""
    sb = from_env()
    files = client_files(sb)
    site = {"kubenest_agent_ca_file": files["ca"], "kubenest_agent_cert_file": files["cert"],
            "kubenest_agent_key_file": files["key"],
            # The agents' CA: nodes coming back from a virtual cluster get a new agent certificate from it.
            "kubenest_agent_ca_path": str(sb.pki_dir / "ca"),
            **NETWORK_VARS, **RETURN_VARS}
    group_vars = state_dir / "group_vars" / "all.yml"
    if group_vars.is_file():
        images_dir = (yaml.safe_load(group_vars.read_text()) or {}).get("kubenest_images_dir")
        if images_dir:
            site["kubenest_images_dir"] = images_dir
    path = state_dir / "operator-vars.yml"
    path.write_text(yaml.safe_dump(site))
    return path


def _running(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None


def start() -> int:
    mode = _mode()
    if mode["mode"] == "in-cluster":
        from sandbox import operator_in_cluster

        operator_in_cluster.scale(from_env(), mode.get("replicas", 2))
        print(f"operator running in the host cluster ({operator_in_cluster.NAMESPACE})")
        return 0
    pid_file, log_file, kubeconfig = _paths()
    if _running(pid_file):
        print(f"operator already running (pid {pid_file.read_text().strip()})")
        return 0
    if not kubeconfig.is_file():
        print(f"error: {kubeconfig} is missing: bring the host cluster up first (make up)", file=sys.stderr)
        return 2
    exe = Path(sys.executable).parent / "kubenest-operator"
    site_vars = write_site_vars(kubeconfig.parent)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen([str(exe), "--kubeconfig", str(kubeconfig), "--all-namespaces", "--standalone",
                                 "--site-vars", str(site_vars)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    pid_file.write_text(f"{proc.pid}\n")
    time.sleep(2)
    if proc.poll() is not None:
        print(f"error: the operator exited with {proc.returncode}; see {log_file}", file=sys.stderr)
        return 2
    print(f"operator running (pid {proc.pid}), log: {log_file}")
    return 0


def stop() -> int:
    stop_local()
    if _mode()["mode"] == "in-cluster":
        from sandbox import operator_in_cluster

        sb = from_env()
        if operator_in_cluster.replicas(sb):
            operator_in_cluster.scale(sb, 0)
    return 0


def status() -> int:
    pid = _running(_paths()[0])
    if pid:
        print(f"running (pid {pid})")
        return 0
    if _mode()["mode"] == "in-cluster":
        from sandbox import operator_in_cluster

        count = operator_in_cluster.replicas(from_env())
        if count:
            print(f"running in the host cluster ({count} replicas)")
            return 0
    print("not running")
    return 3


def stop_local() -> int:
    pid_file, _log, _kc = _paths()
    pid = _running(pid_file)
    if pid:
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _running(pid_file):
            time.sleep(0.2)
        if _running(pid_file):
            os.killpg(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.operator", description=__doc__)
    parser.add_argument("command", choices=["deploy", "start", "stop", "status"])
    args = parser.parse_args(argv)
    commands = {"deploy": deploy, "start": start, "stop": stop, "status": status}
    return commands[args.command]()


if __name__ == "__main__":
    sys.exit(main())
