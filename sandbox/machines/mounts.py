"""Mounts on the host below a directory, so teardown can undo any that were left behind."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def under(directory: Path) -> list[Path]:
    """Mount points at or below `directory`, deepest first."""
    base = directory.resolve()
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mountpoint = Path(_unescape(line.split()[4]))
        if mountpoint == base or base in mountpoint.parents:
            found.append(mountpoint)
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_all(directory: Path) -> list[str]:
    """Unmount everything below `directory`; returns what could not be unmounted."""
    failed = []
    for mountpoint in under(directory):
        if subprocess.run(["umount", "-R", str(mountpoint)], capture_output=True, check=False).returncode != 0:
            # Still busy: detach it so the tree can go; the kernel drops it once its last user is gone.
            if subprocess.run(["umount", "-R", "-l", str(mountpoint)], capture_output=True,
                              check=False).returncode != 0:
                failed.append(str(mountpoint))
    return failed
