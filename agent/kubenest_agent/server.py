"""The agent's websocket server: mutual TLS, identity allow-list, one Session per connection."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from http import HTTPStatus

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from . import __version__, audit
from .admission import HandshakeGate
from .inflight import InflightJournal
from .ops_exec import ExecOp
from .ops_files import FetchOp, PutOp
from .protocol import (
    CHUNK_SIZE,
    MAX_FRAME,
    OPEN_OPS,
    PROTOCOL_VERSION,
    STREAM_OPS,
    SUBPROTOCOL,
    ProtocolError,
    decode,
    encode,
)
from .superseded import ClientCertificate, SupersededClients
from .tlsconfig import peer_identity, server_context
from .warm_python import WarmRunners

log = logging.getLogger(__name__)
OP_CLASSES = {"exec": ExecOp, "put": PutOp, "fetch": FetchOp}
MAX_OPS_PER_CONNECTION = 64
# An honest client finishes in milliseconds; a silent one should not hold its slot for long.
TLS_HANDSHAKE_TIMEOUT_S = 5


class Session:
    """Operations multiplexed over one authenticated connection, keyed by client-chosen ids."""

    def __init__(self, ws: ServerConnection, agent: Agent, peer: str, addr: str,
                 cert: ClientCertificate | None = None):
        self.ws, self.agent, self.peer, self.addr, self.cert = ws, agent, peer, addr, cert
        self.journal = agent.journal
        self.ops: dict = {}

    async def send(self, header: dict, payload=b"") -> None:
        try:
            await self.ws.send(encode(header, payload))
        except ConnectionClosed:
            pass  # the reader loop notices and aborts what is still running

    async def send_error(self, code: str, message: str, op_id=None) -> None:
        await self.send({"op": "error", "id": op_id, "code": code, "message": message})

    def finished(self, op, keep: bool = False, **fields) -> None:
        audit.record(op.kind, peer=self.peer, addr=self.addr, id=op.id, **fields)
        if not keep:
            self.forget(op)

    def forget(self, op) -> None:
        if self.ops.get(op.id) is op:
            del self.ops[op.id]

    async def run(self) -> None:
        try:
            async for message in self.ws:
                await self._dispatch(message)
        except ConnectionClosed:
            pass
        finally:
            for op in list(self.ops.values()):
                await op.abort()
            self.ops.clear()

    async def _dispatch(self, message) -> None:
        op_id = None
        try:
            header, payload = decode(message)
            op, op_id = header["op"], header.get("id")
            if not isinstance(op_id, (str, int)) or isinstance(op_id, bool):
                raise ProtocolError("bad_frame", "header needs an 'id' (string or integer)")
            if op in OPEN_OPS:
                await self._open(op, op_id, header)
            elif op in STREAM_OPS:
                handler = self.ops.get(op_id)
                if handler is None:
                    if op == "cancel":
                        return  # already finished: cancelling is idempotent
                    raise ProtocolError("unknown_id", f"no open operation with id {op_id!r}", op_id)
                await handler.feed(op, header, payload)
            else:
                raise ProtocolError("unknown_op", f"unknown operation {op!r}", op_id)
        except ProtocolError as exc:
            log.info("protocol error from %s (%s): %s: %s", self.peer, self.addr, exc.code, exc.message)
            await self.send_error(exc.code, exc.message, exc.op_id if exc.op_id is not None else op_id)
        except Exception as exc:  # a bug must not take down the connection or the agent
            log.exception("operation %r failed", op_id)
            await self.send_error("internal", f"agent error: {exc}", op_id)

    async def _open(self, op: str, op_id, header: dict) -> None:
        if op_id in self.ops:
            raise ProtocolError("duplicate_id", f"operation id {op_id!r} is already in use", op_id)
        if op == "health":
            await self.send(self.agent.health(op_id))
            audit.record("health", peer=self.peer, addr=self.addr, id=op_id, status="ok")
            return
        if op == "supersede":
            await self._supersede(op_id, header.get("before"))
            return
        if op == "audit":
            await self._audit(op_id, header)
            return
        if len(self.ops) >= MAX_OPS_PER_CONNECTION:
            raise ProtocolError("too_many_ops", f"at most {MAX_OPS_PER_CONNECTION} operations per connection", op_id)
        handler = OP_CLASSES[op](self, op_id, header)
        self.ops[op_id] = handler
        try:
            await handler.start()
        except BaseException:
            self.forget(handler)
            raise

    async def _supersede(self, op_id, before) -> None:
        """Certificates for this connection's name issued before `before` (at most this connection's own) are
        refused from now on, here and after a restart; connections already made with them are closed."""
        if not isinstance(before, int) or isinstance(before, bool):
            raise ProtocolError("bad_request", "supersede needs 'before' (seconds since the epoch)", op_id)
        if self.cert is None:
            raise ProtocolError("internal", "the connection's client certificate cannot be read", op_id)
        changed, mark = self.agent.superseded.supersede(self.cert, before)
        closed = self.agent.close_superseded() if changed else 0
        await self.send({"op": "result", "id": op_id, "ok": True, "changed": changed, "before": mark})
        audit.record("supersede", peer=self.peer, addr=self.addr, id=op_id, changed=changed, before=mark,
                     closed=closed or None)

    async def _audit(self, op_id, header: dict) -> None:
        """The audit lines after the caller's cursor, for it to keep off the node. Not itself audited: a
        controller asking at every connection would fill the memory with its own questions."""
        after, boot = header.get("after", 0), header.get("boot")
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise ProtocolError("bad_request", "'after' must be a line number (an integer, 0 or more)", op_id)
        if boot is not None and not isinstance(boot, str):
            raise ProtocolError("bad_request", "'boot' must be a string", op_id)
        described, lines = audit.since(boot, after, CHUNK_SIZE)
        await self.send({"op": "result", "id": op_id, "ok": True, **described}, lines)


class TLSGatedConnection(ServerConnection):
    """Runs the TLS handshake itself so refused clients (no cert, wrong CA, expired) get logged.

    asyncio's built-in server TLS swallows handshake failures; here the listener is plain TCP
    and each connection is upgraded with loop.start_tls before websockets sees a byte.
    """

    agent: Agent
    upgraded = False

    def connection_lost(self, exc) -> None:
        # A connection refused or failed before the upgrade never became a websocket connection: there is
        # nothing to tear down (websockets' teardown would fail on the state it never set up).
        if self.upgraded:
            super().connection_lost(exc)

    def connection_made(self, transport) -> None:
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if peer else "?"
        if not self.agent.handshakes.admit(host):
            transport.abort()  # before any TLS state exists: a flood costs nothing but the accept
            self.agent.handshakes.discarded()
            return
        transport.pause_reading()
        self.agent.track(asyncio.get_running_loop().create_task(self._upgrade(transport, host)))

    async def _upgrade(self, transport, host: str) -> None:
        loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        try:
            tls = await loop.start_tls(transport, self, self.agent.ssl_context, server_side=True,
                                       ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except (OSError, TimeoutError, asyncio.CancelledError) as exc:
            reason = (getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
                      or type(exc).__name__)
            audit.record("refused", addr=addr, reason=f"TLS handshake failed: {reason}")
            transport.abort()
            self.agent.handshakes.discarded()
            return
        finally:
            self.agent.handshakes.done(host)
        self.upgraded = True
        super().connection_made(tls)


class Agent:
    def __init__(self, cfg):
        self.cfg = cfg
        self.node = cfg.node_name or socket.gethostname()
        self.allowed = frozenset(cfg.allowed_clients)
        self.ssl_context = server_context(cfg.tls_cert, cfg.tls_key, cfg.client_ca)
        self.journal = InflightJournal(cfg.state_dir)
        self.warm = WarmRunners(cfg.state_dir)
        self.started = time.monotonic()
        self.handshakes = HandshakeGate()
        self.superseded = SupersededClients(cfg.state_dir)
        self.sessions: set[Session] = set()
        self._tasks: set[asyncio.Task] = set()

    def track(self, task: asyncio.Task) -> None:
        """Keep a reference to a background task until it ends (the loop holds only weak ones)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def reload_identity(self) -> bool:
        """Take up a re-issued certificate and key (SIGHUP): new connections present it, open ones go on.
        A pair that does not load (missing, or key and certificate from different issues) keeps the old one."""
        try:
            self.ssl_context = server_context(self.cfg.tls_cert, self.cfg.tls_key, self.cfg.client_ca)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            log.error("kept the current certificate: %s or %s does not load: %s", self.cfg.tls_cert,
                      self.cfg.tls_key, exc)
            audit.record("reload", ok=False, reason=str(exc))
            return False
        log.info("now presenting the certificate in %s", self.cfg.tls_cert)
        audit.record("reload", ok=True)
        return True

    def close_superseded(self) -> int:
        """Close the connections made with a certificate that is now superseded (what they run is cancelled).
        In the background: a peer that never answers the close must not hold up whoever superseded it."""
        stale = [s for s in self.sessions if self.superseded.refuses(s.cert)]
        for session in stale:
            self._close_superseded(session)
        return len(stale)

    def _close_superseded(self, session: Session) -> None:
        audit.record("closed", peer=session.peer, addr=session.addr, reason="client certificate superseded")
        self.track(asyncio.get_running_loop().create_task(session.ws.close(1008, "client certificate superseded")))

    def health(self, op_id) -> dict:
        return {"op": "result", "id": op_id, "ok": True, "node": self.node, "version": __version__,
                "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
                "uptime_s": round(time.monotonic() - self.started, 1), "load": list(os.getloadavg())}

    def _check_identity(self, connection, request):
        ssl_object = connection.transport.get_extra_info("ssl_object")
        who = peer_identity(ssl_object)
        peer = connection.remote_address
        addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        if who not in self.allowed:
            audit.record("refused", addr=addr, peer=who, reason="client identity not on the allow-list")
            return connection.respond(HTTPStatus.FORBIDDEN, f"client identity {who!r} is not allowed\n")
        if self.superseded.refuses(ClientCertificate.of(ssl_object, who)):
            audit.record("refused", addr=addr, peer=who, reason="client certificate superseded by a newer one")
            return connection.respond(HTTPStatus.FORBIDDEN, f"this client certificate for {who!r} was superseded "
                                      "by a newer one for the same name\n")
        offered = {p.strip() for v in request.headers.get_all("Sec-WebSocket-Protocol") for p in v.split(",")}
        if SUBPROTOCOL not in offered:
            audit.record("refused", addr=addr, peer=who, reason="protocol version not offered")
            return connection.respond(HTTPStatus.BAD_REQUEST,
                                      f"this agent speaks {SUBPROTOCOL}; offer it in Sec-WebSocket-Protocol\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        who = peer_identity(ws.transport.get_extra_info("ssl_object"))
        addr = "{}:{}".format(*ws.remote_address[:2])
        audit.record("connect", peer=who, addr=addr)
        started = time.monotonic()
        session = Session(ws, self, who, addr, ClientCertificate.of(ws.transport.get_extra_info("ssl_object"), who))
        self.sessions.add(session)
        if self.superseded.refuses(session.cert):  # superseded while this one was still in its handshake
            self._close_superseded(session)
        try:
            await session.run()
        finally:
            self.sessions.discard(session)
        audit.record("disconnect", peer=who, addr=addr, duration_ms=int((time.monotonic() - started) * 1000))

    async def serve(self, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None) -> None:
        removed = self.journal.recover()
        if removed:
            log.warning("cleaned %d partial uploads from a previous run", removed)
        host, port = self.cfg.listen
        agent = self

        class Conn(TLSGatedConnection):
            pass
        Conn.agent = agent

        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        handlers = {signal.SIGTERM: stop.set, signal.SIGINT: stop.set, signal.SIGHUP: self.reload_identity}
        for sig, handler in handlers.items():
            try:
                loop.add_signal_handler(sig, handler)
            except (RuntimeError, ValueError):
                pass  # not the main thread (tests)
        async with serve(self._handle, host, port, create_connection=Conn, process_request=self._check_identity,
                         subprotocols=[SUBPROTOCOL], max_size=MAX_FRAME, compression=None,
                         ping_interval=30, ping_timeout=30, max_queue=8, server_header=None) as server:
            bound = [s.getsockname() for s in server.sockets]
            log.info("kubenest-agent %s serving %s on %s", __version__, SUBPROTOCOL, bound)
            self.bound = bound
            if ready is not None:
                ready.set()
            try:
                await stop.wait()
            finally:
                self.warm.stop()
