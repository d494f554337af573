"""Waiting for the sandbox to settle between the runs of a benchmark.

A run that starts while the previous one's aftermath still works (a returned node rebuilding its pod network's
datapath, a restarted DNS, pods still stopping) measures that aftermath too. Before each run the benchmarks wait
until the machine's CPU pressure (PSI, the share of the last 10 s in which some task waited for a CPU) is back
near its idle level, for at least a floor and at most a ceiling of seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

PRESSURE = Path("/proc/pressure/cpu")
# An idle sandbox (host cluster, sample virtual cluster) sits at 12-18 % on 2 cores.
QUIET_PERCENT = 25.0


def cpu_pressure() -> float | None:
    """`some avg10` of the machine's CPU pressure, in percent; None without PSI."""
    try:
        first = PRESSURE.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    fields = dict(item.split("=", 1) for item in first.split()[1:])
    return float(fields["avg10"])


def settle(floor_s: float = 10.0, ceiling_s: float = 120.0, quiet: float = QUIET_PERCENT) -> float:
    """Wait at least `floor_s`, then until the CPU pressure is at or below `quiet` (or `ceiling_s` has passed);
    returns the seconds waited. Without PSI it waits `floor_s` only."""
    started = time.monotonic()
    time.sleep(floor_s)
    while time.monotonic() - started < ceiling_s:
        pressure = cpu_pressure()
        if pressure is None or pressure <= quiet:
            break
        time.sleep(1)
    return time.monotonic() - started
