"""Run directories: fresh per run, live ones never pruned, bounded retention; the run environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubenest_operator.processes import end_processes, processes_of
from kubenest_operator.runs import (
    RunDirs,
    UnsafeRunsDir,
    local_inventory,
    new_run_id,
    run_environment,
    scrub_command_env,
    strip_run_dir,
    write_ansible_config,
)
from kubenest_operator.settings import default_runs_dir


def finish(fd: int) -> None:
    os.close(fd)


def test_each_run_gets_a_new_private_dir(tmp_path):
    dirs = RunDirs(tmp_path / "runs", keep=5)
    first, fd1 = dirs.create(new_run_id("ns", "vc"))
    second, fd2 = dirs.create(new_run_id("ns", "vc"))
    assert first != second and (first / "tmp").is_dir()
    assert oct(first.stat().st_mode & 0o777) == "0o700"
    finish(fd1)
    finish(fd2)


def test_retention_keeps_the_newest_finished_runs_and_never_a_live_one(tmp_path):
    dirs = RunDirs(tmp_path, keep=2)
    made = []
    for i in range(5):
        path, fd = dirs.create(f"2026010{i}T000000-ns.vc-{i:06x}")
        made.append((path, fd))
    live_path, live_fd = made[0]  # the oldest is still running
    for _path, fd in made[1:]:
        finish(fd)
    removed = dirs.prune()
    assert sorted(removed) == [made[1][0], made[2][0]]
    assert sorted(p for p in tmp_path.iterdir()) == [live_path, made[3][0], made[4][0]]
    finish(live_fd)
    assert dirs.prune() == [live_path]


def test_a_run_locked_by_another_process_is_live(tmp_path):
    dirs = RunDirs(tmp_path, keep=0)
    path, fd = dirs.create("20260101T000000-ns.vc-000001")
    finish(fd)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX);"
        "print('locked', flush=True); time.sleep(60)"), str(path / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert dirs.prune() == [] and path.exists()
    finally:
        holder.kill()
        holder.wait()
    # The lock went with the process: a killed operator's run is pruned like any finished one.
    assert dirs.prune() == [path]


def test_keep_zero_removes_every_finished_run_and_half_made_dirs_wait_for_the_grace(tmp_path):
    dirs = RunDirs(tmp_path, keep=0)
    _path, fd = dirs.create("20260101T000000-ns.vc-000001")
    finish(fd)
    fresh = tmp_path / "run-20260101T000001-ns.vc-000002"
    fresh.mkdir()  # no lock yet: being set up
    stale = tmp_path / "run-20260101T000002-ns.vc-000003"
    stale.mkdir()
    old = time.time() - 3600
    os.utime(stale, (old, old))
    (tmp_path / "unrelated").mkdir()
    dirs.prune()
    assert sorted(p.name for p in tmp_path.iterdir()) == [fresh.name, "unrelated"]


def test_the_recorded_command_keeps_variable_names_only(tmp_path):
    recorded = {"command": ["ansible-playbook"], "cwd": "/x", "env": {"API_TOKEN": "s3cret", "PATH": "/bin"}}
    (tmp_path / "command").write_text(json.dumps(recorded))
    scrub_command_env(tmp_path)
    command = json.loads((tmp_path / "command").read_text())
    assert command["env"] == ["API_TOKEN", "PATH"] and "s3cret" not in (tmp_path / "command").read_text()
    scrub_command_env(tmp_path / "missing")  # nothing to do, no error


def test_run_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", "/opt/collections")
    env = run_environment("/venv/site-packages", tmp_path)
    assert env["ANSIBLE_COLLECTIONS_PATH"] == os.pathsep.join(["/venv/site-packages", "/opt/collections"])
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert env["ANSIBLE_NOCOLOR"] == "1" and env["ANSIBLE_LOCAL_TEMP"] == env["TMPDIR"] == str(tmp_path)
    monkeypatch.delenv("ANSIBLE_COLLECTIONS_PATH")
    assert "ANSIBLE_COLLECTIONS_PATH" not in run_environment(None, tmp_path)
    assert "ANSIBLE_CONFIG" not in env


def test_the_run_gets_its_own_ansible_config_unless_the_environment_names_one(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    config = write_ansible_config(tmp_path)
    assert config == tmp_path / "ansible.cfg" and "internal_poll_interval = 0.01" in config.read_text()
    assert run_environment(None, tmp_path, config)["ANSIBLE_CONFIG"] == str(config)
    monkeypatch.setenv("ANSIBLE_CONFIG", "/etc/ansible/site.cfg")
    assert write_ansible_config(tmp_path / "other") is None


def test_local_inventory_uses_this_interpreter_and_the_run_directory(tmp_path):
    host = local_inventory(tmp_path)["all"]["hosts"]["localhost"]
    assert host == {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                    "ansible_remote_tmp": str(tmp_path / "remote")}


def test_run_ids_sort_by_time_and_name_the_object():
    first = new_run_id("tenants", "vc1")
    assert "-tenants.vc1-" in first and first[:8].isdigit()


def test_processes_of_abandoned_runs_are_ended_and_those_of_live_runs_kept(tmp_path):
    dirs = RunDirs(tmp_path, keep=10)
    dead, dead_fd = dirs.create("20260101T000000-ns.vc-000001")
    finish(dead_fd)  # its operator is gone
    live, live_fd = dirs.create("20260101T000001-ns.vc-000002")
    # Stand-ins for ansible-playbook: they name their run's directory on the command line, and have a child.
    script = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    orphan = subprocess.Popen([sys.executable, "-c", script, f"{dead}/inventory"])
    running = subprocess.Popen([sys.executable, "-c", script, f"{live}/inventory"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (len(processes_of(dead)) == 2 and len(processes_of(live)) == 2):
            time.sleep(0.05)
        grandchild = [pid for pid in processes_of(dead) if pid != orphan.pid]
        assert len(grandchild) == 1
        reaped = dirs.reap_orphans()
        assert sorted(reaped[dead.name]) == sorted([orphan.pid, *grandchild])
        assert orphan.wait(10) is not None
        assert processes_of(dead) == [] and running.poll() is None and len(processes_of(live)) == 2
    finally:
        for proc in (orphan, running):
            for pid in processes_of(dead) + processes_of(live):
                end_processes([pid], grace=1)
            proc.kill()
            proc.wait()
        finish(live_fd)


def test_a_runs_dir_that_is_a_symlink_or_someone_elses_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(UnsafeRunsDir, match="not a directory"):
        RunDirs(tmp_path / "link", keep=1).create(new_run_id("ns", "vc"))
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(UnsafeRunsDir, match="belongs to uid 65534"):
        RunDirs(theirs, keep=1).create(new_run_id("ns", "vc"))
    assert list(theirs.iterdir()) == [] and list(target.iterdir()) == []


def test_an_own_runs_dir_that_is_too_open_is_closed(tmp_path):
    base = tmp_path / "runs"
    base.mkdir(mode=0o777)
    os.chmod(base, 0o777)
    _path, fd = RunDirs(base, keep=1).create(new_run_id("ns", "vc"))
    finish(fd)
    assert base.stat().st_mode & 0o777 == 0o700


def test_the_default_runs_dir_is_per_user(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert default_runs_dir() == tmp_path / "kubenest-operator-runs"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert default_runs_dir().name == f"kubenest-operator-runs-{os.getuid()}"


def test_after_a_run_only_its_artifacts_stay(tmp_path):
    path, fd = RunDirs(tmp_path / "runs", keep=1).create(new_run_id("ns", "vc"))
    for name in ("env/extravars", "inventory/hosts", "tmp/remote/AnsiballZ_k8s.py", "artifacts/x/stdout"):
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text("x")
    strip_run_dir(path)
    finish(fd)
    assert sorted(p.name for p in path.iterdir()) == [".lock", "artifacts"]
    assert (path / "artifacts" / "x" / "stdout").is_file()


def test_runs_keep_module_payloads_where_the_operator_says(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_CALLBACKS_ENABLED", raising=False)
    assert "KUBENEST_MODULE_CACHE_DIR" not in run_environment(None, tmp_path)
    env = run_environment(None, tmp_path, module_cache_dir=tmp_path / "modules")
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "kosmos.kubenest.module_cache"
    assert env["KUBENEST_MODULE_CACHE_DIR"] == str(tmp_path / "modules")
    # Callbacks the operator's environment enables stay enabled.
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "ansible.posix.profile_tasks")
    env = run_environment(None, tmp_path, module_cache_dir=tmp_path / "modules")
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "ansible.posix.profile_tasks,kosmos.kubenest.module_cache"
