"""PlaybookRunner with real ansible-runner and ansible-playbook (no API server needed)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from kubenest_operator.progress import RunTracker
from kubenest_operator.runs import PlaybookRunner, RunDirs, new_run_id
from kubenest_operator.settings import collections_path
from tests.integration.operator.operatorproc import alive
from tests.support.procs import wait_until

ECHO = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Record what this run was given
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'virtualcluster': virtualcluster | default(None), 'stale': stale | default(None)} | to_json }}"
    - name: Report
      ansible.builtin.set_stats:
        data: {kubenest_result: {endpoint: "https://192.0.2.1:6443"}}
"""

SLOW = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Wait
      ansible.builtin.command: sleep 120
"""


def runner(tmp_path, keep: int) -> PlaybookRunner:
    return PlaybookRunner(playbook_dir=tmp_path / "playbooks", run_dirs=RunDirs(tmp_path / "runs", keep),
                          collections_path=collections_path(), max_parallel=2, timeout=120)


@pytest.fixture
def playbooks(tmp_path):
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "echo.yml").write_text(ECHO)
    (tmp_path / "playbooks" / "slow.yml").write_text(SLOW)
    return tmp_path


def test_every_run_sees_only_its_own_extravars_and_old_runs_are_pruned(playbooks):
    tmp_path = playbooks
    run = runner(tmp_path, keep=1)
    out = tmp_path / "given.json"
    try:
        first = RunTracker()
        outcome = asyncio.run(run.run("echo.yml", new_run_id("ns", "vc"), {
            "out": str(out), "stale": "from the first run", "virtualcluster": {"name": "vc", "state": "present"}},
            first))
        assert outcome.ok and first.result == {"endpoint": "https://192.0.2.1:6443"}
        assert json.loads(out.read_text())["stale"] == "from the first run"

        second = RunTracker()
        outcome = asyncio.run(run.run("echo.yml", new_run_id("ns", "vc"), {
            "out": str(out), "virtualcluster": {"name": "vc", "state": "absent"}}, second))
        given = json.loads(out.read_text())
        assert outcome.ok and given == {"virtualcluster": {"name": "vc", "state": "absent"}, "stale": None}
        assert second.snapshot().tasks_done == 2
    finally:
        run.shutdown()
    kept = list((tmp_path / "runs").iterdir())
    assert len(kept) == 1 and (kept[0] / "artifacts").is_dir()


EVIL = [
    "{{ lookup('pipe', 'id -un') }}",
    "{% for x in [1] %}{{ lookup('env', 'HOME') }}{% endfor %}",
    "{# comment #}x",
    "line\nimage: evil\n  hostPID: true",
    "a: b", "{x: 1}", "&anchor *anchor", "'\"quoted\"'", "!unsafe", "${HOME} $(id)",
]


def test_values_from_the_virtual_cluster_reach_ansible_as_data_not_templates(playbooks):
    """Template syntax anywhere in a CR (values and keys) is used literally, never evaluated."""
    tmp_path = playbooks
    run = runner(tmp_path, keep=1)
    out = tmp_path / "given.json"
    spec = {"imageRepository": EVIL[0], "labels": {value: value for value in EVIL}, "list": EVIL}
    vc = {"namespace": "ns", "name": "vc", "state": "present", "spec": spec}
    try:
        outcome = asyncio.run(run.run("echo.yml", new_run_id("ns", "vc"), {"out": str(out), "virtualcluster": vc},
                                      RunTracker()))
    finally:
        run.shutdown()
    assert outcome.ok
    assert json.loads(out.read_text())["virtualcluster"] == vc
    # and never on ansible-playbook's command line, which every local user can read
    (run_dir,) = (tmp_path / "runs").iterdir()
    command = (run_dir / "artifacts" / outcome.run_id / "command").read_text()
    assert "lookup" not in command and "hostPID" not in command


def test_cancelling_a_run_ends_ansible_playbook(playbooks):
    tmp_path = playbooks
    run = runner(tmp_path, keep=0)

    def playbook_pids() -> list[int]:
        marker = f"{tmp_path / 'runs'}/run-".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if marker in (entry / "cmdline").read_bytes():
                        pids.append(int(entry.name))
                except OSError:
                    pass
        return pids

    async def scenario() -> float:
        tracker = RunTracker()
        task = asyncio.create_task(run.run("slow.yml", new_run_id("ns", "vc"), {}, tracker))
        await asyncio.to_thread(wait_until, lambda: tracker.snapshot().current_task == "Wait", 60, "the slow task")
        pids = playbook_pids()
        assert pids
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(wait_until, lambda: not any(alive(p) for p in pids), 30, "playbook gone")
        return time.monotonic() - started

    try:
        assert asyncio.run(scenario()) < 30
    finally:
        run.shutdown()
    assert list((tmp_path / "runs").iterdir()) == []


@pytest.mark.parametrize("spec", [
    {"imageRepository": "{{ lookup('pipe', 'id -un') }}"},
    {"imageRepository": "kubenest.local\n      hostPID: true\n      hostNetwork: true"},
    {"kubernetesVersion": "{{ lookup('pipe', 'id -un') }}"},
    {"externalIP": "{{ lookup('pipe', 'id -un') }}"},
])
def test_the_real_playbook_refuses_hostile_specs_before_changing_anything(tmp_path, spec):
    """The collection's own virtualcluster.yml, as the operator runs it: a hostile spec stops at the first
    task with a permanent error quoting the value as given, not its evaluation."""
    run = PlaybookRunner(playbook_dir=Path(__file__).resolve().parents[3] / "playbooks",
                         run_dirs=RunDirs(tmp_path / "runs", 1), collections_path=collections_path(),
                         max_parallel=1, timeout=120)
    tracker = RunTracker()
    vc = {"namespace": "tenants", "name": "vc1", "uid": "u-1", "state": "present", "spec": spec}
    try:
        outcome = asyncio.run(run.run("virtualcluster.yml", new_run_id("tenants", "vc1"),
                                      {"virtualcluster": vc, "kubenest_host_kubeconfig": str(tmp_path / "none")},
                                      tracker))
    finally:
        run.shutdown()
    assert not outcome.ok
    failure = tracker.last_failure
    assert failure.task == "Check the request" and failure.permanent is not None
    assert failure.permanent.reason == "InvalidRequest"
    (value,) = spec.values()
    marker = "lookup('pipe', 'id -un')" if "lookup" in value else "hostPID: true"
    assert marker in failure.message and "'root'" not in failure.message
    assert tracker.snapshot().tasks_done == 1  # nothing after the check ran
