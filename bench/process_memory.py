"""Peak memory of a process and everything it starts (the operator and its ansible-runner children), sampled
from /proc while a benchmark step runs."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.background import Repeating

PROC = Path("/proc")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in PROC.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def tree_rss_bytes(pid: int) -> int:
    """Summed RSS of `pid` and its descendants (shared pages counted in each, so an upper bound)."""
    tree, todo, total = _children(), [pid], 0
    page = os.sysconf("SC_PAGE_SIZE")
    while todo:
        current = todo.pop()
        try:
            total += int((PROC / str(current) / "statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        todo.extend(tree.get(current, []))
    return total


class PeakSampler(Repeating):
    """with PeakSampler(pid) as peak: ...; peak.bytes is the highest tree RSS seen every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.5):
        super().__init__(interval)
        self.pid, self.bytes = pid, 0

    def step(self) -> None:
        self.bytes = max(self.bytes, tree_rss_bytes(self.pid))
