"""The built kubelet in standalone mode (no API server) against a PrivateContainerd, running static pods.

A kubelet on a host without a node machine around it still writes a few fixed host paths whatever its config
says (its device-plugin socket under /var/lib/kubelet and the /var/log/containers symlinks); those it creates
are removed again on stop.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from tests.support import k8sbin
from tests.support.containerd import PrivateContainerd
from tests.support.hostfs import HostPathGuard, create_cgroup_v1, remove_cgroup_tree, unmount_below
from tests.support.procs import ManagedProcess, StartStop, free_ports, wait_until

FIXED_HOST_PATHS = ("/var/lib/kubelet", "/var/log/containers")
CRI_NAMESPACE = "k8s.io"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


class StandaloneKubelet(StartStop):
    """Context manager for a kubelet with its root dir, cgroup root and ports of its own."""

    def __init__(self, runtime: PrivateContainerd, node_name: str = "kubenest-standalone",
                 fail_cgroup_v1: bool = False, startup_timeout: float = 60):
        self.runtime = runtime
        self.node_name = node_name
        self.fail_cgroup_v1 = fail_cgroup_v1
        self.startup_timeout = startup_timeout
        self.workdir: Path | None = None
        self.process: ManagedProcess | None = None
        self.cgroup_root: str | None = None
        self._host_paths = HostPathGuard(*FIXED_HOST_PATHS)

    @property
    def manifests_dir(self) -> Path:
        return self.workdir / "manifests"

    def ready(self) -> None:
        self.wait_healthy()

    def config(self) -> dict:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": self.fail_cgroup_v1,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": self.runtime.endpoint,
            "staticPodPath": str(self.manifests_dir),
            "address": "127.0.0.1",
            "port": self.port,
            "readOnlyPort": self.read_only_port,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port,
            # No API server to delegate to; only loopback can reach these ports.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            # Keep the host's firewall untouched and everything else under the temp dir.
            "makeIPTablesUtilChains": False,
            "volumePluginDir": str(self.workdir / "volume-plugins"),
            "podLogsDir": str(self.workdir / "pod-logs"),
            "failSwapOn": False,
            "fileCheckFrequency": "1s",
        }

    def start(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="kubenest-kubelet-"))
        self.manifests_dir.mkdir()
        # cgroupfs driver: the kubelet insists that its cgroup root exists in every hierarchy.
        self.cgroup_root = "/" + self.workdir.name
        create_cgroup_v1(self.cgroup_root)
        self.port, self.read_only_port, self.healthz_port = free_ports(3)
        config_path = self.workdir / "kubelet.yaml"
        config_path.write_text(yaml.safe_dump(self.config()))
        argv = [str(k8sbin.binary("kubelet")), f"--config={config_path}", f"--root-dir={self.workdir / 'root'}",
                f"--cert-dir={self.workdir / 'pki'}", f"--hostname-override={self.node_name}", "--v=2"]
        self.process = ManagedProcess("kubelet", argv, self.workdir / "kubelet.log").start()

    def wait_healthy(self) -> float:
        return wait_until(lambda: self.healthz() == (200, "ok"), self.startup_timeout, "kubelet /healthz",
                          self.process)

    def healthz(self) -> tuple[int, str]:
        return _get(f"http://127.0.0.1:{self.healthz_port}/healthz")

    def pods(self) -> list[dict]:
        """The kubelet's own view of its pods, with status (read-only port, no API server involved)."""
        status, body = _get(f"http://127.0.0.1:{self.read_only_port}/pods")
        if status != 200:
            return []
        return json.loads(body).get("items") or []

    def add_static_pod(self, manifest: dict) -> str:
        """Write `manifest` into the static-pod dir; returns the pod name the kubelet gives it."""
        name = manifest["metadata"]["name"]
        (self.manifests_dir / f"{name}.yaml").write_text(yaml.safe_dump(manifest))
        return f"{name}-{self.node_name}"

    def remove_static_pods(self, timeout: float = 60) -> None:
        """Delete the manifests and wait until the kubelet has stopped the pods through CRI.

        Stopping a sandbox releases its mounts; the stopped records would only go at the next container GC
        (a minute later), so stop() deletes those directly.
        """
        for manifest in self.manifests_dir.glob("*.yaml"):
            manifest.unlink()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.running():
            if "RUNNING" not in self.runtime.ctr("tasks", "ls", namespace=CRI_NAMESPACE, check=False).stdout:
                return
            time.sleep(0.5)

    def stop(self) -> None:
        if self.workdir is None:
            return
        if self.process is not None:
            if self.process.running() and self.manifests_dir.is_dir():
                self.remove_static_pods()
            self.process.stop()
        if self.runtime.process is not None and self.runtime.process.running():
            self.runtime.remove_containers(CRI_NAMESPACE)
        unmount_below(self.workdir)
        if self.cgroup_root:
            remove_cgroup_tree(self.cgroup_root)
        self._host_paths.cleanup()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log_text(self) -> str:
        return self.process.log_path.read_text(errors="replace") if self.process else ""
