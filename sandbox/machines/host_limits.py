"""Kernel limits of this host that its machines share.

inotify instances are counted per user, and every machine's root is this host's root: each containerd, kubelet
and systemd inside takes some, and the default of 128 runs out with a few machines — containerd's CRI plugin then
fails to start ("couldn't initialize inotify: too many open files") and the node reports its runtime down.
Limits are only ever raised, never lowered.
"""

from __future__ import annotations

from pathlib import Path

from .errors import SandboxError

MINIMUMS = {
    "fs/inotify/max_user_instances": 1024,
    "fs/inotify/max_user_watches": 524288,
}
PROC_SYS = Path("/proc/sys")


def raise_limits(proc_sys: Path = PROC_SYS) -> dict[str, int]:
    """Raise each limit below its minimum; returns what was changed (name -> new value)."""
    changed = {}
    for name, minimum in MINIMUMS.items():
        path = proc_sys / name
        try:
            current = int(path.read_text().split()[0])
            if current < minimum:
                path.write_text(f"{minimum}\n")
                changed[name] = minimum
        except (OSError, ValueError) as exc:
            raise SandboxError(f"cannot raise {path} to {minimum} for the machines: {exc}") from None
    return changed
