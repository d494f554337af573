"""A cgroup per machine in every host hierarchy, below the cgroups of the process that boots it.

nspawn with --keep-unit hands its own cgroup to the container; without one each, every machine's systemd would
claim the same cgroup tree. A machine's cgroup also gives its memory use and every process it holds (nested
containers included), which is what teardown kills.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .errors import SandboxError


def _mounts() -> dict[frozenset, Path]:
    """Controller set -> mountpoint for every cgroup hierarchy; cgroup2 is keyed by the empty set."""
    found: dict[frozenset, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _sep, post = line.partition(" - ")
        fstype, _source, options = (post.split() + ["", ""])[:3]
        mountpoint = Path(pre.split()[4].replace("\\040", " "))
        if fstype == "cgroup2":
            found.setdefault(frozenset(), mountpoint)
        elif fstype == "cgroup":
            known = {"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "net_cls",
                     "net_prio", "perf_event", "hugetlb", "rdma", "misc"}
            controllers = frozenset(o for o in options.split(",") if o in known or o.startswith("name="))
            found.setdefault(controllers, mountpoint)
    return found


def own_cgroup_dirs() -> list[Path]:
    """The directories of this process's cgroups, one per mounted hierarchy."""
    mounts = _mounts()
    dirs = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _hid, controllers, path = line.split(":", 2)
        key = frozenset(c for c in controllers.split(",") if c)
        mountpoint = mounts.get(key)
        if mountpoint is not None:
            dirs.append(mountpoint / path.lstrip("/"))
    return dirs


def create(group: str, machine: str) -> list[str]:
    """Make <own cgroup>/<group>/<machine> in every hierarchy; returns the directories."""
    made = []
    for base in own_cgroup_dirs():
        path = base / group / machine
        for directory in (base / group, path):
            try:
                directory.mkdir(exist_ok=True)
            except OSError as exc:
                raise SandboxError(f"cannot create cgroup {directory}: {exc}") from None
            _inherit_cpuset(directory)
        made.append(str(path))
    return made


def _inherit_cpuset(directory: Path) -> None:
    # A new v1 cpuset cgroup starts with no CPUs and no memory nodes; nothing can join it until they are set.
    for name in ("cpuset.cpus", "cpuset.mems"):
        own = directory / name
        if own.exists() and not own.read_text().strip():
            own.write_text((directory.parent / name).read_text())


def join(dirs: list[str], pid: int | None = None) -> None:
    pid = pid or os.getpid()
    for directory in dirs:
        Path(directory, "cgroup.procs").write_text(str(pid))


def _subtree(directory: Path):
    if not directory.is_dir():
        return []
    return sorted((p for p, _d, _f in os.walk(directory)), key=len, reverse=True)


def pids(dirs: list[str]) -> set[int]:
    found: set[int] = set()
    for directory in dirs:
        for sub in _subtree(Path(directory)):
            try:
                found.update(int(p) for p in Path(sub, "cgroup.procs").read_text().split())
            except (FileNotFoundError, ProcessLookupError):
                continue
    return found


def remove(dirs: list[str], timeout: float = 10) -> None:
    """rmdir each cgroup tree, deepest first; a cgroup is only removable once its last process has been reaped."""
    deadline = time.monotonic() + timeout
    for directory in dirs:
        for sub in _subtree(Path(directory)):
            while True:
                try:
                    os.rmdir(sub)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        raise SandboxError(f"cannot remove cgroup {sub}: {exc}") from None
                    time.sleep(0.2)
        parent = Path(directory).parent
        try:
            parent.rmdir()  # the per-sandbox group, once its last machine is gone
        except OSError:
            pass


def memory_bytes(dirs: list[str]) -> dict[str, int]:
    """usage (RSS + page cache) and rss of the machine's v1 memory cgroup, or {} without one."""
    for directory in dirs:
        usage = Path(directory, "memory.usage_in_bytes")
        if usage.exists():
            stat = dict(line.split() for line in Path(directory, "memory.stat").read_text().splitlines())
            return {"usage": int(usage.read_text()), "rss": int(stat.get("total_rss", 0)),
                    "cache": int(stat.get("total_cache", 0))}
    return {}


def find_groups(group: str, max_depth: int = 4) -> list[str]:
    """Every cgroup named `group` in any hierarchy, wherever the booting process sat (teardown fallback)."""
    found = []
    for mountpoint in _mounts().values():
        base_depth = len(mountpoint.parts)
        for directory, subdirs, _files in os.walk(mountpoint):
            if Path(directory).name == group:
                found.append(directory)
                subdirs.clear()
            elif len(Path(directory).parts) - base_depth >= max_depth:
                subdirs.clear()
    return found
