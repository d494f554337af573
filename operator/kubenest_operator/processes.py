"""The processes of a run: whatever names its private data dir on the command line, and their descendants.

ansible-playbook and its workers carry the run's inventory and extravars paths in their arguments; the
modules they start do not, but descend from them. Linux /proc only, like the operator's container.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _ppid(pid: int) -> int | None:
    try:
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def processes_of(directory: Path) -> list[int]:
    """Processes whose command line names `directory`, with all their descendants."""
    marker = f"{directory}/".encode()
    parents: dict[int, int | None] = {}
    roots = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        parents[pid] = _ppid(pid)
        try:
            if marker in (entry / "cmdline").read_bytes():
                roots.add(pid)
        except OSError:
            continue
    found, frontier = set(roots), set(roots)
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier and pid not in found}
        found |= frontier
    return sorted(found)


def end_processes(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL what is left after `grace` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [pid for pid in alive if Path(f"/proc/{pid}").exists() and not _is_zombie(pid)]
        pids = alive
        if not pids:
            return


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
