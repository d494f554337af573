"""Agent side of the warm Python module runner: one zygote per interpreter, started on first use."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
from pathlib import Path

log = logging.getLogger(__name__)
LEN = struct.Struct(">I")
ZYGOTE_PATH = Path(__file__).parent / "pyzygote.py"
# Run the zygote file with -c rather than as a script, so its directory never lands on sys.path.
ZYGOTE_BOOT = "import sys;p=sys.argv[1];exec(compile(open(p).read(),p,'exec'),{'__name__':'__main__'})"
# Restart a zygote whose preloaded modules keep mismatching the payloads (controller upgraded Ansible).
COLD_STREAK_LIMIT = 3


class ZygoteUnavailable(Exception):
    pass


class WarmRun:
    """One module run in a zygote child: its pid, output pipes and eventual wait status."""

    def __init__(self, reader: asyncio.StreamReader, writer, stdout, stderr):
        self.reader, self.writer = reader, writer
        self.stdout, self.stderr = stdout, stderr
        self.pid: int | None = None
        self.mode: str | None = None

    async def _message(self) -> dict:
        (size,) = LEN.unpack(await self.reader.readexactly(LEN.size))
        return json.loads(await self.reader.readexactly(size))

    async def started(self) -> None:
        while self.pid is None or self.mode is None:
            msg = await self._message()
            self.pid = msg.get("pid", self.pid)
            self.mode = msg.get("mode", self.mode)
            if "status" in msg:  # died before it could report its mode
                self._status = msg["status"]
                return

    async def wait(self) -> int:
        """Exit code in os.waitstatus_to_exitcode form (negative for a signal)."""
        status = getattr(self, "_status", None)
        while status is None:
            try:
                msg = await self._message()
            except asyncio.IncompleteReadError:
                return -9  # the zygote died with the child still unreported
            status = msg.get("status")
        self.writer.close()
        return os.waitstatus_to_exitcode(status)


class Zygote:
    def __init__(self, interpreter: str, cache_dir: Path):
        self.interpreter = interpreter
        self.cache_dir = cache_dir
        self.proc: asyncio.subprocess.Process | None = None
        self.ctl: socket.socket | None = None
        self.cold_streak = 0

    async def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                self.interpreter, "-c", ZYGOTE_BOOT, str(ZYGOTE_PATH), str(theirs.fileno()), str(self.cache_dir),
                pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
                start_new_session=True)
        except OSError as exc:
            ours.close()
            raise ZygoteUnavailable(f"cannot start {self.interpreter}: {exc}") from None
        finally:
            theirs.close()
        self.ctl = ours
        log.info("warm module runner started for %s (pid %s)", self.interpreter, self.proc.pid)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def run(self, payload: bytes, env: dict, cwd: str | None) -> WarmRun:
        agent_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            request = json.dumps({"env": env, "cwd": cwd or os.getcwd()}).encode()
            try:
                socket.send_fds(self.ctl, [request], [zygote_end.fileno(), out_w, err_w])
            except OSError as exc:
                raise ZygoteUnavailable(f"warm runner for {self.interpreter} is gone: {exc}") from None
        finally:
            for fd in (out_w, err_w):
                os.close(fd)
            zygote_end.close()
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_unix_connection(sock=agent_end)
        writer.write(LEN.pack(len(payload)))
        writer.write(payload)
        await writer.drain()
        stdout = await _pipe_reader(loop, out_r)
        stderr = await _pipe_reader(loop, err_r)
        run = WarmRun(reader, writer, stdout, stderr)
        try:
            await run.started()
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise ZygoteUnavailable(f"warm runner for {self.interpreter} failed: {exc}") from None
        self.cold_streak = self.cold_streak + 1 if run.mode == "cold" else 0
        return run

    def stop(self) -> None:
        if self.alive:
            self.proc.kill()
        if self.ctl is not None:
            self.ctl.close()


async def _pipe_reader(loop, fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0))
    return reader


class WarmRunners:
    def __init__(self, state_dir: str):
        self.cache_dir = Path(state_dir) / "warm-modules"
        self.zygotes: dict[str, Zygote] = {}
        self.lock = asyncio.Lock()

    async def get(self, interpreter: str) -> Zygote:
        async with self.lock:
            zygote = self.zygotes.get(interpreter)
            if zygote is not None and (not zygote.alive or zygote.cold_streak >= COLD_STREAK_LIMIT):
                zygote.stop()
                zygote = None
            if zygote is None:
                zygote = Zygote(interpreter, self.cache_dir)
                await zygote.start()
                self.zygotes[interpreter] = zygote
            return zygote

    def stop(self) -> None:
        for zygote in self.zygotes.values():
            zygote.stop()
