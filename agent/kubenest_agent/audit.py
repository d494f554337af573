"""One JSON line per operation or refused connection: who, what, outcome, duration. Never contents."""

from __future__ import annotations

import json
import logging
import time

log = logging.getLogger("kubenest_agent.audit")


def record(event: str, **fields) -> None:
    entry = {"ts": round(time.time(), 3), "event": event}
    entry.update({k: v for k, v in fields.items() if v is not None})
    log.info(json.dumps(entry, separators=(",", ":"), ensure_ascii=False))
