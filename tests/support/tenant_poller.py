"""A client that reads from a tenant's API every 100 ms and counts what failed.

Each request opens a connection of its own and is not retried: a request that meets a closing API server, a
Service that still points at a gone pod, or no server at all counts as failed, where client libraries would
retry it on a kept-alive connection and hide the gap.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import tempfile
import urllib.parse
from pathlib import Path

from tests.support.background import Requests

PATH = "/api/v1/namespaces/default"
# Seconds a request may take to count as answered where a late answer still serves, as it does a user: kubectl and
# client-go wait without a limit.
USER_TIMEOUT = 10.0


def tls_context(kubeconfig: dict) -> tuple[str, ssl.SSLContext]:
    """(server URL, TLS context with the admin's client certificate) from a kubeconfig with inline data."""
    cluster = kubeconfig["clusters"][0]["cluster"]
    user = kubeconfig["users"][0]["user"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp, "client.crt"), Path(tmp, "client.key")
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        key.chmod(0o600)
        context.load_cert_chain(cert, key)
    return cluster["server"], context


class TenantPoller(Requests):
    """Reads `PATH` every `interval` seconds until stopped; ok, failed (with the first few reasons), the longest
    stretch without an answer in seconds, and when (time.monotonic) it started, each answer came and it stopped.
    A request not answered within `timeout` seconds counts as failed: short where a lost answer should be noticed
    at once, as long as a user's client would wait where an answer that comes late still serves."""

    def __init__(self, kubeconfig: dict, interval: float = 0.1, timeout: float = 2.0):
        super().__init__(interval)
        server, self._context = tls_context(kubeconfig)
        url = urllib.parse.urlsplit(server)
        self._host, self._port = url.hostname, url.port or 443
        self._timeout = timeout

    def attempt(self) -> None:
        connection = http.client.HTTPSConnection(self._host, self._port, context=self._context,
                                                 timeout=self._timeout)
        try:
            connection.request("GET", PATH, headers={"Connection": "close", "Accept": "application/json"})
            response = connection.getresponse()
            body = response.read()
            if response.status != 200 or json.loads(body).get("kind") != "Namespace":
                raise RuntimeError(f"HTTP {response.status}: {body[:120]!r}")
        finally:
            connection.close()
