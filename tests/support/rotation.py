"""A rotating sample of a slow matrix: `make test` runs a few of its points on each commit, `make test-long` all.

The points a run takes follow from the commit's number on its branch (`git rev-list --count HEAD`), so
successive commits take successive points and a matrix of N points taken K at a time is covered whole within
ceil(N / K) commits. `KUBENEST_ROTATION=<n>` picks the sample of commit number n (to rerun what CI ran), and
every run prints what it took, so a failure names its point.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def commit_number() -> int:
    """The number the sample is taken by: $KUBENEST_ROTATION, else the count of commits up to HEAD."""
    forced = os.environ.get("KUBENEST_ROTATION", "").strip()
    if forced:
        try:
            return int(forced)
        except ValueError:
            raise ValueError(f"KUBENEST_ROTATION must be a whole number, not {forced!r}") from None
    proc = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=False)
    return int(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip().isdigit() else 0


def taken(count: int, per_run: int = 1, number: int | None = None) -> list[int]:
    """Indices of the `per_run` points of a matrix of `count` that the run of commit `number` takes, in order."""
    if per_run < 1:
        raise ValueError(f"per_run must be at least 1, not {per_run}")
    if count <= 0:
        return []
    number = commit_number() if number is None else number
    return sorted({(number * per_run + i) % count for i in range(min(per_run, count))})


def sample(points: Sequence, per_run: int = 1, number: int | None = None) -> list:
    """The points of `points` that the run of commit `number` takes, in the matrix's order."""
    return [points[i] for i in taken(len(points), per_run, number)]


def params(points: Sequence, ids: Sequence[str], per_run: int = 1) -> list:
    """pytest params of a `long` matrix: every point is `long` (make test-long runs them all) and the run's sample
    is also `sampled`, which make test runs (tests/e2e/conftest.py)."""
    if len(ids) != len(points):
        raise ValueError(f"{len(points)} points but {len(ids)} ids")
    chosen = set(taken(len(points), per_run))
    return [pytest.param(*(point if isinstance(point, tuple) else (point,)), id=name,
                         marks=(pytest.mark.long, pytest.mark.sampled) if index in chosen else pytest.mark.long)
            for index, (point, name) in enumerate(zip(points, ids, strict=True))]


# Long tests that are not points of one matrix but take turns all the same: whole life cycles that repeat what
# other tests of make test show piece by piece.
LIFE_CYCLES = ("awx-life-cycle", "molecule-node-promote", "control-plane-fails-while-a-node-is-prepared")
# The slowest scenarios of the end-to-end tier (two to ten minutes each on a 2-core machine), each showing things
# no other test of make test shows; make test-long runs them all.
SLOW_SCENARIOS = ("node-count-up-and-down", "plain-playbook-with-the-globalnodes-inventory",
                  "two-clusters-race-for-one-node", "certificate-renewal", "operator-replica-deleted-mid-run",
                  "two-api-servers-through-a-lost-pod-and-a-roll", "operator-upgrade", "ca-rotation")
# Both take one turn between them: make test runs one test of TURNS per commit, so each comes round within
# len(TURNS) commits and the tier pays for one of them, never two.
TURNS = LIFE_CYCLES + SLOW_SCENARIOS


def turn(name: str, group: Sequence[str] = LIFE_CYCLES, per_run: int = 1):
    """Decorator for one test of `group`: `long` always, `sampled` too on the commits whose turn it is."""
    if name not in group:
        raise ValueError(f"{name!r} is not one of {list(group)}")
    mine = name in sample(TURNS if name in TURNS else group, per_run)

    def decorate(test):
        test = pytest.mark.long(test)
        return pytest.mark.sampled(test) if mine else test
    return decorate
