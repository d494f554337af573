"""The baseline a virtual cluster's create is measured against: the same etcd, kube-apiserver,
kube-controller-manager and kube-scheduler binaries started directly as processes on loopback, without any
orchestration. Their PKI is made on the clock, as a create makes its own: PKI generation counts on both sides.

Three settings of those binaries:
- `upstream`: each binary's own defaults (Go's GOGC; etcd syncing its writes to a data directory on disk, under
  `work_root`), what a user starting them by hand gets. The headline ratio of a create is taken against this one.
- `hosted`: what the hosted roles give them where it changes start-up time. GOGC of each Kubernetes component
  from the control_plane role's defaults (control_plane_hosted_gogc), and etcd syncing its writes to a data
  directory on disk (under `work_root`), as the hosted etcd does on its volume. The ratio of a create against
  this one is the cost of orchestration alone, with the roles' own tuning on both sides.
- `go-defaults`: Go's defaults and etcd without fsync (as the API-server test fixture runs it), a lower bound.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

from tests.support import k8sbin
from tests.support.apiserver import ApiServer, _https_ok
from tests.support.procs import ManagedProcess, free_ports, wait_until

REPO = Path(__file__).resolve().parent.parent
SETTINGS = ("upstream", "hosted", "go-defaults")
# The hosted Deployments' binaries by the keys of control_plane_hosted_gogc.
_BINARIES = {"apiserver": "kube-apiserver", "controller-manager": "kube-controller-manager",
             "scheduler": "kube-scheduler"}


def hosted_gogc() -> dict[str, str]:
    """GOGC by binary as the control_plane role sets it by default; 0 there keeps Go's default."""
    defaults = yaml.safe_load((REPO / "roles" / "control_plane" / "defaults" / "main" / "hosted.yml").read_text())
    return {_BINARIES[component]: str(value) for component, value in defaults["control_plane_hosted_gogc"].items()
            if int(value) > 0}


class RawControlPlane(ApiServer):
    """Start to healthy of the four components; `startup_seconds` includes making their PKI."""

    def __init__(self, settings: str = "hosted", work_root: Path | None = None):
        if settings not in SETTINGS:
            raise ValueError(f"settings must be one of {SETTINGS}, not {settings!r}")
        super().__init__()
        self.work_root = work_root
        self.etcd_fsync = settings in ("upstream", "hosted")
        if settings == "hosted":
            self.component_env = {binary: {"GOGC": value} for binary, value in hosted_gogc().items()}

    def start(self) -> None:
        ports = free_ports(5)
        started = time.monotonic()
        self.prepare(ports)
        self.launch()
        self.startup_seconds = time.monotonic() - started

    def prepare(self, ports: list[int]) -> None:
        """Directories, PKI and the controllers' kubeconfigs, on five given ports."""
        self.workdir = Path(tempfile.mkdtemp(prefix="kubenest-raw-cp-", dir=self.work_root))
        (self.workdir / "logs").mkdir()
        self.etcd_port, self.etcd_peer_port, self.port, self.cm_port, self.sched_port = ports
        self.url = f"https://127.0.0.1:{self.port}"
        self._generate_pki()
        self.configs = {}
        for name, user in (("controller-manager", "system:kube-controller-manager"),
                           ("scheduler", "system:kube-scheduler")):
            self.configs[name] = self.write_kubeconfig(self.workdir / f"{name}.conf", pki.issue_certificate(
                self.ca, user, client=True))

    def launch(self) -> None:
        """The four components started in order, each waited for as the hosted roles do."""
        configs, cm_port, sched_port = self.configs, self.cm_port, self.sched_port
        self._start_etcd(self.etcd_peer_port)
        self._start_apiserver()
        d = self.pki_dir
        self.controllers = [
            self._start("kube-controller-manager", cm_port, configs["controller-manager"], [
                f"--service-account-private-key-file={d / 'sa.key'}", f"--root-ca-file={d / 'ca.crt'}",
                f"--cluster-signing-cert-file={d / 'ca.crt'}", f"--cluster-signing-key-file={d / 'ca.key'}",
                "--use-service-account-credentials=true", "--controllers=*,bootstrapsigner,tokencleaner"]),
            self._start("kube-scheduler", sched_port, configs["scheduler"], []),
        ]
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE  # their own self-signed serving certificates; health only
        for process, port in self.controllers:
            wait_until(lambda port=port: _https_ok(f"https://127.0.0.1:{port}/healthz", unverified),
                       self.startup_timeout, f"{process.name} /healthz", process)

    def _start(self, binary: str, port: int, config: Path, extra: list[str]) -> tuple[ManagedProcess, int]:
        argv = [str(k8sbin.binary(binary)), f"--kubeconfig={config}", f"--authentication-kubeconfig={config}",
                f"--authorization-kubeconfig={config}", "--bind-address=127.0.0.1", f"--secure-port={port}",
                "--leader-elect=false", "--profiling=false", *extra]
        log = self.workdir / "logs" / f"{binary}.log"
        return ManagedProcess(binary, argv, log, self.env_of(binary)).start(), port

    def stop(self) -> None:
        for process, _port in getattr(self, "controllers", []):
            process.stop()
        super().stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def startup_seconds(settings: str = "hosted", work_root: Path | None = None) -> float:
    with RawControlPlane(settings, work_root) as control_plane:
        return control_plane.startup_seconds


def batch_startup_seconds(count: int, settings: str = "hosted", work_root: Path | None = None) -> float:
    """Seconds until the last of `count` control planes, all started at the same moment, is healthy.

    The floor for virtual clusters created at once: the same binaries competing for the same cores and disk,
    without orchestration. Each makes its PKI on the clock, as one alone does.
    """
    planes = [RawControlPlane(settings, work_root) for _plane in range(count)]
    for plane in planes:
        plane.startup_timeout = 120 * count  # each waits for cores the others hold
    ports = free_ports(5 * count)  # drawn together, so no two planes are handed the same port

    def start(index: int) -> None:
        planes[index].prepare(ports[5 * index:5 * index + 5])
        planes[index].launch()

    try:
        started = time.monotonic()
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(start, range(count)))
        return time.monotonic() - started
    finally:
        for plane in planes:
            plane.stop()
