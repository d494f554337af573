"""A real etcd and kube-apiserver on loopback, with a fresh PKI, for tests and for poking at by hand.

    with ApiServer() as api:
        print(api.kubeconfig)

`python -m tests.support.apiserver` runs one in the foreground until Ctrl-C.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shutil
import signal
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from ansible_collections.kosmos.kubenest.plugins.module_utils import kubeconfig, pki
from cryptography.x509.oid import NameOID

from tests.support import k8sbin
from tests.support.procs import ManagedProcess, StartStop, free_ports, wait_until

DEFAULT_SERVICE_CIDR = "198.19.128.0/17"
ADMIN_USER = "kubenest-admin"
# A plain kube-apiserver binds no RBAC role to kubeadm's admin group; system:masters is always cluster-admin.
ADMIN_GROUP = "system:masters"


def _write(path: Path, data: bytes, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


def write_cert_and_key(directory: Path, name: str, pair: pki.CertAndKey) -> tuple[Path, Path]:
    return (_write(directory / f"{name}.crt", pki.certificate_pem(pair.cert)),
            _write(directory / f"{name}.key", pki.private_key_pem(pair.key), 0o600))


def first_service_ip(service_cidr: str) -> str:
    return str(next(ipaddress.ip_network(service_cidr).hosts()))


def _https_ok(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
        return False


PORT_ATTEMPTS = 3


class ApiServer(StartStop):
    """Context manager that runs etcd (TLS, client-cert auth) and kube-apiserver (TLS, Node+RBAC) on 127.0.0.1."""

    # Throwaway data: skipping fsync saves seconds per test run on slow disks.
    etcd_fsync = False
    # Environment added for a component by its binary's name (e.g. GOGC), over this process's own.
    component_env: dict[str, dict[str, str]] = {}

    def __init__(self, service_cidr: str = DEFAULT_SERVICE_CIDR, startup_timeout: float = 120,
                 extra_args: tuple[str, ...] = ()):
        self.service_cidr = service_cidr
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        self.workdir: Path | None = None
        self.etcd: ManagedProcess | None = None
        self.apiserver: ManagedProcess | None = None
        self.startup_seconds: float | None = None

    # Paths, valid once started.
    @property
    def pki_dir(self) -> Path:
        return self.workdir / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.pki_dir / "ca.crt"

    def start(self) -> None:
        started = time.monotonic()
        self.workdir = Path(tempfile.mkdtemp(prefix="kubenest-apiserver-"))
        (self.workdir / "logs").mkdir()
        self._generate_pki()
        for attempt in range(PORT_ATTEMPTS):
            # A port free when chosen may be taken before etcd or the API server binds it (other test
            # workers start servers too): such a start is repeated on new ports.
            self.etcd_port, etcd_peer_port, self.port = free_ports(3)
            self.url = f"https://127.0.0.1:{self.port}"
            try:
                self._start_etcd(etcd_peer_port)
                self._start_apiserver()
                break
            except RuntimeError as exc:
                for process in (self.apiserver, self.etcd):
                    if process is not None:
                        process.stop()
                shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)
                if "address already in use" not in str(exc) or attempt == PORT_ATTEMPTS - 1:
                    raise
        self.write_kubeconfig(self.kubeconfig, self.admin)
        self.startup_seconds = time.monotonic() - started

    def stop(self) -> None:
        # The API server first, so it never runs without its storage.
        for process in (self.apiserver, self.etcd):
            if process is not None:
                process.stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _generate_pki(self) -> None:
        d = self.pki_dir
        self.ca = pki.new_ca("kubernetes")
        self.etcd_ca = pki.new_ca("etcd-ca")
        write_cert_and_key(d, "ca", self.ca)
        write_cert_and_key(d, "etcd/ca", self.etcd_ca)
        write_cert_and_key(d, "etcd/server", pki.issue_certificate(
            self.etcd_ca, "kubenest-etcd", dns_names=["localhost"], ip_addresses=["127.0.0.1"],
            server=True, client=True))
        write_cert_and_key(d, "apiserver-etcd-client", pki.issue_certificate(
            self.etcd_ca, "kube-apiserver-etcd-client", client=True))
        write_cert_and_key(d, "apiserver", pki.issue_certificate(
            self.ca, "kube-apiserver",
            dns_names=["kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       "kubernetes.default.svc.cluster.local", "localhost"],
            ip_addresses=["127.0.0.1", first_service_ip(self.service_cidr)], server=True))
        write_cert_and_key(d, "apiserver-kubelet-client", pki.issue_certificate(
            self.ca, "kube-apiserver-kubelet-client", organizations=[ADMIN_GROUP], client=True))
        service_account_key = pki.new_service_account_key()
        _write(d / "sa.key", pki.private_key_pem(service_account_key), 0o600)
        _write(d / "sa.pub", pki.public_key_pem(service_account_key))
        self.admin = pki.issue_certificate(self.ca, ADMIN_USER, organizations=[ADMIN_GROUP], client=True)

    def _start_etcd(self, peer_port: int) -> None:
        d = self.pki_dir / "etcd"
        client_url = f"https://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        argv = [
            str(k8sbin.binary("etcd")), "--name=kubenest", f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={client_url}", f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=kubenest={peer_url}", "--initial-cluster-state=new",
            f"--cert-file={d / 'server.crt'}", f"--key-file={d / 'server.key'}",
            f"--trusted-ca-file={d / 'ca.crt'}", "--client-cert-auth=true",
            "--log-level=warn", *([] if self.etcd_fsync else ["--unsafe-no-fsync=true"]),
        ]
        self.etcd = ManagedProcess("etcd", argv, self.workdir / "logs" / "etcd.log", self.env_of("etcd")).start()
        context = ssl.create_default_context(cafile=str(d / "ca.crt"))
        context.load_cert_chain(self.pki_dir / "apiserver-etcd-client.crt", self.pki_dir / "apiserver-etcd-client.key")
        wait_until(lambda: _https_ok(f"{client_url}/health", context), self.startup_timeout, "etcd /health",
                   self.etcd)

    def _start_apiserver(self) -> None:
        d = self.pki_dir
        argv = [
            str(k8sbin.binary("kube-apiserver")),
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--etcd-servers=https://127.0.0.1:{self.etcd_port}", f"--etcd-cafile={d / 'etcd/ca.crt'}",
            f"--etcd-certfile={d / 'apiserver-etcd-client.crt'}", f"--etcd-keyfile={d / 'apiserver-etcd-client.key'}",
            f"--tls-cert-file={d / 'apiserver.crt'}", f"--tls-private-key-file={d / 'apiserver.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            f"--kubelet-client-certificate={d / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={d / 'apiserver-kubelet-client.key'}",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            f"--service-cluster-ip-range={self.service_cidr}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={d / 'sa.pub'}", f"--service-account-signing-key-file={d / 'sa.key'}",
            "--allow-privileged=true", "--profiling=false",
            *self.extra_args,
        ]
        self.apiserver = ManagedProcess("kube-apiserver", argv, self.workdir / "logs" / "kube-apiserver.log",
                                        self.env_of("kube-apiserver")).start()
        context = self.ssl_context()
        wait_until(lambda: _https_ok(f"{self.url}/readyz", context), self.startup_timeout, "kube-apiserver /readyz",
                   self.apiserver)

    def env_of(self, binary: str) -> dict[str, str] | None:
        extra = self.component_env.get(binary)
        return {**os.environ, **extra} if extra else None

    def ssl_context(self, client: pki.CertAndKey | None = None) -> ssl.SSLContext:
        """TLS context that trusts the cluster CA and presents `client` (the admin by default)."""
        client = client or self.admin
        cert, key = write_cert_and_key(self.workdir / "clients", f"{client.cert.serial_number:x}", client)
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(cert, key)
        return context

    def write_kubeconfig(self, path: Path, client: pki.CertAndKey, cluster_name: str = "kubenest") -> Path:
        """A kubeconfig for `client`; its certificate may come from any CA, which is how rejections are tested."""
        config = kubeconfig.client_cert_kubeconfig(
            self.url, pki.certificate_pem(self.ca.cert), pki.certificate_pem(client.cert),
            pki.private_key_pem(client.key), cluster_name=cluster_name,
            user_name=client.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)
        return _write(path, kubeconfig.dump_kubeconfig(config).encode(), 0o600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a real etcd + kube-apiserver on loopback until Ctrl-C.")
    parser.add_argument("--service-cidr", default=DEFAULT_SERVICE_CIDR)
    args = parser.parse_args(argv)
    # Ctrl-C and SIGTERM take the same clean path, even when started with SIGINT ignored (as a background job).
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    try:
        with ApiServer(service_cidr=args.service_cidr) as api:
            print(f"kube-apiserver ready at {api.url} after {api.startup_seconds:.1f}s", flush=True)
            print(f"logs: {api.workdir / 'logs'}")
            print(f"kubeconfig: {api.kubeconfig}")
            print(f"try: kubectl --kubeconfig {api.kubeconfig} get --raw /readyz?verbose")
            print("Ctrl-C stops etcd and the API server and removes the temp dir.", flush=True)
            while api.apiserver.running() and api.etcd.running():
                time.sleep(1)
            print("a component exited on its own; stopping", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        print("\nstopped", file=sys.stderr)
        return 0


if __name__ == "__main__":
    sys.exit(main())
