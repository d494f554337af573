"""The real kubenest-operator as a child process, and small helpers to watch what it does to the API."""

from __future__ import annotations

import base64
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import kubernetes
from kubernetes.client.rest import ApiException

from tests.support.procs import ManagedProcess, wait_until

VENV_BIN = Path(sys.executable).parent
PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
GROUP, VERSION, PLURAL = "kosmos.io", "v1alpha1", "virtualclusters"
# Short delays so retries happen within a test; the defaults are 10 s and 5 min.
FAST_ARGS = ("--backoff-base", "2", "--backoff-max", "8", "--progress-interval", "1", "--watch-timeout", "60")


def alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for a reaper that may be slow (pid 1 of a container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Operator:
    """One kubenest-operator process with a run directory of its own (so leftovers can be attributed)."""

    def __init__(self, kubeconfig: Path, workdir: Path, name: str = "operator", *extra: str,
                 standalone: bool = True, keep: int = 3, runs_dir: Path | None = None):
        self.workdir = workdir
        self.runs_dir = runs_dir or workdir / f"{name}-runs"
        self.log_path = workdir / f"{name}.log"
        argv = [str(VENV_BIN / "kubenest-operator"), "--kubeconfig", str(kubeconfig),
                "--playbook-dir", str(PLAYBOOKS), "--runs-dir", str(self.runs_dir),
                "--artifacts-keep", str(keep), "--verbose", *FAST_ARGS, *extra]
        if standalone:
            argv.append("--standalone")
        # The client's certificate files and anything else temporary stay in the test's directory, even
        # when the operator is killed.
        tmp = workdir / f"{name}-tmp"
        tmp.mkdir(exist_ok=True)
        self.process = ManagedProcess(name, argv, self.log_path, env={**os.environ, "TMPDIR": str(tmp)})

    def start(self) -> Operator:
        self.process.start()
        wait_until(lambda: "Initial authentication has finished" in self.log(), 60, f"{self.process.name} start",
                   self.process)
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def running(self) -> bool:
        return self.process.running()

    def stop(self) -> int | None:
        return self.process.stop(grace=40)

    def kill(self) -> None:
        self.process.proc.send_signal(signal.SIGKILL)
        self.process.proc.wait(10)

    def playbook_pids(self) -> list[int]:
        """ansible-playbook (and its children) working in this operator's run directories."""
        marker = f"{self.runs_dir}/run-".encode()  # in ansible-playbook's -i and -e paths, not the operator's
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if marker in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                        pids.append(int(entry.name))
                except OSError:
                    continue
        return pids

    def reap_playbooks(self) -> list[int]:
        """Kill whatever ansible-playbook is left over; returns what was found."""
        found = self.playbook_pids()
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_until(lambda: not any(alive(p) for p in found), 10, "left-over playbooks gone")
        return found


class Kube:
    """The API calls the tests make."""

    def __init__(self, client: kubernetes.client.ApiClient):
        self.client = client
        self.core = kubernetes.client.CoreV1Api(client)
        self.custom = kubernetes.client.CustomObjectsApi(client)

    def new_namespace(self, prefix: str = "vc", sleep: float = 1, fail_first: int = 0, real_api: bool = False,
                      replicas: int = 0) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.core.create_namespace({"metadata": {"name": name}})
        self.set_control(name, sleep=sleep, fail_first=fail_first, real_api=real_api, replicas=replicas)
        return name

    def set_control(self, namespace: str, sleep: float = 1, fail_first: int = 0, real_api: bool = False,
                    replicas: int = 0) -> None:
        body = {"metadata": {"name": "kubenest-test-control"},
                "data": {"sleep": str(sleep), "failFirst": str(fail_first), "realApi": str(real_api).lower(),
                         "replicas": str(replicas)}}
        try:
            self.core.create_namespaced_config_map(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.core.replace_namespaced_config_map("kubenest-test-control", namespace, body)

    def create_vc(self, namespace: str, name: str, spec: dict | None = None,
                  annotations: dict | None = None) -> dict:
        metadata = {"namespace": namespace, "name": name, **({"annotations": annotations} if annotations else {})}
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "VirtualCluster", "metadata": metadata,
                "spec": spec or {}}
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    def vc(self, namespace: str, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def patch_vc_spec(self, namespace: str, name: str, spec: dict) -> dict:
        return self.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, {"spec": spec},
                                                          _content_type="application/merge-patch+json")

    def delete_vc(self, namespace: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def runs(self, namespace: str, name: str) -> dict[str, int]:
        """The test playbook's run counter: {'present': n, 'absent': m}."""
        try:
            data = self.core.read_namespaced_config_map(f"{name}-runs", namespace).data or {}
        except ApiException as exc:
            if exc.status == 404:
                return {"present": 0, "absent": 0}
            raise
        return {key: int(data.get(key, 0)) for key in ("present", "absent")}

    def secret_text(self, namespace: str, name: str, key: str) -> str:
        data = self.core.read_namespaced_secret(name, namespace).data
        return base64.b64decode(data[key]).decode()

    def labelled(self, kind: str, namespace: str, vc_name: str) -> list[str]:
        selector = f"kosmos.io/virtualcluster={vc_name}"
        lister = {"ConfigMap": self.core.list_namespaced_config_map,
                  "Secret": self.core.list_namespaced_secret}[kind]
        return sorted(item.metadata.name for item in lister(namespace, label_selector=selector).items)

    def events_text(self, namespace: str) -> str:
        return "\n".join(f"{e.reason} {e.message}" for e in self.core.list_namespaced_event(namespace).items)


def phase(vc: dict | None) -> str | None:
    return ((vc or {}).get("status") or {}).get("phase")


def condition(vc: dict | None, type_: str = "Ready") -> dict:
    for cond in ((vc or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return cond
    return {}


def wait_for_vc(kube: Kube, namespace: str, name: str, predicate, timeout: float, what: str,
                operator: Operator | None = None, observe=None) -> dict:
    """Poll the VirtualCluster until `predicate(vc)`; `observe(vc)` sees every poll (e.g. to record progress)."""
    seen: dict = {}

    def check() -> bool:
        vc = kube.vc(namespace, name)
        if observe is not None:
            observe(vc)
        seen["vc"] = vc
        return bool(predicate(vc))

    try:
        wait_until(check, timeout, what, operator.process if operator else None, interval=0.25)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\nlast seen: {(seen.get('vc') or {}).get('status')}") from None
    return seen["vc"]


def stays(check, seconds: float, interval: float = 0.5) -> bool:
    """True if `check()` holds for the whole period."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return False
        time.sleep(interval)
    return True
