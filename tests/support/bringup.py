"""One host cluster comes up at a time on this machine.

make e2e brings up the sandbox's host cluster on one worker and the kubeadm host on the other (after the
node-machine tests). Two bootstraps at once on a cold 2-core run starved each other (CoreDNS found no Ready node
within its wait), while a bootstrap beside the other's tests does not. The fixtures that bring a host up hold
this lock while they do; a second one waits for the first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

LOCK = Path(os.environ.get("KUBENEST_BRINGUP_LOCK", "/tmp/kubenest-e2e-bringup.lock"))


@contextlib.contextmanager
def one_at_a_time(what: str) -> Iterator[float]:
    """Hold the machine's bring-up lock; yields the seconds waited for it (printed by the caller)."""
    started = time.monotonic()
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        waited = time.monotonic() - started
        if waited > 1:
            print(f"\n{what}: waited {waited:.0f}s for another host cluster's bring-up")
        yield waited
    finally:
        os.close(fd)
