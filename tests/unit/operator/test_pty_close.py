"""A finished child's pty closes without ptyprocess's pause; a child still alive on close is still ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import ptyprocess

from kubenest_operator import pty_close


def test_installing_twice_wraps_once():
    pty_close.install()
    wrapped = ptyprocess.PtyProcess.__init__
    pty_close.install()
    assert ptyprocess.PtyProcess.__init__ is wrapped


def test_the_operator_installs_it_with_its_runs():
    # A fresh interpreter: in this one an earlier test may have installed it already.
    probe = ("import ptyprocess, kubenest_operator.runs; "
             "print(getattr(ptyprocess.PtyProcess.__init__, '_kubenest_no_close_delay', False))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stderr


def test_a_finished_child_closes_with_no_pause(monkeypatch):
    pty_close.install()
    pauses = []
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda seconds: (pauses.append(seconds), real_sleep(seconds))[1])
    child = ptyprocess.PtyProcess.spawn(["true"])
    assert child.delayafterclose == 0
    while True:  # read to EOF, as ansible-runner does before it closes
        try:
            child.read()
        except EOFError:
            break
    pauses.clear()
    child.close()
    assert child.closed and not child.isalive()
    assert all(seconds == 0 for seconds in pauses), pauses


def test_a_child_still_alive_on_close_is_still_ended():
    pty_close.install()
    child = ptyprocess.PtyProcess.spawn(["sleep", "60"])
    child.close(force=True)
    assert child.closed and not child.isalive()
