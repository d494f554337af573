"""put and fetch: chunked, sha256-verified transfers; uploads land atomically via temp file + rename."""

from __future__ import annotations

import asyncio
import grp
import hashlib
import os
import pwd
import stat
import tempfile
import time

from .protocol import CHUNK_SIZE, ProtocolError

DEFAULT_MODE = 0o600


def _path(header: dict, op_id) -> bytes:
    raw = header.get("path")
    if not isinstance(raw, str) or not raw:
        raise ProtocolError("bad_request", "'path' must be a non-empty string", op_id)
    path = os.fsencode(raw)  # surrogateescape keeps non-UTF-8 names intact
    if not os.path.isabs(path):
        raise ProtocolError("bad_request", f"'path' must be absolute, got {raw!r}", op_id)
    return path


def _resolve_id(value, kind: str, op_id) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        try:
            return pwd.getpwnam(value).pw_uid if kind == "owner" else grp.getgrnam(value).gr_gid
        except KeyError:
            raise ProtocolError("bad_request", f"unknown {kind} {value!r}", op_id) from None
    raise ProtocolError("bad_request", f"'{kind}' must be a name or a non-negative id", op_id)


def _os_error(exc: OSError, what: str, op_id) -> ProtocolError:
    code = {FileNotFoundError: "not_found", PermissionError: "permission_denied",
            IsADirectoryError: "is_directory", NotADirectoryError: "not_found"}.get(type(exc), "io_error")
    return ProtocolError(code, f"{what}: {exc.strerror or exc}", op_id)


class PutOp:
    kind = "put"

    def __init__(self, session, op_id, header: dict):
        self.session, self.id = session, op_id
        self.path = _path(header, op_id)
        mode = header.get("mode")
        if mode is not None and (isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777):
            raise ProtocolError("bad_request", "'mode' must be an integer between 0 and 0o7777", op_id)
        self.mode = mode
        self.uid = _resolve_id(header.get("owner"), "owner", op_id)
        self.gid = _resolve_id(header.get("group"), "group", op_id)
        self.declared_size = header.get("size")
        self.fd: int | None = None
        self.temp: bytes | None = None
        self.hasher = hashlib.sha256()
        self.size = 0
        self.failed = False
        self.started = time.monotonic()

    async def start(self) -> None:
        if os.path.isdir(self.path):
            raise ProtocolError("is_directory", f"{os.fsdecode(self.path)} is a directory", self.id)
        directory, base = os.path.split(self.path)
        try:
            self.fd, temp = tempfile.mkstemp(dir=directory, prefix=b"." + base + b".", suffix=b".kubenest-part")
        except OSError as exc:
            raise _os_error(exc, f"cannot create a file in {os.fsdecode(directory)}", self.id) from None
        self.temp = temp
        self.session.journal.add(temp)
        await self.session.send({"op": "ready", "id": self.id})

    async def feed(self, op: str, header: dict, payload) -> None:
        if op == "cancel":
            await self.abort()
            self.session.finished(self, status="cancelled", **self._audit())
            return
        if self.failed:
            if op == "end":
                self.session.forget(self)
            return  # already reported; swallow the rest of the stream
        try:
            if op == "data":
                self._write(payload)
            elif op == "end":
                await self._commit(header)
            else:
                raise ProtocolError("bad_request", f"'{op}' is not valid for a put stream", self.id)
        except ProtocolError as exc:
            await self._fail(exc)
        except OSError as exc:
            await self._fail(_os_error(exc, f"writing {os.fsdecode(self.path)}", self.id))

    def _write(self, payload) -> None:
        view = memoryview(payload)
        self.hasher.update(view)
        self.size += len(view)
        if isinstance(self.declared_size, int) and self.size > self.declared_size:
            raise ProtocolError("size_mismatch", f"received more than the declared {self.declared_size} bytes", self.id)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]

    async def _commit(self, header: dict) -> None:
        digest = self.hasher.hexdigest()
        expected = header.get("sha256")
        if not isinstance(expected, str):
            raise ProtocolError("bad_request", "'end' of a put must carry the 'sha256' of the content", self.id)
        size = header.get("size", self.size)
        if size != self.size:
            raise ProtocolError("size_mismatch", f"received {self.size} bytes, sender sent {size}", self.id)
        if expected.lower() != digest:
            raise ProtocolError("checksum_mismatch", f"sha256 {digest} does not match sender's {expected}", self.id)
        existing = None
        try:
            existing = os.lstat(self.path)
        except FileNotFoundError:
            pass
        if existing is not None and not stat.S_ISREG(existing.st_mode):
            # A symlink (or anything else) is replaced, not written through: its target's owner and mode
            # are no business of the new file (a symlink's own mode reads 0777).
            existing = None
        mode = self.mode if self.mode is not None else (stat.S_IMODE(existing.st_mode) if existing else DEFAULT_MODE)
        uid = self.uid if self.uid is not None else (existing.st_uid if existing else -1)
        gid = self.gid if self.gid is not None else (existing.st_gid if existing else -1)
        if uid != -1 or gid != -1:
            os.fchown(self.fd, uid, gid)
        os.fchmod(self.fd, mode)
        await asyncio.to_thread(os.fsync, self.fd)
        os.close(self.fd)
        self.fd = None
        os.replace(self.temp, self.path)
        self._fsync_dir()
        self.session.journal.remove(self.temp)
        self.temp = None
        self.session.finished(self, status="ok", **self._audit())
        await self.session.send({"op": "result", "id": self.id, "path": os.fsdecode(self.path),
                                 "size": self.size, "sha256": digest, "mode": mode})

    def _fsync_dir(self) -> None:
        fd = os.open(os.path.dirname(self.path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _audit(self) -> dict:
        return {"path": os.fsdecode(self.path), "bytes": self.size,
                "duration_ms": int((time.monotonic() - self.started) * 1000)}

    async def _fail(self, exc: ProtocolError) -> None:
        self.failed = True
        self._discard()
        self.session.finished(self, status=exc.code, keep=True, **self._audit())
        await self.session.send_error(exc.code, exc.message, self.id)

    def _discard(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.temp is not None:
            try:
                os.unlink(self.temp)
            except FileNotFoundError:
                pass
            self.session.journal.remove(self.temp)
            self.temp = None

    async def abort(self) -> None:
        self._discard()


class FetchOp:
    kind = "fetch"

    def __init__(self, session, op_id, header: dict):
        self.session, self.id = session, op_id
        self.path = _path(header, op_id)
        self.task: asyncio.Task | None = None
        self.started = time.monotonic()
        self.size = 0

    async def start(self) -> None:
        # Non-blocking open: opening a FIFO for reading would otherwise wait for a writer, and with it the
        # whole agent. Only regular files are sent; reads run in a thread, off the event loop.
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise _os_error(exc, f"cannot open {os.fsdecode(self.path)}", self.id) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ProtocolError("is_directory", f"{os.fsdecode(self.path)} is a directory", self.id)
            raise ProtocolError("not_regular", f"{os.fsdecode(self.path)} is not a regular file "
                                "(a FIFO, socket or device); only regular files are fetched", self.id)
        os.set_blocking(fd, True)
        await self.session.send({"op": "meta", "id": self.id, "size": st.st_size, "mode": stat.S_IMODE(st.st_mode)})
        self.task = asyncio.create_task(self._stream(fd))

    async def _stream(self, fd: int) -> None:
        hasher = hashlib.sha256()
        status = "ok"
        try:
            with os.fdopen(fd, "rb", buffering=0) as fh:
                while chunk := await asyncio.to_thread(fh.read, CHUNK_SIZE):
                    hasher.update(chunk)
                    self.size += len(chunk)
                    await self.session.send({"op": "data", "id": self.id}, chunk)
            await self.session.send({"op": "end", "id": self.id, "size": self.size, "sha256": hasher.hexdigest()})
        except OSError as exc:
            status = "io_error"
            await self.session.send_error("io_error", f"reading {os.fsdecode(self.path)}: {exc}", self.id)
        except asyncio.CancelledError:
            status = "cancelled"
        finally:
            self.session.finished(self, status=status, path=os.fsdecode(self.path), bytes=self.size,
                                  duration_ms=int((time.monotonic() - self.started) * 1000))

    async def feed(self, op: str, header: dict, payload) -> None:
        if op != "cancel":
            raise ProtocolError("bad_request", f"'{op}' is not valid for a fetch stream", self.id)
        await self.abort()

    async def abort(self) -> None:
        if self.task is not None:
            self.task.cancel()
