"""Undo what runtimes leave on the host: mounts under a temp dir, cgroups, and hard-coded host paths."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def _mountinfo() -> list[tuple[str, str]]:
    """(mount point, filesystem type) for every mount this process sees."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        separator = fields.index("-")
        mount_point = fields[4].encode().decode("unicode_escape")  # mountinfo octal-escapes spaces and tabs
        mounts.append((mount_point, fields[separator + 1]))
    return mounts


def mounts_below(root: Path) -> list[str]:
    prefix = str(root.resolve()).rstrip("/")
    points = [mount[0] for mount in _mountinfo()]
    return [point for point in points if point == prefix or point.startswith(prefix + "/")]


def unmount_below(root: Path) -> None:
    """Unmount everything at or below `root`, deepest first (kubelet bind-mounts its root dir onto itself)."""
    for point in sorted(set(mounts_below(root)), key=len, reverse=True):
        if subprocess.run(["umount", point], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def cgroup_v1_hierarchies() -> list[Path]:
    return [Path(point) for point, fstype in _mountinfo() if fstype == "cgroup"]


def host_uses_cgroup_v1() -> bool:
    return any((h / "memory.limit_in_bytes").exists() for h in cgroup_v1_hierarchies())


def cgroup_hierarchies() -> list[Path]:
    """v1 hierarchies and, on hybrid hosts, the unified one (runc creates a container's cgroup in both)."""
    return [Path(point) for point, fstype in _mountinfo() if fstype in ("cgroup", "cgroup2")]


def _dirs_deepest_first(top: Path) -> list[Path]:
    dirs = [p for p in [top, *top.rglob("*")] if p.is_dir() and not p.is_symlink()]
    return sorted(dirs, key=lambda p: len(p.parts), reverse=True)


def _rmdir_tree(top: Path) -> list[Path]:
    """rmdir every directory from the leaves up (cgroupfs allows no other removal); returns those that stayed."""
    stuck = []
    for directory in _dirs_deepest_first(top):
        try:
            directory.rmdir()
        except OSError:
            stuck.append(directory)
    return stuck


def remove_cgroup_tree(name: str) -> list[Path]:
    """Remove /<name> and everything below it in every hierarchy; returns the cgroups still in use."""
    stuck = []
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / name.strip("/")
        if top.is_dir():
            stuck.extend(_rmdir_tree(top))
    return stuck


def create_cgroup_v1(name: str) -> None:
    """Create /<name> in every v1 hierarchy; cpuset needs its CPUs and memory nodes copied from the parent."""
    for hierarchy in cgroup_v1_hierarchies():
        path = hierarchy / name.strip("/")
        path.mkdir(exist_ok=True)
        for setting in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / setting).exists() and not (path / setting).read_text().strip():
                (path / setting).write_text((hierarchy / setting).read_text())


class HostPathGuard:
    """Removes, on exit, those of `paths` that did not exist on entry and were created meanwhile.

    With `empty_only`, only empty directories go, for places another runtime may start using meanwhile.
    """

    def __init__(self, *paths: str, empty_only: bool = False):
        self.absent = [Path(p) for p in paths if not Path(p).exists()]
        self.empty_only = empty_only

    def __enter__(self) -> HostPathGuard:
        return self

    def __exit__(self, *exc_info) -> None:
        self.cleanup()

    def created(self) -> list[Path]:
        return [p for p in self.absent if p.exists() or p.is_symlink()]

    def cleanup(self) -> None:
        for path in self.created():
            if self.empty_only:
                _rmdir_tree(path)
            elif path.is_dir() and not path.is_symlink():
                unmount_below(path)
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
