"""HTTP against sandbox workloads and API servers: GETs retried while a Service or pod is still coming up, and JSON
requests answered with their status, errors included."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request


def get_text(url: str, within: float = 60, interval: float = 1) -> str:
    deadline = time.monotonic() + within
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return resp.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(interval)


def json_request(url: str, method: str, context: ssl.SSLContext, token: str | None = None,
                 body: dict | None = None) -> tuple[int, dict]:
    """(status, decoded body) of a JSON request, with `token` as its bearer token when given."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(url, method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")
