"""HTTP GETs against sandbox workloads, retried while a Service or pod is still coming up."""

from __future__ import annotations

import time
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
