"""The host limits the machines share are raised, never lowered, and a limit that cannot be read is an error."""

from __future__ import annotations

import pytest

from sandbox.machines import host_limits
from sandbox.machines.errors import SandboxError


def _proc(tmp_path, instances, watches):
    (tmp_path / "fs/inotify").mkdir(parents=True)
    (tmp_path / "fs/inotify/max_user_instances").write_text(f"{instances}\n")
    (tmp_path / "fs/inotify/max_user_watches").write_text(f"{watches}\n")
    return tmp_path


def test_a_low_limit_is_raised_to_its_minimum(tmp_path):
    proc = _proc(tmp_path, 128, 8192)
    assert host_limits.raise_limits(proc) == {"fs/inotify/max_user_instances": 1024,
                                              "fs/inotify/max_user_watches": 524288}
    assert (proc / "fs/inotify/max_user_instances").read_text() == "1024\n"
    assert host_limits.raise_limits(proc) == {}


def test_a_higher_limit_is_left_alone(tmp_path):
    proc = _proc(tmp_path, 8192, 1048576)
    assert host_limits.raise_limits(proc) == {}
    assert (proc / "fs/inotify/max_user_instances").read_text() == "8192\n"


def test_a_missing_limit_is_named(tmp_path):
    with pytest.raises(SandboxError, match="max_user_instances"):
        host_limits.raise_limits(tmp_path)
