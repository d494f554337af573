"""One JSON line per operation or refused connection: who, what, outcome, duration. Never contents.

Lines also stay in memory, numbered within this start of the agent (`boot`, `seq`), so that a controller can take
them off the node (the `audit` operation): a root process on a node given to a tenant can rewrite the file and the
journal there, but not what a controller has already taken. The memory holds the last KEEP lines; a controller
that comes back later learns how many it missed.
"""

from __future__ import annotations

import collections
import json
import logging
import time
import uuid

log = logging.getLogger("kubenest_agent.audit")
KEEP = 20000
BOOT = uuid.uuid4().hex
_last = 0  # the number of the last line written
_kept: collections.deque[tuple[int, str]] = collections.deque(maxlen=KEEP)


def record(event: str, **fields) -> None:
    global _last
    _last += 1
    entry = {"ts": round(time.time(), 3), "event": event, "seq": _last}
    entry.update({k: v for k, v in fields.items() if v is not None})
    line = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
    _kept.append((entry["seq"], line))
    log.info(line)


def since(boot: str | None, after: int, max_bytes: int) -> tuple[dict, bytes]:
    """The kept lines after `after` (of start `boot`; any other start: all of them), at most `max_bytes` of them:
    a header describing them and the lines, newline-terminated."""
    same_boot = boot == BOOT
    start = after if same_boot else 0
    first = _kept[0][0] if _kept else _last + 1
    lines, size = [], 0
    for seq, line in _kept:
        if seq <= start:
            continue
        data = line.encode() + b"\n"
        if lines and size + len(data) > max_bytes:
            break
        lines.append((seq, data))
        size += len(data)
    header = {"boot": BOOT, "first": first, "count": len(lines),
              "last": lines[-1][0] if lines else (start if same_boot else 0),
              "more": bool(lines) and lines[-1][0] < _last,
              # Lines of this start the controller will never see: dropped from memory before it asked again.
              "missed": max(0, first - start - 1) if same_boot else first - 1,
              "restarted": boot is not None and not same_boot}
    return header, b"".join(data for _seq, data in lines)
