"""The exec operation: run a process, stream stdout/stderr concurrently, report an explicit exit status."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import pwd
import signal
import time

from .protocol import ProtocolError
from .warm_python import ZygoteUnavailable

READ_SIZE = 256 * 1024
# After the process exits, wait this long for pipes held open by its background children.
PIPE_GRACE_S = 2.0
CANCEL_GRACE_S = 3.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A pipelined module is buffered whole before it runs; bound it.
MAX_MODULE_PAYLOAD = 64 * 1024 * 1024


def base_env() -> dict:
    """A login-like environment for the agent's user, independent of how the agent was started."""
    user = pwd.getpwuid(os.getuid())
    return {"HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name,
            "SHELL": user.pw_shell or "/bin/sh", "PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}


def _parse(header: dict) -> dict:
    argv, shell = header.get("argv"), header.get("shell")
    if (argv is None) == (shell is None):
        raise ProtocolError("bad_request", "exec needs exactly one of 'argv' (list) or 'shell' (string)")
    if shell is not None:
        if not isinstance(shell, str):
            raise ProtocolError("bad_request", "'shell' must be a string")
        argv = ["/bin/sh", "-c", shell]
    elif not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise ProtocolError("bad_request", "'argv' must be a non-empty list of strings")
    env = header.get("env") or {}
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise ProtocolError("bad_request", "'env' must map strings to strings")
    cwd = header.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ProtocolError("bad_request", "'cwd' must be a string")
    timeout = header.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ProtocolError("bad_request", "'timeout' must be a positive number of seconds")
    runner = header.get("runner")
    if runner is not None:
        if runner != "python":
            raise ProtocolError("bad_request", f"unknown runner {runner!r} (known: 'python')")
        if len(argv) != 1 or not os.path.isabs(argv[0]) or not header.get("stdin"):
            raise ProtocolError("bad_request", "runner 'python' needs argv [absolute interpreter path] and stdin")
    return {"argv": argv, "env": env, "cwd": cwd, "timeout": timeout, "stdin": bool(header.get("stdin")),
            "runner": runner}


def describe(header: dict, argv: list) -> dict:
    """What the audit log may say about a command: never its arguments, which can hold secrets."""
    text = header.get("shell") if header.get("shell") is not None else "\0".join(argv)
    name = "sh -c" if header.get("shell") is not None else os.path.basename(argv[0])
    digest = hashlib.sha256(text.encode(errors="surrogateescape")).hexdigest()[:16]
    return {"cmd": name, "argc": len(argv), "cmd_sha256": digest}


class ExecOp:
    kind = "exec"

    def __init__(self, session, op_id, header: dict):
        self.session, self.id = session, op_id
        self.req = _parse(header)
        self.audit = describe(header, self.req["argv"])
        self.proc: asyncio.subprocess.Process | None = None
        self.task: asyncio.Task | None = None
        self.started = time.monotonic()
        self.counts = {"stdout": 0, "stderr": 0}
        self.cancelled = False
        self.pid: int | None = None
        self.returncode: int | None = None
        self.module_payload = bytearray() if self.req["runner"] == "python" else None
        self.runner_used: str | None = None

    async def start(self) -> None:
        if self.module_payload is None:
            await self._spawn()
        # else: wait for the whole module on stdin, then hand it to the warm runner

    async def _spawn(self, stdin_data: bytes | None = None) -> None:
        req = self.req
        env = base_env()
        env.update(req["env"])
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *req["argv"], stdin=asyncio.subprocess.PIPE if req["stdin"] else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=req["cwd"], env=env, start_new_session=True)
        except OSError as exc:
            # Same codes a shell uses: 127 not found, 126 found but not runnable.
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            message = f"kubenest-agent: cannot run {req['argv'][0]!r}: {exc.strerror or exc}\n"
            await self.session.send({"op": "stderr", "id": self.id}, message.encode())
            await self._finish(code, None, False, error=str(exc))
            return
        self.pid = self.proc.pid
        if stdin_data is not None:
            self.proc.stdin.write(stdin_data)
            self.proc.stdin.close()
        self.task = asyncio.create_task(self._run(self.proc.stdout, self.proc.stderr, self.proc.wait))

    async def _launch_warm(self) -> None:
        payload = bytes(self.module_payload)
        self.module_payload = None
        env = base_env()
        env.update(self.req["env"])
        try:
            zygote = await self.session.agent.warm.get(self.req["argv"][0])
            run = await zygote.run(payload, env, self.req["cwd"])
        except ZygoteUnavailable as exc:
            logging.getLogger(__name__).warning("%s; running the module cold", exc)
            self.runner_used = "spawn"
            await self._spawn(payload)
            return
        self.pid, self.runner_used = run.pid, run.mode
        self.task = asyncio.create_task(self._run(run.stdout, run.stderr, run.wait))

    async def _pump(self, stream, name: str) -> None:
        while True:
            data = await stream.read(READ_SIZE)
            if not data:
                return
            self.counts[name] += len(data)
            await self.session.send({"op": name, "id": self.id}, data)

    async def _run(self, stdout, stderr, wait) -> None:
        pumps = [asyncio.create_task(self._pump(stdout, "stdout")),
                 asyncio.create_task(self._pump(stderr, "stderr"))]
        timed_out = False
        waiter = asyncio.ensure_future(wait())
        try:
            rc = await asyncio.wait_for(asyncio.shield(waiter), self.req["timeout"])
        except TimeoutError:
            timed_out = True
            self._signal_group(signal.SIGKILL)
            rc = await waiter
        self.returncode = rc
        _done, pending = await asyncio.wait(pumps, timeout=PIPE_GRACE_S)
        for task in pending:
            task.cancel()
        sig = signal.Signals(-rc).name if rc < 0 else None
        await self._finish(128 - rc if rc < 0 else rc, sig, timed_out)

    async def _finish(self, code: int, sig: str | None, timed_out: bool, error: str | None = None) -> None:
        duration_ms = int((time.monotonic() - self.started) * 1000)
        header = {"op": "exit", "id": self.id, "code": code, "signal": sig, "timed_out": timed_out,
                  "duration_ms": duration_ms}
        if error:
            header["error"] = error
        if self.cancelled:
            header["cancelled"] = True
        self.session.finished(self, status=code, signal=sig, timed_out=timed_out or None, duration_ms=duration_ms,
                              stdout_bytes=self.counts["stdout"], stderr_bytes=self.counts["stderr"],
                              cancelled=self.cancelled or None, runner=self.runner_used, **self.audit)
        await self.session.send(header)

    def _signal_group(self, sig) -> None:
        if self.pid is not None and self.returncode is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    async def feed(self, op: str, header: dict, payload) -> None:
        if op == "cancel":
            await self.abort()
            return
        if op != "stdin":
            raise ProtocolError("bad_request", f"'{op}' is not valid for an exec stream", self.id)
        if not self.req["stdin"]:
            raise ProtocolError("bad_request", "exec was opened without 'stdin': true", self.id)
        if self.module_payload is not None:
            self.module_payload += payload
            if len(self.module_payload) > MAX_MODULE_PAYLOAD:
                raise ProtocolError("bad_request", f"module payload exceeds {MAX_MODULE_PAYLOAD} bytes", self.id)
            if header.get("eof"):
                await self._launch_warm()
            return
        pipe = self.proc.stdin if self.proc else None
        if pipe is None or pipe.is_closing():
            return
        try:
            if payload:
                pipe.write(payload)
                await pipe.drain()
            if header.get("eof"):
                pipe.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the process stopped reading; its exit status tells the story

    async def abort(self) -> None:
        """Client cancelled or went away: stop the whole process group."""
        self.cancelled = True
        if self.pid is None and self.module_payload is not None:
            self.module_payload = None  # never started: nothing to stop
            await self._finish(125, None, False, error="cancelled before the module started")
            return
        self._signal_group(signal.SIGTERM)
        if self.task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.task), CANCEL_GRACE_S)
            except TimeoutError:
                self._signal_group(signal.SIGKILL)
