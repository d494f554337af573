"""Journal of half-written upload files, so a killed agent cleans them up when it starts again."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


class InflightJournal:
    def __init__(self, state_dir: str | os.PathLike):
        self.dir = Path(state_dir) / "inflight"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _entry(self, temp_path: str) -> Path:
        return self.dir / hashlib.sha256(os.fsencode(temp_path)).hexdigest()

    def add(self, temp_path: str) -> None:
        entry = self._entry(temp_path)
        entry.write_bytes(os.fsencode(temp_path))

    def remove(self, temp_path: str) -> None:
        try:
            self._entry(temp_path).unlink()
        except FileNotFoundError:
            pass

    def recover(self) -> int:
        """Delete every temp file a previous run left behind; return how many were removed."""
        removed = 0
        for entry in self.dir.iterdir():
            path = entry.read_bytes()
            try:
                os.unlink(path)
                removed += 1
                log.warning("removed partial upload %s left by a previous run", os.fsdecode(path))
            except FileNotFoundError:
                pass
            entry.unlink()
        return removed
