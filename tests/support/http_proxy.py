"""Debian's tinyproxy on loopback: the HTTP proxy kubeconfigs name in proxy-url, with basic authentication and
CONNECT allowed to one port only (the API server's), so a request that bypassed it could not pass unnoticed."""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

from tests.support.procs import ManagedProcess, StartStop, free_ports, wait_until


class TinyProxy(StartStop):
    def __init__(self, connect_port: int, user: str = "kube", password: str = "proxy-pass-7"):
        self.connect_port = connect_port
        self.user, self.password = user, password
        self.workdir: Path | None = None
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://{self.user}:{self.password}@127.0.0.1:{self.port}"

    def log(self) -> str:
        return (self.workdir / "tinyproxy.log").read_text(errors="replace") if self.workdir else ""

    def start(self) -> None:
        binary = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
        self.workdir = Path(tempfile.mkdtemp(prefix="kubenest-proxy-"))
        [self.port] = free_ports(1)
        conf = self.workdir / "tinyproxy.conf"
        conf.write_text("\n".join([
            f"Port {self.port}", "Listen 127.0.0.1", "Timeout 60", "MaxClients 32", "Allow 127.0.0.1",
            f"BasicAuth {self.user} {self.password}", f"ConnectPort {self.connect_port}",
            "LogLevel Connect", f"LogFile \"{self.workdir / 'tinyproxy.log'}\"",
            f"PidFile \"{self.workdir / 'tinyproxy.pid'}\"", "",
        ]))
        self.process = ManagedProcess("tinyproxy", [binary, "-d", "-c", str(conf)], self.workdir / "stdout.log")
        self.process.start()
        wait_until(self._listening, 20, "tinyproxy listening", self.process)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
