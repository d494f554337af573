"""Child processes that tests own: started into a log file, always stopped and reaped."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports; all sockets stay open until every port is chosen so none repeats."""
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


class ManagedProcess:
    """One child process with its output in `log_path`."""

    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> ManagedProcess:
        with self.log_path.open("ab") as log:
            # A session of its own keeps a terminal's Ctrl-C from reaching the child before we stop it in order.
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=self.env, start_new_session=True)
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 15) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds; always reaps. Returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


def wait_until(check: Callable[[], bool], timeout: float, what: str, process: ManagedProcess | None = None,
               interval: float = 0.2) -> float:
    """Poll `check` until it returns true; fail early if `process` dies. Returns the seconds waited."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        if process is not None and not process.running():
            raise RuntimeError(f"{process.name} exited while waiting for {what}:\n{process.log_tail()}")
        if check():
            return time.monotonic() - started
        if time.monotonic() > deadline:
            tail = f":\n{process.log_tail()}" if process else ""
            raise TimeoutError(f"{what} not reached within {timeout}s{tail}")
        time.sleep(interval)


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class StartStop:
    """Context manager for fixtures built from processes: a failed start still cleans up."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def ready(self) -> None:
        """Block until usable; start() alone may return before that."""

    def __enter__(self):
        try:
            self.start()
            self.ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
