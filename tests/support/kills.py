"""The operator SIGKILLed at a task of a run, seen in the run's own events, and started again."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.support.virtualclusters import OperatorProcess


def kill_at(proc: OperatorProcess, runs: Path, namespace: str, name: str, task: str,
            timeout: float = 900) -> str:
    """SIGKILL the operator (and its playbook) once a run of `namespace`/`name` starts `task`; start it
    again; returns the task's full name.

    The run's own events are read as ansible-runner writes them: status.progress is sampled and names only the
    latest task to start, so a short node task followed at once by a task of the control plane (strategy free)
    may never appear there."""
    pattern = f"run-*-{namespace}.{name}-*/artifacts/*/job_events/*.json"
    read = set(runs.glob(pattern))  # events of earlier points and runs
    started: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Finished events are "<counter>-<uuid>.json"; "<uuid>-partial.json" are halves still being merged.
        fresh = [p for p in set(runs.glob(pattern)) - read if p.name.split("-", 1)[0].isdigit()]
        for path in sorted(fresh, key=lambda p: (p.parent, int(p.name.split("-", 1)[0]))):
            try:
                event = json.loads(path.read_text())
            except (OSError, ValueError):  # pruned with its run: nothing to read
                read.add(path)
                continue
            read.add(path)
            if event.get("event") not in ("playbook_on_task_start", "runner_on_start"):
                continue
            current = (event.get("event_data") or {}).get("task") or ""
            if not started or started[-1] != current:
                started.append(current)
            if task in current:
                proc.kill()
                time.sleep(2)
                proc.start()
                return current
        time.sleep(0.02)
    raise AssertionError(f"{name}'s run never started task {task!r} in {timeout:.0f}s; last tasks: {started[-8:]}")
