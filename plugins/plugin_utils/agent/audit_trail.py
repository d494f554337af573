"""The agents' audit lines, kept on the controller: one JSON-lines file per agent in an audit directory.

A node handed to a tenant is not trusted with its own record: a root process there could rewrite the agent's
audit file or journal. The connection helper takes the lines the agent keeps in memory (the agent's `audit`
operation) when it connects and before it leaves, and appends them here with the node's name, so what a
controller did on a node, and who else tried to connect, is kept where the tenant cannot reach. A cursor per
agent (its start and last line number, and the last line taken of each of its recent starts) makes each line
arrive once, even should answers of two starts alternate; lines the agent dropped before anyone asked, or lost when
it restarted, are recorded as an `audit_gap` line, never passed over in silence.

Readers (the operator ships the lines to its own log) take the lines with `drain`, under the same lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# How many starts of an agent the cursor remembers the last line of.
KEEP_STARTS = 16


def record_name(node: str) -> str:
    """The file stem for a node: its name with anything outside [A-Za-z0-9._-] replaced."""
    return _UNSAFE.sub("_", node) or "_"


class AuditRecord:
    def __init__(self, directory: str | os.PathLike, node: str):
        self.directory = Path(directory)
        self.node = node
        stem = record_name(node)
        self.lines_path = self.directory / f"{stem}.jsonl"
        self.cursor_path = self.directory / f"{stem}.cursor"
        self.lock_path = self.directory / f"{stem}.lock"

    @contextlib.contextmanager
    def _locked(self):
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def cursor(self) -> tuple[str | None, int]:
        """(the agent start whose lines were taken last, the last line number taken)."""
        return self._state()[:2]

    def _state(self) -> tuple[str | None, int, dict[str, int]]:
        try:
            data = json.loads(self.cursor_path.read_text())
            boot, last = data.get("boot"), int(data.get("last", 0))
            seen = {str(b): int(n) for b, n in (data.get("seen") or {}).items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return None, 0, {}
        if isinstance(boot, str):
            seen.setdefault(boot, last)
        return boot, last, seen

    def append(self, asked: tuple[str | None, int], described: dict, payload: bytes) -> None:
        """Keep one answer of the agent's `audit` operation, asked with cursor `asked`, and move the cursor past
        it. Whatever was taken of the answer's start before (by another helper meanwhile, or before another start
        answered in between) is not kept twice."""
        boot = described.get("boot")
        with self._locked():
            _boot, _last, seen = self._state()
            known = seen.get(boot)
            entries = []
            if known is None:
                lost = described.get("missed") or described.get("restarted")
                missed = described.get("missed", 0)
            else:  # lines of this start were taken before: missed only what was dropped since
                first = described.get("first")
                missed = max(0, first - known - 1) if isinstance(first, int) else 0
                lost = missed > 0
            if lost:
                entries.append({"ts": round(time.time(), 3), "event": "audit_gap", "boot": boot, "missed": missed,
                                "restarted": bool(described.get("restarted")) and known is None})
            for raw in bytes(payload).splitlines():
                try:
                    entry = json.loads(raw)
                except ValueError:
                    entry = None
                if not isinstance(entry, dict):
                    entry = {"event": "unreadable", "line": raw.decode(errors="replace")}
                elif known is not None and isinstance(entry.get("seq"), int) and entry["seq"] <= known:
                    continue
                entries.append(entry)
            if entries:
                # Our node name and the start we asked about, never what a line says of itself: an agent replaced
                # by a tenant's root could otherwise write lines for other nodes.
                data = "".join(json.dumps({**e, "node": self.node, "boot": boot}, separators=(",", ":"),
                                          ensure_ascii=False) + "\n" for e in entries).encode()
                fd = os.open(self.lines_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            last = max(described.get("last", 0), known or 0)
            seen.pop(boot, None)
            seen[boot] = last  # the most recent start last, the oldest dropped first
            seen = dict(list(seen.items())[-KEEP_STARTS:])
            tmp = self.cursor_path.with_name(self.cursor_path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump({"boot": boot, "last": last, "seen": seen}, fh)
            os.replace(tmp, self.cursor_path)


def drain(directory: str | os.PathLike) -> list[dict]:
    """Take every kept line out of `directory` (the cursors stay), oldest first per node."""
    taken = []
    directory = Path(directory)
    if not directory.is_dir():
        return taken
    for path in sorted(directory.glob("*.jsonl")):
        record = AuditRecord(directory, path.stem)
        with record._locked():
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            path.unlink()
        for raw in data.splitlines():
            with contextlib.suppress(ValueError):
                taken.append(json.loads(raw))
    return taken
