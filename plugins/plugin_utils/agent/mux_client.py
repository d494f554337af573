"""Find or start the local mux for an agent; stdlib only, so Ansible workers start fast."""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentUnreachable
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import MUX_GREETING

SPAWN_TIMEOUT_S = 60
# A mux busy relaying still greets within milliseconds; this only bounds a mux that hangs.
GREETING_TIMEOUT_S = 30
# Part of the socket's name: a worker never talks to a mux of an older local protocol (one that does not greet).
MUX_PROTOCOL = "2"
# As the mux sends every frame to a worker: length-prefixed.
_GREETING_ON_THE_WIRE = struct.pack(">I", len(MUX_GREETING)) + MUX_GREETING
MUX_MODULE = __name__.rsplit(".", 1)[0] + ".mux"


def _mux_env() -> dict[str, str]:
    """The mux runs as `python -m`, outside Ansible's collection loader: the directory that holds this
    collection's `ansible_collections` tree goes first on its import path."""
    depth = __name__.count(".")
    here = Path(__file__).absolute()
    env = dict(os.environ)
    if len(here.parents) > depth and here.parents[depth - 1].name == "ansible_collections":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (os.fspath(here.parents[depth]), env.get("PYTHONPATH"))))
    return env


def socket_path(mux_dir: str, uri: str, server_name: str, ca: str, cert: str, key: str, pin: str = "",
                superseded: str = "", audit_dir: str = "", audit_node: str = "") -> Path:
    ident = "\0".join((MUX_PROTOCOL, uri, server_name or "", os.path.abspath(ca), os.path.abspath(cert),
                       os.path.abspath(key), pin, *([os.path.abspath(superseded)] if superseded else []),
                       *([f"audit:{os.path.abspath(audit_dir)}", audit_node] if audit_dir else [])))
    return Path(mux_dir) / (hashlib.sha256(ident.encode()).hexdigest()[:20] + ".sock")


def _try_connect(path: Path) -> socket.socket | None:
    """A greeted connection to the mux at `path`, or None when there is none or it is on its way out."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(path))
        if _greeted(sock, path):
            return sock
    except (FileNotFoundError, ConnectionRefusedError):
        pass
    except BaseException:
        sock.close()
        raise
    sock.close()
    return None


def _greeted(sock: socket.socket, path: Path) -> bool:
    """Read the mux's greeting. A close (or reset) before it means the mux is exiting: nothing was sent yet,
    so starting another one loses nothing."""
    sock.settimeout(GREETING_TIMEOUT_S)
    got = b""
    try:
        while len(got) < len(_GREETING_ON_THE_WIRE):
            chunk = sock.recv(len(_GREETING_ON_THE_WIRE) - len(got))
            if not chunk:
                return False
            got += chunk
    except ConnectionResetError:
        return False
    except TimeoutError:
        raise AgentUnreachable(f"the connection helper at {path} did not answer within {GREETING_TIMEOUT_S}s") from None
    finally:
        sock.settimeout(None)
    if got != _GREETING_ON_THE_WIRE:
        raise AgentUnreachable(f"the connection helper at {path} does not speak this collection's local protocol")
    return True


def connect_or_spawn(*, mux_dir: str, uri: str, server_name: str, ca: str, cert: str, key: str,
                     connect_timeout: float, idle_timeout: float, pin: str = "",
                     superseded: str = "", audit_dir: str = "", audit_node: str = "") -> socket.socket:
    """Connect to the mux for this agent, starting it first if none is running. `pin`: the certificate
    SHA-256s accepted for this agent, comma-separated (a different pin is a different mux). `superseded`: a
    predecessor client certificate; every connection the mux makes first asks the agent to refuse it and every
    certificate for our name issued no later. `audit_dir`: where the mux keeps the agent's audit lines, as those
    of `audit_node`."""
    Path(mux_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    path = socket_path(mux_dir, uri, server_name, ca, cert, key, pin, superseded, audit_dir, audit_node)
    sock = _try_connect(path)
    if sock is not None:
        return sock
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # several forks may race to start the same mux
        sock = _try_connect(path)
        if sock is not None:
            return sock
        try:
            path.unlink()  # stale socket of a mux that died
        except FileNotFoundError:
            pass
        for name, value in (("CA file", ca), ("client certificate", cert), ("client key", key)):
            if not value or not os.path.isfile(value):
                raise AgentUnreachable(f"the {name} {value!r} for the agent at {uri} does not exist")
        log_path = path.with_suffix(".log")
        with open(log_path, "ab") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", MUX_MODULE, "--socket", os.fspath(path), "--uri", uri,
                 "--server-name", server_name, "--ca", ca, "--cert", cert, "--key", key, "--pin", pin,
                 "--connect-timeout", str(connect_timeout), "--idle-timeout", str(idle_timeout),
                 *(["--superseded-cert", superseded] if superseded else []),
                 *(["--audit-dir", audit_dir, "--audit-node", audit_node] if audit_dir else [])],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log_file, close_fds=True, env=_mux_env(),
                start_new_session=True)
        line = proc.stdout.readline().decode(errors="replace").strip()
        proc.stdout.close()
        if line != "ready":
            proc.wait(timeout=SPAWN_TIMEOUT_S)
            raise AgentUnreachable(line.removeprefix("error: ") or
                                   f"the connection helper for {uri} exited; see {log_path}")
        sock = _try_connect(path)
        if sock is None:
            raise AgentUnreachable(f"the connection helper for {uri} started but its socket {path} is missing")
        return sock
