"""The rotating sample of the slow end-to-end tests: `make test` runs one turn of them per commit, `make test-long`
all of them.

Each slow test has a name and what it costs (COSTS: seconds on the 2-core development machine, measured with
`make test-long`). The names are packed into turns of at most BUDGET_S seconds, the costliest first, each into the
first turn it fits; a test dearer than the budget is a turn of its own. A commit takes the turn of its number on
its branch (`git rev-list --count HEAD`) modulo the number of turns, so successive commits take successive turns,
every slow test comes round within len(turns()) commits, and no commit pays for more than one turn: what the
sample adds to `make test` stays within the budget, whichever commit it is. `KUBENEST_ROTATION=<n>` takes the turn
of commit number n (to rerun what CI ran), and every run prints what it took, so a failure names its test.

A slow test is a point of a matrix (`params`) or a scenario of its own (`turn`); both refuse a name without a
cost, so a new slow test is priced where the turns are made.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# Seconds each on the 2-core development machine, nothing else running (make test-long, 2026-12-07; the matrices'
# points from make test's own runs), fixtures of its module included where the test would be the only one of its
# module to run. make test runs beside the machine modules of the other worker: there a turn takes about a quarter
# longer.
COSTS: Mapping[str, int] = {
    # A killed operator at each point of the promotion and the return (tests/e2e/test_operator_kills.py).
    **{f"operator-kill[{point}]": 150 for point in ("Cordon-pods", "Delete-cluster", "Start-kubelet", "Wait-tenant")},
    # A fault at each step of a promotion, and of a return (tests/e2e/test_promotion_faults.py).
    **{f"promote-fault[{step}]": 45 for step in (
        "Drain", "Stash", "Images", "Reset", "RemoveHostNode", "Isolate", "ControlPlane", "Token", "NodeFiles",
        "Kubelet", "Register", "PodNetwork", "Ready", "Occupied")},
    **{f"return-fault[{step}]": 45 for step in (
        "Returning", "TenantDrain", "HostRejoin", "HostWipe", "HostRestore", "HostKubelet", "HostReady",
        "AgentIdentity", "HostRelease")},
    # Whole life cycles that repeat what other tests of make test show piece by piece.
    "awx-life-cycle": 255,
    "molecule-node-promote": 95,
    "control-plane-fails-while-a-node-is-prepared": 50,
    # The slowest scenarios, each showing things no other test of make test shows.
    "ca-rotation": 325,
    "node-count-up-and-down": 300,
    "two-api-servers-through-a-lost-pod-and-a-roll": 230,
    "two-clusters-race-for-one-node": 165,
    "certificate-renewal": 165,
    "plain-playbook-with-the-globalnodes-inventory": 155,
    "operator-upgrade": 120,
    "operator-replica-deleted-mid-run": 100,
    "three-etcd-members-rolled-frozen-and-one-lost": 110,
    # Modules whose tests take one turn together (one fixture between them).
    "control-plane-placement": 200,  # tests/e2e/test_placement.py
    "machine-reboots": 160,  # tests/e2e/test_reboots.py
    # A module on machines of its own (tests/e2e/test_kubeadm_host.py): it runs on the other worker, so it adds
    # its machines' load under the sandbox's tests rather than its time.
    "kubeadm-host": 420,
}
# What one commit's turn may add to make test. make test's end-to-end tier took 40 min with a 360 s turn that cost
# 617 s beside the other worker (2026-12-07, turn 5): 240 s keeps the dearest turn near 7 minutes.
BUDGET_S = 240


def commit_number() -> int:
    """The number the turn is taken by: $KUBENEST_ROTATION, else the count of commits up to HEAD."""
    forced = os.environ.get("KUBENEST_ROTATION", "").strip()
    if forced:
        try:
            return int(forced)
        except ValueError:
            raise ValueError(f"KUBENEST_ROTATION must be a whole number, not {forced!r}") from None
    proc = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=False)
    return int(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip().isdigit() else 0


def turns(costs: Mapping[str, int] = COSTS, budget: int = BUDGET_S) -> list[tuple[str, ...]]:
    """The names packed into turns of at most `budget` seconds: the costliest first (then by name, so every
    checkout packs the same), each into the first turn with room for it."""
    if budget < 1:
        raise ValueError(f"the budget must be at least 1 s, not {budget}")
    packed: list[list[str]] = []
    room: list[int] = []
    for name in sorted(costs, key=lambda n: (-costs[n], n)):
        cost = costs[name]
        if cost < 1:
            raise ValueError(f"{name!r} costs {cost} s: every slow test costs something")
        index = next((i for i, left in enumerate(room) if left >= cost), None)
        if index is None:
            packed.append([])
            room.append(budget)
            index = len(packed) - 1
        packed[index].append(name)
        room[index] -= cost
    return [tuple(turn) for turn in packed]


def taken(number: int | None = None) -> tuple[str, ...]:
    """The turn of commit `number` (this checkout's when None)."""
    every = turns()
    return every[(commit_number() if number is None else number) % len(every)]


def marks(name: str) -> tuple[pytest.MarkDecorator, ...]:
    """`long` always; `sampled` too on the commits whose turn holds `name`."""
    if name not in COSTS:
        raise ValueError(f"{name!r} has no cost in tests/support/rotation.py COSTS: price it there")
    return (pytest.mark.long, pytest.mark.sampled) if name in taken() else (pytest.mark.long,)


def params(points: Sequence, ids: Sequence[str], matrix: str) -> list:
    """pytest params of a slow matrix: point `id` is the slow test `matrix[id]`."""
    if len(ids) != len(points):
        raise ValueError(f"{len(points)} points but {len(ids)} ids")
    return [pytest.param(*(point if isinstance(point, tuple) else (point,)), id=name, marks=marks(f"{matrix}[{name}]"))
            for point, name in zip(points, ids, strict=True)]


def turn(name: str):
    """Decorator for a slow scenario of its own."""
    chosen = marks(name)

    def decorate(test):
        for mark in chosen:
            test = mark(test)
        return test
    return decorate
