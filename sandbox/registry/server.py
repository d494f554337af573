"""Running the registry: its configuration, process, readiness and stop (stopping needs only the standard library)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sandbox.machines.processes import alive

PROGRAM = "docker-registry"  # Debian's package of distribution 2.8
# Not 5000: Debian's package starts its own registry there on machines that run systemd.
DEFAULT_PORT = 5443
START_TIMEOUT_S = 30
STOP_GRACE_S = 10


class RegistryError(Exception):
    pass


@dataclass(frozen=True)
class Registry:
    """One registry: where its state lives and the address it serves on."""

    state_dir: Path
    address: str
    port: int = DEFAULT_PORT

    @property
    def endpoint(self) -> str:
        return f"https://{self.address}:{self.port}"

    @property
    def host(self) -> str:
        """host:port, as skopeo's docker:// references name it."""
        return f"{self.address}:{self.port}"

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def trust_dir(self) -> Path:
        """Only the CA: what clients are given (skopeo takes every *.crt of a directory as a CA, every *.key as
        a client key wanting its *.cert)."""
        return self.state_dir / "trust"

    @property
    def ca_file(self) -> Path:
        return self.trust_dir / "ca.crt"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "registry.pid"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "registry.log"

    @property
    def config_file(self) -> Path:
        return self.state_dir / "config.json"

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "data"


def config(reg: Registry, cert: Path, key: Path) -> dict:
    """distribution's configuration; written as JSON, which its YAML reader takes without any guessing."""
    return {
        "version": "0.1",
        "log": {"level": "info", "accesslog": {"disabled": True}, "fields": {"service": "registry"}},
        "storage": {"filesystem": {"rootdirectory": str(reg.data_dir)}, "delete": {"enabled": True},
                    "cache": {"blobdescriptor": "inmemory"}},
        "http": {"addr": reg.host, "tls": {"certificate": str(cert), "key": str(key)},
                 "headers": {"X-Content-Type-Options": ["nosniff"]}},
        "health": {"storagedriver": {"enabled": True, "interval": "10s", "threshold": 3}},
    }


def pid(reg: Registry) -> int | None:
    """The running registry's pid, or None (a stale pid file, or another program on that pid, is not it)."""
    try:
        value = int(reg.pid_file.read_text().strip())
        argv = Path(f"/proc/{value}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return value if argv and Path(argv[0].decode(errors="replace")).name == PROGRAM else None


def _ssl_context(reg: Registry) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(reg.ca_file))


def answers(reg: Registry, timeout: float = 3) -> bool:
    """Whether /v2/ answers over TLS verified against the registry's own CA (what a client checks first)."""
    try:
        with urllib.request.urlopen(f"{reg.endpoint}/v2/", timeout=timeout, context=_ssl_context(reg)) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False


def manifest_digest(reg: Registry, repository: str, tag: str) -> str | None:
    """The digest the registry holds for repository:tag, or None when it has no such manifest."""
    accept = ", ".join(["application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
                        "application/vnd.docker.distribution.manifest.v2+json"])
    request = urllib.request.Request(f"{reg.endpoint}/v2/{repository}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10, context=_ssl_context(reg)) as resp:
            return resp.headers.get("Docker-Content-Digest")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise RegistryError(f"registry {reg.endpoint}: HEAD {repository}:{tag} answered {exc.code}") from None
    except (OSError, urllib.error.URLError) as exc:
        raise RegistryError(f"registry {reg.endpoint} does not answer: {exc}") from None


def start(reg: Registry) -> bool:
    """Start the registry unless it runs; returns whether it was started. Waits until /v2/ answers."""
    from . import pki  # needs the venv (cryptography); stopping does not

    program = shutil.which(PROGRAM)
    if program is None:
        raise RegistryError(f"{PROGRAM} is not installed (Debian package docker-registry; `make system-deps`)")
    files = pki.ensure(reg.pki_dir, reg.address)
    reg.trust_dir.mkdir(parents=True, exist_ok=True)
    if not reg.ca_file.is_file() or reg.ca_file.read_bytes() != files["ca"].read_bytes():
        reg.ca_file.write_bytes(files["ca"].read_bytes())
    wanted = json.dumps(config(reg, files["cert"], files["key"]), indent=2, sort_keys=True) + "\n"
    written = reg.config_file.read_text() if reg.config_file.is_file() else None
    running = pid(reg)
    if running is not None and written == wanted and answers(reg):
        return False
    if running is not None:
        stop(reg)  # configuration (address, certificate) changed under it
    reg.data_dir.mkdir(parents=True, exist_ok=True)
    reg.config_file.write_text(wanted)
    with open(reg.log_file, "ab") as log:
        proc = subprocess.Popen([program, "serve", str(reg.config_file)], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    reg.pid_file.write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            reg.pid_file.unlink(missing_ok=True)
            raise RegistryError(f"{PROGRAM} exited with {proc.returncode}; its log: {reg.log_file}\n"
                                f"{_tail(reg.log_file)}")
        if answers(reg, timeout=1):
            return True
        time.sleep(0.2)
    stop(reg)
    raise RegistryError(f"{PROGRAM} does not answer on {reg.endpoint}/v2/ after {START_TIMEOUT_S} s; "
                        f"its log: {reg.log_file}\n{_tail(reg.log_file)}")


def stop(reg: Registry) -> bool:
    """Stop the registry if it runs; returns whether it did."""
    running = pid(reg)
    reg.pid_file.unlink(missing_ok=True)
    if running is None:
        return False
    os.kill(running, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and alive(running):
        try:
            os.waitpid(running, os.WNOHANG)  # reaps it when it is our child
        except ChildProcessError:
            pass
        time.sleep(0.1)
    if alive(running):
        os.kill(running, signal.SIGKILL)
    return True


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"
