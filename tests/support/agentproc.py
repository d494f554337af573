"""Start a real kubenest-agent process on loopback with a fresh development PKI."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import connect_direct
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentError

from kubenest_agent.devpki import ensure_dev_pki


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class AgentProcess:
    pki: Path
    state_dir: Path
    audit_log: Path
    port: int = field(default_factory=free_port)
    node: str = "node1"
    extra_args: list = field(default_factory=list)
    proc: subprocess.Popen | None = None

    @classmethod
    def with_fresh_pki(cls, root: Path, **kwargs) -> AgentProcess:
        pki = root / "pki"
        ensure_dev_pki(pki, kwargs.get("node", "node1"), ["127.0.0.1"])
        return cls(pki=pki, state_dir=root / "state", audit_log=root / "audit.log", **kwargs)

    @property
    def client_files(self) -> dict:
        return {"ca_file": str(self.pki / "ca.crt"), "cert_file": str(self.pki / "client.crt"),
                "key_file": str(self.pki / "client.key")}

    def start(self, timeout: float = 15) -> AgentProcess:
        cmd = [sys.executable, "-m", "kubenest_agent.cli", "serve", "--listen", f"127.0.0.1:{self.port}",
               "--tls-cert", str(self.pki / f"{self.node}.crt"), "--tls-key", str(self.pki / f"{self.node}.key"),
               "--client-ca", str(self.pki / "ca.crt"), "--state-dir", str(self.state_dir),
               "--audit-log", str(self.audit_log), "--node-name", self.node, *self.extra_args]
        self.log = open(self.state_dir.parent / f"agent-{self.port}.log", "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"agent exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with self.client() as c:
                    c.health()
                return self
            except AgentError:
                time.sleep(0.1)
        raise RuntimeError(f"agent did not become healthy within {timeout}s")

    def client(self, **overrides):
        server_name = overrides.pop("server_name", "127.0.0.1")
        return connect_direct("127.0.0.1", self.port, server_name=server_name, **{**self.client_files, **overrides})

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        if getattr(self, "log", None):
            self.log.close()

    def audit_events(self) -> list[dict]:
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]


def shutdown_muxes(control_dir: Path) -> None:
    """Stop every connection helper a test's plays left behind (they would idle out anyway)."""
    from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import UnixFrameTransport
    from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import encode

    for sock_path in Path(control_dir).glob("*.sock"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(os.fspath(sock_path))
            transport = UnixFrameTransport(sock)
            # Read the greeting first: a socket closed with it unread resets the connection, and the mux would
            # lose the request.
            transport.recv(5)
            transport.send(encode({"op": "mux_shutdown", "id": 0}))
        except (OSError, AgentError):
            pass
        finally:
            sock.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and list(Path(control_dir).glob("*.sock")):
        time.sleep(0.1)
    # A helper removes its socket first and then finishes (taking the agent's last audit lines): wait for it.
    while time.monotonic() < deadline and pids_of(f"--socket {control_dir}/"):
        time.sleep(0.1)


def pids_of(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


def terminate(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
