"""Controller-side connection holder: one persistent websocket per agent, shared by Ansible workers.

Ansible forks a worker per task, so a connection plugin cannot keep a socket open across tasks by itself.
Like OpenSSH's ControlMaster, the first worker starts this process; it keeps the mutual-TLS websocket
open, listens on a private Unix socket, relays frames (renumbering operation ids per local client),
reconnects when the websocket dropped between tasks, and exits after an idle period.

Greeting: every local client gets MUX_GREETING before anything else. A mux that is on its way out (idle,
or told to shut down) first removes its socket path and then closes new connections without greeting them, so
a worker that reached it a moment too late sees the close before it has sent anything, and starts a new mux
instead of losing its task (see mux_client.connect_or_spawn).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import os
import struct
import sys
import time

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import (
    AgentUnreachable,
    describe_connect_error,
)
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.protocol import (
    MAX_FRAME,
    MUX_GREETING,
    OPEN_OPS,
    SUBPROTOCOL,
    TERMINAL_REPLIES,
    ProtocolError,
    decode,
    encode,
)

log = logging.getLogger("kubenest.mux")
_LEN = struct.Struct(">I")


class Mux:
    def __init__(self, args):
        self.args = args
        self.ws = None
        self.reader_task: asyncio.Task | None = None
        self.connect_lock = asyncio.Lock()
        self.clients: dict[int, asyncio.StreamWriter] = {}
        self.routes: dict[str, tuple[int, object]] = {}
        self.numbers = itertools.count(1)
        self.last_activity = time.monotonic()
        self.stop = asyncio.Event()
        self.socket_inode: int | None = None
        self.peer_name: str | None = None  # the node its certificate names (see _take_audit)

    def retire(self) -> None:
        """Stop taking clients: the socket path goes first (if it is still ours), so new workers start a new mux."""
        if self.stop.is_set():
            return
        try:
            if self.socket_inode is not None and os.stat(self.args.socket).st_ino == self.socket_inode:
                os.unlink(self.args.socket)
        except FileNotFoundError:
            pass
        self.stop.set()

    async def connect(self) -> None:
        from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import (
            client_context,
            normalize_pins,
            peer_common_name,
            pin_mismatch,
        )
        from websockets.asyncio.client import connect

        a = self.args
        try:
            pins = normalize_pins(a.pin)
        except ValueError as exc:
            raise AgentUnreachable(str(exc)) from None
        ctx = client_context(a.ca, a.cert, a.key)
        try:
            self.ws = await connect(a.uri, ssl=ctx, server_hostname=a.server_name, subprotocols=[SUBPROTOCOL],
                                    max_size=MAX_FRAME, compression=None, open_timeout=a.connect_timeout,
                                    max_queue=8, ping_interval=20, ping_timeout=20, close_timeout=2)
        except Exception as exc:
            raise AgentUnreachable(describe_connect_error(exc, a.uri)) from None
        ssl_object = self.ws.transport.get_extra_info("ssl_object")
        refused = pin_mismatch(ssl_object, pins, a.uri)
        if refused:
            await self.ws.close()
            self.ws = None
            raise AgentUnreachable(refused)
        self.peer_name = peer_common_name(ssl_object)
        if a.superseded_cert:
            await self._supersede(a.superseded_cert)
        if a.audit_dir:
            await self._take_audit()
        self.reader_task = asyncio.create_task(self._read_agent(self.ws))
        log.info("connected to %s", a.uri)

    async def _supersede(self, cert_file: str) -> None:
        """Before any task runs: the agent refuses, from now on, the certificate in `cert_file` and every other
        one for our name issued no later than it. An agent too old to know the operation says so; the run goes
        on, and the log tells."""
        from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import issued_after, same_subject

        try:
            before = issued_after(cert_file)
            ours = same_subject(cert_file, self.args.cert)
        except (OSError, ValueError) as exc:
            await self.ws.close()
            self.ws = None
            raise AgentUnreachable(f"the superseded client certificate {cert_file}: {exc}") from None
        if not ours:
            log.warning("not superseding %s: it is not a certificate for our own name and issuer", cert_file)
            return
        await self.ws.send(encode({"op": "supersede", "id": "mux-supersede", "before": before}))
        try:
            header, _payload = await self._answer("mux-supersede")
        except Exception as exc:
            await self.ws.close()
            self.ws = None
            raise AgentUnreachable(f"the agent at {self.args.uri} did not answer the supersede request: "
                                   f"{exc or type(exc).__name__}") from None
        if header.get("op") == "result":
            if header.get("changed"):
                log.info("the agent at %s now refuses client certificates for this name issued before %s",
                         self.args.uri, header.get("before"))
        else:
            log.warning("the agent at %s cannot supersede older client certificates: %s", self.args.uri,
                        header.get("message") or header)

    async def _take_audit(self) -> None:
        """Take the agent's audit lines since our cursor off the node (see audit_trail). Only while nothing else
        reads the websocket: right after connecting, and on the way out. A failure here loses no line (the
        cursor stays) and fails no task. Kept under the name the agent's certificate carries: a task delegated
        from one inventory host to another node's agent still lands in that node's record."""
        from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.audit_trail import AuditRecord

        record = AuditRecord(self.args.audit_dir, self.peer_name or self.args.audit_node or self.args.server_name)
        try:
            for _round in range(64):  # 64 MiB at most per connection; the rest waits for the next one
                asked = record.cursor()
                await self.ws.send(encode({"op": "audit", "id": "mux-audit", "boot": asked[0], "after": asked[1]}))
                header, payload = await self._answer("mux-audit")
                if header.get("op") != "result" or not isinstance(header.get("boot"), str):
                    log.warning("the agent at %s keeps its audit lines to itself: %s", self.args.uri,
                                header.get("message") or header)
                    return
                record.append(asked, header, payload)
                if not header.get("more"):
                    return
        except Exception as exc:
            log.warning("could not take the audit lines of the agent at %s: %s", self.args.uri,
                        exc or type(exc).__name__)

    async def _answer(self, op_id: str):
        """The agent's answer to our own request `op_id`, read while nothing else reads the websocket; frames of
        workers' operations that were still running (on the way out) are passed over."""
        deadline = time.monotonic() + self.args.connect_timeout
        while True:
            header, payload = decode(await asyncio.wait_for(self.ws.recv(), max(deadline - time.monotonic(), 0.01)))
            if header.get("id") == op_id:
                return header, payload

    async def ensure_connected(self) -> None:
        from websockets.protocol import State

        async with self.connect_lock:
            if self.ws is None or self.ws.state is not State.OPEN:
                await self.connect()

    async def _read_agent(self, ws) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for message in ws:
                header, payload = decode(message)
                gid = header.get("id")
                route = self.routes.get(gid)
                if route is None:
                    continue
                number, orig = route
                if header["op"] in TERMINAL_REPLIES:
                    del self.routes[gid]
                header["id"] = orig
                await self._to_client(number, encode(header, payload))
        except (ConnectionClosed, ProtocolError, OSError) as exc:
            log.warning("connection to the agent lost: %s", exc)
        finally:
            if self.ws is ws:
                self.ws = None
            for gid, (number, orig) in list(self.routes.items()):
                del self.routes[gid]
                await self._to_client(number, encode({"op": "error", "id": orig, "code": "connection_lost",
                                                      "message": f"connection to the agent at {self.args.uri} lost"}))

    async def _to_client(self, number: int, frame: bytes) -> None:
        writer = self.clients.get(number)
        if writer is None:
            return
        try:
            writer.write(_LEN.pack(len(frame)))
            writer.write(frame)
            await writer.drain()
        except (ConnectionError, OSError):
            pass

    async def handle_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.stop.is_set():  # reached on the way out: closed ungreeted, the worker starts a new mux
            writer.close()
            return
        number = next(self.numbers)
        self.clients[number] = writer
        self.last_activity = time.monotonic()
        try:
            await self._to_client(number, MUX_GREETING)
            while True:
                try:
                    (size,) = _LEN.unpack(await reader.readexactly(_LEN.size))
                    if size > MAX_FRAME + 1024:
                        return
                    frame = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.last_activity = time.monotonic()
                await self._forward(number, frame)
        finally:
            del self.clients[number]
            await self._abandon(number)
            writer.close()
            self.last_activity = time.monotonic()

    async def _forward(self, number: int, frame: bytes) -> None:
        try:
            header, payload = decode(frame)
        except ProtocolError as exc:
            await self._to_client(number, encode({"op": "error", "id": None, "code": exc.code, "message": exc.message}))
            return
        if header["op"] == "mux_shutdown":
            self.retire()
            return
        orig = header.get("id")
        gid = f"{number}:{orig}"
        header["id"] = gid
        if header["op"] in OPEN_OPS:
            try:
                await self.ensure_connected()
            except AgentUnreachable as exc:
                await self._to_client(number, encode({"op": "error", "id": None, "code": "unreachable",
                                                      "message": str(exc)}))
                return
            self.routes[gid] = (number, orig)
        ws = self.ws
        if ws is None:
            if header["op"] != "cancel":
                await self._to_client(number, encode({"op": "error", "id": orig, "code": "connection_lost",
                                                      "message": f"connection to the agent at {self.args.uri} lost"}))
            return
        from websockets.exceptions import ConnectionClosed
        try:
            await ws.send(encode(header, payload))
        except ConnectionClosed:
            pass  # _read_agent reports it to every open operation

    async def _abandon(self, number: int) -> None:
        """A worker went away mid-operation (killed task, timeout): cancel what it left running."""
        for gid, (owner, _orig) in list(self.routes.items()):
            if owner == number:
                del self.routes[gid]
                if self.ws is not None:
                    try:
                        await self.ws.send(encode({"op": "cancel", "id": gid}))
                    except Exception:  # already gone: nothing left to cancel
                        pass

    async def watch_idle(self) -> None:
        tick = min(1.0, max(0.05, self.args.idle_timeout / 4))
        while not self.stop.is_set():
            await asyncio.sleep(tick)
            idle = time.monotonic() - self.last_activity
            if not self.clients and not self.routes and idle > self.args.idle_timeout:
                log.info("idle for %.0fs, exiting", idle)
                self.retire()

    async def run(self) -> int:
        try:
            await self.connect()
        except AgentUnreachable as exc:
            print(f"error: {exc}", flush=True)
            return 1
        path = self.args.socket
        old_umask = os.umask(0o077)
        try:
            server = await asyncio.start_unix_server(self.handle_client, path, limit=MAX_FRAME + 1024)
        finally:
            os.umask(old_umask)
        self.socket_inode = os.stat(path).st_ino
        print("ready", flush=True)
        _detach_stdout()
        watcher = asyncio.create_task(self.watch_idle())
        async with server:
            await self.stop.wait()
        watcher.cancel()
        ws = self.ws
        if ws is not None:
            if self.args.audit_dir and self.reader_task is not None:
                self.reader_task.cancel()  # nothing is routed any more; the last lines are read here
                with contextlib.suppress(asyncio.CancelledError):
                    await self.reader_task
                self.ws = ws
                await self._take_audit()
            await ws.close()
        return 0


def _detach_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kubenest mux")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--server-name", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--pin", default="", help="accepted agent certificate SHA-256s, comma-separated")
    parser.add_argument("--superseded-cert", default="",
                        help="a predecessor client certificate the agent is to refuse, with every older one")
    parser.add_argument("--audit-dir", default="",
                        help="keep the agent's audit lines in this directory (see audit_trail)")
    parser.add_argument("--audit-node", default="", help="the node's name in the audit record")
    parser.add_argument("--connect-timeout", type=float, default=10)
    parser.add_argument("--idle-timeout", type=float, default=60)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s mux[%(process)d] %(levelname)s: %(message)s")
    return asyncio.run(Mux(args).run())


if __name__ == "__main__":
    sys.exit(main())
