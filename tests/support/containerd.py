"""A private containerd (own root, state, socket and config in a temp dir) that leaves the system one alone."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.support import k8sbin
from tests.support.hostfs import HostPathGuard, remove_cgroup_tree, unmount_below
from tests.support.procs import ManagedProcess, StartStop, wait_until

CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
CAP_SYS_RESOURCE = 24

CONFIG_TEMPLATE = """\
version = 2
root = "{workdir}/root"
state = "{workdir}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "{workdir}/containerd.sock"
[ttrpc]
  address = "{workdir}/containerd-ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{workdir}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = {restrict_oom_score_adj}
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{workdir}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin_dir}"
    conf_dir = "{workdir}/cni"
"""


def can_lower_oom_score_adj() -> bool:
    """Whether this process holds CAP_SYS_RESOURCE, without which a negative oom_score_adj cannot be set."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def _pids_with_args(*args: str) -> list[int]:
    """PIDs whose command line contains `args` as consecutive arguments."""
    wanted = [a.encode() for a in args]
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(argv[i:i + len(wanted)] == wanted for i in range(len(argv))):
            pids.append(int(entry.name))
    return pids


class PrivateContainerd(StartStop):
    """containerd with everything under one temp dir; stop() removes containers, shims, mounts and the dir."""

    def __init__(self, sandbox_image: str | None = None, startup_timeout: float = 30):
        self.sandbox_image = sandbox_image or k8sbin.pause_image()
        self.startup_timeout = startup_timeout
        self.workdir: Path | None = None
        self.process: ManagedProcess | None = None
        self._run_namespaces: set[str] = set()
        # runc's state and the shims' sockets and fifos live under /run/containerd whatever the config says.
        self._run_dir_guard = HostPathGuard("/run/containerd", empty_only=True)

    @property
    def address(self) -> str:
        return str(self.workdir / "containerd.sock")

    @property
    def endpoint(self) -> str:
        return f"unix://{self.address}"

    def start(self) -> None:
        if shutil.which("containerd") is None or shutil.which("ctr") is None:
            raise FileNotFoundError("containerd and ctr are needed (Debian package containerd)")
        self.workdir = Path(tempfile.mkdtemp(prefix="kubenest-containerd-"))
        config = self.workdir / "config.toml"
        config.write_text(CONFIG_TEMPLATE.format(
            workdir=self.workdir, sandbox_image=self.sandbox_image, cni_bin_dir=CNI_BIN_DIR,
            restrict_oom_score_adj=str(not can_lower_oom_score_adj()).lower()))
        (self.workdir / "cni").mkdir()
        self.process = ManagedProcess("containerd", ["containerd", "--config", str(config)],
                                      self.workdir / "containerd.log").start()
        wait_until(lambda: self.ctr("version", check=False).returncode == 0, self.startup_timeout,
                   "containerd answering", self.process)

    def ctr_argv(self, *args: str, namespace: str = "default") -> list[str]:
        return ["ctr", "--address", self.address, "--namespace", namespace, *args]

    def ctr(self, *args: str, namespace: str = "default", timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(self.ctr_argv(*args, namespace=namespace), capture_output=True, text=True,
                              timeout=timeout, check=check)

    def import_image(self, archive: Path, namespace: str = "default") -> None:
        self.ctr("images", "import", str(archive), namespace=namespace, timeout=300)

    def run(self, image: str, container_id: str, *command: str, namespace: str = "default",
            timeout: float = 120) -> subprocess.CompletedProcess:
        """`ctr run --rm`: the container's output, and its exit status as returncode."""
        self.track_namespace(namespace)
        return self.ctr("run", "--rm", image, container_id, *command, namespace=namespace, timeout=timeout,
                        check=False)

    def track_namespace(self, namespace: str) -> None:
        """Remember a namespace that `ctr run` containers use so stop() removes its cgroups."""
        self._run_namespaces.add(namespace)

    def namespaces(self) -> list[str]:
        return self.ctr("namespaces", "ls", "-q", check=False).stdout.split()

    def remove_containers(self, namespace: str) -> None:
        """Kill and delete every task and container in `namespace` (best effort: used on the way out)."""
        for task in self.ctr("tasks", "ls", "-q", namespace=namespace, check=False).stdout.split():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, namespace=namespace, check=False)
            self.ctr("tasks", "delete", "--force", task, namespace=namespace, check=False)
        for container in self.ctr("containers", "ls", "-q", namespace=namespace, check=False).stdout.split():
            self.ctr("containers", "delete", container, namespace=namespace, check=False)

    def stop(self) -> None:
        if self.workdir is None:
            return
        if self.process is not None and self.process.running():
            for namespace in self.namespaces():
                self.remove_containers(namespace)
        if self.process is not None:
            self.process.stop()
        # Shims outlive containerd by design; these were started by ours (matched by its socket) and are ours to end.
        for pid in _pids_with_args("-address", self.address):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        unmount_below(self.workdir)
        for namespace in self._run_namespaces:
            # `ctr run` puts a container's cgroup at /<namespace>/<id> and leaves /<namespace> behind.
            remove_cgroup_tree(namespace)
        shutil.rmtree(self.workdir, ignore_errors=True)
        self._run_dir_guard.cleanup()

    def leftover_shims(self) -> list[int]:
        return _pids_with_args("-address", self.address) if self.workdir else []
