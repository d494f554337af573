"""End-to-end tests: real machines, real agents, real ansible-playbook."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sandbox.machines.config import REPO_ROOT, from_env
from tests.support import bringup, rotation

SAMPLED: list[str] = []  # the long points of the rotating sample that ran


def pytest_configure(config):
    config.addinivalue_line("markers", "machines: boots systemd-nspawn node machines (root, debootstrap, minutes)")
    config.addinivalue_line("markers", "conformance: runs the upstream conformance suite, after every other test")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    # Groups for `pytest -n 2 --dist loadgroup` (make e2e): everything that shares the default sandbox is one group,
    # on one worker; each module marked `machines` brings up machines of its own (bridge, range, names, state dir)
    # and is a group of its own. pytest-xdist hands out the largest group first, so the sandbox's keeps one worker
    # and the other takes the machine modules one after the other; a host cluster's bring-up waits for another's
    # (tests/support/bringup.py: both bootstrapping at once starved on a cold 2-core run).
    for item in items:
        machines = item.get_closest_marker("machines") is not None
        item.add_marker(pytest.mark.xdist_group(item.module.__name__.rpartition(".")[2] if machines else "sandbox"))
    # The conformance suite's build (e2e.test, its images) runs beside the tier in make test: its tests go last.
    items.sort(key=lambda item: item.get_closest_marker("conformance") is not None)
    if os.environ.get("KUBENEST_LONG") == "1":
        return
    skip = pytest.mark.skip(reason="too long for CI: make test-long (KUBENEST_LONG=1)")
    for item in items:
        if "long" in item.keywords and "sampled" not in item.keywords:
            item.add_marker(skip)


def pytest_runtest_logreport(report):
    # Read from the reports, not the items: with pytest-xdist the workers collect and the controller only reports.
    if report.when == "setup" and "sampled" in report.keywords and report.nodeid not in SAMPLED:
        SAMPLED.append(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    from .test_machines import timings

    for name, value in timings.items():
        terminalreporter.write_line(f"machines: {name}: {value}")
    sampled = SAMPLED if os.environ.get("KUBENEST_LONG") != "1" else []
    if sampled:
        number, every = rotation.commit_number(), rotation.turns()
        terminalreporter.write_line(f"rotating sample: turn {number % len(every) + 1} of {len(every)}, taken by commit"
                                    f" number {number} (KUBENEST_ROTATION to repeat it): {', '.join(sampled)}")


def run_python(*args, env=None, timeout=1800, check=True) -> subprocess.CompletedProcess:
    """Run `python ARGS` from the repository root; fail the test with the output if it fails (unless not check)."""
    proc = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, check=False)
    assert proc.returncode == 0 or not check, f"{args} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="session")
def host_cluster():
    """The default sandbox (.sandbox, knbr0): machines plus the bare-bootstrapped host cluster.

    Brought up if needed and left running for the other e2e modules; `make down` removes it.
    """
    if os.geteuid() != 0:
        pytest.skip("node machines need root")
    from kubernetes import config as k8s_config

    sb = from_env()
    existed = (sb.state_dir / "kubeconfig").is_file()

    def down() -> None:
        if not existed:  # a sandbox the tests built is removed again, half-built or not; a developer's stays
            subprocess.run(["make", "--no-print-directory", "down"], cwd=REPO_ROOT, capture_output=True,
                           timeout=600, check=False)

    started = time.monotonic()
    try:
        with bringup.one_at_a_time("the sandbox's host cluster"):
            run_python("-m", "sandbox.machines", "up")
            run_python("-m", "sandbox.cluster", "up")
    except BaseException:
        down()
        raise
    print(f"\nmachines + host cluster converged in {time.monotonic() - started:.0f}s")
    yield sb, k8s_config.new_client_from_config(str(sb.state_dir / "kubeconfig"))
    down()
