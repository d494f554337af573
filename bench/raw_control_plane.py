"""The baseline a virtual cluster's create is measured against: the same etcd, kube-apiserver,
kube-controller-manager and kube-scheduler binaries started directly as processes on loopback, with their PKI
ready before the clock starts (what the components themselves need, without any orchestration).

etcd runs as the API-server test fixture runs it (no fsync), which makes this baseline a lower bound.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
import time
from pathlib import Path

from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

from tests.support import k8sbin
from tests.support.apiserver import ApiServer, _https_ok
from tests.support.procs import ManagedProcess, free_ports, wait_until


class RawControlPlane(ApiServer):
    """Start to healthy of the four components; `startup_seconds` excludes PKI generation."""

    def start(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="kubenest-raw-cp-"))
        (self.workdir / "logs").mkdir()
        self.etcd_port, etcd_peer_port, self.port, cm_port, sched_port = free_ports(5)
        self.url = f"https://127.0.0.1:{self.port}"
        self._generate_pki()
        configs = {}
        for name, user in (("controller-manager", "system:kube-controller-manager"),
                           ("scheduler", "system:kube-scheduler")):
            configs[name] = self.write_kubeconfig(self.workdir / f"{name}.conf", pki.issue_certificate(
                self.ca, user, client=True))
        started = time.monotonic()
        self._start_etcd(etcd_peer_port)
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
        self.startup_seconds = time.monotonic() - started

    def _start(self, binary: str, port: int, config: Path, extra: list[str]) -> tuple[ManagedProcess, int]:
        argv = [str(k8sbin.binary(binary)), f"--kubeconfig={config}", f"--authentication-kubeconfig={config}",
                f"--authorization-kubeconfig={config}", "--bind-address=127.0.0.1", f"--secure-port={port}",
                "--leader-elect=false", "--profiling=false", *extra]
        return ManagedProcess(binary, argv, self.workdir / "logs" / f"{binary}.log").start(), port

    def stop(self) -> None:
        for process, _port in getattr(self, "controllers", []):
            process.stop()
        super().stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def startup_seconds() -> float:
    with RawControlPlane() as control_plane:
        return control_plane.startup_seconds
