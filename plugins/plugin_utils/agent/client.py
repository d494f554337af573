"""Synchronous client: one operation at a time over a transport (direct websocket or the local mux).

Stdlib only on the mux path, so Ansible workers stay fast; websockets is imported for direct use.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import select
import socket
import struct
import threading
from dataclasses import dataclass, field

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import (
    AgentConnectionLost,
    AgentError,
    AgentOpError,
    AgentUnreachable,
    describe_connect_error,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import (
    CHUNK_SIZE,
    MAX_FRAME,
    SUBPROTOCOL,
    ProtocolError,
    decode,
    encode,
)

_LEN = struct.Struct(">I")


class UnixFrameTransport:
    """Length-prefixed frames over a Unix socket (worker <-> mux)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def send(self, frame: bytes) -> None:
        try:
            if len(frame) < 65536:
                self.sock.sendall(_LEN.pack(len(frame)) + frame)
            else:  # avoid copying large chunks just to prepend four bytes
                self.sock.sendall(_LEN.pack(len(frame)))
                self.sock.sendall(frame)
        except OSError as exc:
            raise AgentConnectionLost(f"lost the local connection to the agent mux: {exc}") from None

    def _read_exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        while view:
            got = self.sock.recv_into(view)
            if not got:
                raise AgentConnectionLost("the agent mux closed the connection")
            view = view[got:]
        return buf

    def recv(self, timeout: float | None = None) -> bytes:
        self.sock.settimeout(timeout)
        try:
            (size,) = _LEN.unpack(self._read_exact(_LEN.size))
            self.sock.settimeout(None)
            if size > MAX_FRAME + 1024:
                raise AgentConnectionLost(f"oversized frame of {size} bytes from the mux")
            return bytes(self._read_exact(size))
        except TimeoutError:
            raise
        except OSError as exc:
            raise AgentConnectionLost(f"lost the local connection to the agent mux: {exc}") from None

    def poll(self) -> bytes | None:
        readable, _w, _x = select.select([self.sock], [], [], 0)
        return self.recv(None) if readable else None

    def close(self) -> None:
        self.sock.close()


class WebSocketTransport:
    """A direct mutual-TLS websocket to an agent (tests, the CLI, the mux's own probe)."""

    def __init__(self, uri: str, ssl_context, server_name: str | None, open_timeout: float = 10.0,
                 pins: tuple[str, ...] = ()):
        from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import pin_mismatch
        from websockets.sync.client import connect

        self.where = uri
        try:
            self.ws = connect(uri, ssl=ssl_context, server_hostname=server_name, subprotocols=[SUBPROTOCOL],
                              max_size=MAX_FRAME, compression=None, open_timeout=open_timeout,
                              close_timeout=2, max_queue=8, legacy=True)
        except Exception as exc:  # every failure to connect is a reason the host is unreachable
            raise AgentUnreachable(describe_connect_error(exc, uri)) from None
        refused = pin_mismatch(self.ws.socket, pins, uri)
        if refused:
            self.ws.close()
            raise AgentUnreachable(refused)

    def send(self, frame: bytes) -> None:
        from websockets.exceptions import ConnectionClosed
        try:
            self.ws.send(frame)
        except ConnectionClosed as exc:
            raise AgentConnectionLost(f"connection to the agent at {self.where} lost: {exc}") from None

    def recv(self, timeout: float | None = None) -> bytes:
        from websockets.exceptions import ConnectionClosed
        try:
            return self.ws.recv(timeout)
        except ConnectionClosed as exc:
            raise AgentConnectionLost(f"connection to the agent at {self.where} lost: {exc}") from None

    def poll(self) -> bytes | None:
        try:
            return self.recv(0)
        except TimeoutError:
            return None

    def close(self) -> None:
        self.ws.close()


@dataclass
class ExecResult:
    code: int
    signal: str | None
    timed_out: bool
    stdout: bytes = b""
    stderr: bytes = b""
    duration_ms: int = 0
    extra: dict = field(default_factory=dict)


# Output of one command the controller keeps in memory (stdout and stderr together).
MAX_OUTPUT = 256 * 1024 * 1024


class AgentClient:
    def __init__(self, transport, max_output: int = MAX_OUTPUT):
        self.transport = transport
        self.max_output = max_output
        self._ids = itertools.count(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self.transport.close()

    def _send(self, header: dict, payload=b"") -> None:
        self.transport.send(encode(header, payload))

    def _next(self, op_id, timeout=None) -> tuple[dict, memoryview]:
        """Next frame of ``op_id``; frames of earlier, abandoned operations are skipped."""
        while True:
            try:
                header, payload = decode(self.transport.recv(timeout))
            except ProtocolError as exc:
                raise AgentError(f"malformed frame from the agent: {exc.message}") from None
            if header.get("id") == op_id:
                if header["op"] == "error":
                    raise AgentOpError(header.get("code", "error"), header.get("message", ""))
                return header, payload
            if header["op"] == "error" and header.get("id") is None:
                if header.get("code") == "unreachable":
                    raise AgentUnreachable(header.get("message", "agent unreachable"))
                raise AgentOpError(header.get("code", "error"), header.get("message", ""))

    def _check_early_error(self, op_id) -> None:
        frame = self.transport.poll()
        while frame is not None:
            header, _payload = decode(frame)
            if header.get("id") == op_id and header["op"] == "error":
                raise AgentOpError(header.get("code", "error"), header.get("message", ""))
            frame = self.transport.poll()

    def health(self) -> dict:
        op_id = next(self._ids)
        self._send({"op": "health", "id": op_id})
        header, _payload = self._next(op_id)
        return header

    def supersede(self, before: int) -> dict:
        """Have the agent refuse, from now on, every client certificate for our name issued (notBefore) before
        `before`, seconds since the epoch; the agent never goes past our own certificate's."""
        op_id = next(self._ids)
        self._send({"op": "supersede", "id": op_id, "before": before})
        header, _payload = self._next(op_id)
        return header

    def audit(self, boot: str | None = None, after: int = 0) -> tuple[dict, bytes]:
        """The agent's audit lines after line `after` of its start `boot`: (what they are, the lines)."""
        op_id = next(self._ids)
        self._send({"op": "audit", "id": op_id, "boot": boot, "after": after})
        header, payload = self._next(op_id)
        return header, bytes(payload)

    def exec(self, argv=None, shell=None, *, stdin: bytes | None = None, env=None, cwd=None, timeout=None,
             runner=None, on_stdout=None, on_stderr=None) -> ExecResult:
        """Run a command; ``runner="python"`` lets the agent run a pipelined module in a warm interpreter."""
        op_id = next(self._ids)
        header = {"op": "exec", "id": op_id, "stdin": stdin is not None}
        header.update({k: v for k, v in (("argv", argv), ("shell", shell), ("env", env), ("cwd", cwd),
                                         ("timeout", timeout), ("runner", runner)) if v is not None})
        self._send(header)
        feeder = None
        if stdin is not None:
            if len(stdin) <= CHUNK_SIZE:
                self._send({"op": "stdin", "id": op_id, "eof": True}, stdin)
            else:  # large input: send from a thread so output can flow back meanwhile
                feeder = threading.Thread(target=self._feed_stdin, args=(op_id, stdin), daemon=True)
                feeder.start()
        out, err = bytearray(), bytearray()
        while True:
            frame, payload = self._next(op_id)
            op = frame["op"]
            if op in ("stdout", "stderr") and len(out) + len(err) + len(payload) > self.max_output:
                # A node must not be able to fill the controller's memory: stop the command instead.
                self._send({"op": "cancel", "id": op_id})
                raise AgentOpError("output_too_large", f"the command wrote more than {self.max_output} bytes of "
                                   "output; it was stopped (redirect large output to a file and fetch it)")
            if op == "stdout":
                out += payload
                if on_stdout:
                    on_stdout(bytes(payload))
            elif op == "stderr":
                err += payload
                if on_stderr:
                    on_stderr(bytes(payload))
            elif op == "exit":
                if feeder:
                    feeder.join(1)
                return ExecResult(frame["code"], frame.get("signal"), bool(frame.get("timed_out")), bytes(out),
                                  bytes(err), frame.get("duration_ms", 0), frame)

    def _feed_stdin(self, op_id, data: bytes) -> None:
        view = memoryview(data)
        try:
            for start in range(0, len(view), CHUNK_SIZE):
                last = start + CHUNK_SIZE >= len(view)
                self._send({"op": "stdin", "id": op_id, "eof": last}, view[start:start + CHUNK_SIZE])
        except AgentError:
            pass  # the reader side reports the lost connection

    def put(self, local_path, remote_path: str, *, mode=None, owner=None, group=None) -> dict:
        op_id = next(self._ids)
        size = os.path.getsize(local_path)
        header = {"op": "put", "id": op_id, "path": remote_path, "size": size}
        header.update({k: v for k, v in (("mode", mode), ("owner", owner), ("group", group)) if v is not None})
        hasher = hashlib.sha256()
        sent = 0
        with open(local_path, "rb", buffering=0) as fh:
            self._send(header)
            self._next(op_id)  # "ready": the agent could create the file; now stream
            try:
                while chunk := fh.read(CHUNK_SIZE):
                    hasher.update(chunk)
                    sent += len(chunk)
                    self._send({"op": "data", "id": op_id}, chunk)
                    self._check_early_error(op_id)
            except AgentOpError:
                self._send({"op": "cancel", "id": op_id})
                raise
        self._send({"op": "end", "id": op_id, "size": sent, "sha256": hasher.hexdigest()})
        result, _payload = self._next(op_id)
        return result

    def fetch(self, remote_path: str, local_path) -> dict:
        """Download to ``local_path`` atomically; the sha256 the agent reports must match what arrived."""
        op_id = next(self._ids)
        local_path = os.fspath(local_path)
        directory, base = os.path.split(os.path.abspath(local_path))
        temp = os.path.join(directory, f".{base}.kubenest-part")
        self._send({"op": "fetch", "id": op_id, "path": remote_path})
        meta, _payload = self._next(op_id)
        hasher = hashlib.sha256()
        size = 0
        try:
            with open(temp, "wb") as fh:
                while True:
                    frame, payload = self._next(op_id)
                    if frame["op"] == "data":
                        hasher.update(payload)
                        fh.write(payload)
                        size += len(payload)
                    elif frame["op"] == "end":
                        break
                fh.flush()
                os.fsync(fh.fileno())
            if frame.get("sha256") != hasher.hexdigest() or frame.get("size") != size:
                raise AgentOpError("checksum_mismatch", f"fetched {size} bytes of {remote_path} do not match "
                                   f"the agent's sha256 {frame.get('sha256')}")
            os.replace(temp, local_path)
        except BaseException:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass
            raise
        return {"path": local_path, "size": size, "sha256": hasher.hexdigest(), "mode": meta.get("mode")}


def connect_direct(host: str, port: int, *, ca_file: str, cert_file: str, key_file: str,
                   server_name: str | None = None, open_timeout: float = 10.0, pin=()) -> AgentClient:
    """`pin`: certificate SHA-256s accepted for this agent (see tls.normalize_pins); none: the CA decides."""
    from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import client_context, normalize_pins

    ctx = client_context(ca_file, cert_file, key_file)
    netloc = f"[{host}]" if ":" in host else host
    transport = WebSocketTransport(f"wss://{netloc}:{port}/", ctx, server_name or host, open_timeout,
                                   normalize_pins(pin))
    return AgentClient(transport)
