"""A local HTTP/1.1 server answering GETs from a function: the stand-in for an API server in unit tests of the
clients (retries, kept-alive connections). It keeps connections open as an API server does, and records the paths
asked and the connections they came over."""

from __future__ import annotations

import contextlib
import http.server
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

# answer(path) -> (status, extra headers, JSON body)
Answer = Callable[[str], tuple[int, dict[str, str], Any]]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        server: ScriptedServer = self.server  # type: ignore[assignment]
        server.seen.append(self.path)
        server.connections.add(self.client_address)
        status, headers, body = server.answer(self.path)
        data = json.dumps(body).encode()
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        del args


class ScriptedServer(http.server.ThreadingHTTPServer):
    """tls: a server-side context to answer over TLS (https) instead of plain HTTP."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer = answer
        self.tls = tls
        self.seen: list[str] = []
        self.connections: set[tuple[str, int]] = set()

    def get_request(self):
        sock, address = super().get_request()
        return (self.tls.wrap_socket(sock, server_side=True) if self.tls else sock), address

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.server_port}"


@contextlib.contextmanager
def scripted_server(answer: Answer, tls: ssl.SSLContext | None = None) -> Iterator[ScriptedServer]:
    server = ScriptedServer(answer, tls)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
