"""ansible-runner events -> progress, failures and the playbook's result.

The runner calls `RunTracker.__call__` from its worker thread; the event loop reads `snapshot()`.
"""

from __future__ import annotations

import collections
import datetime
import logging
import threading
from dataclasses import dataclass
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils import run_result

from .errors import Permanent, failure_messages, parse_permanent, summarize

log = logging.getLogger(__name__)

TASK_START_EVENTS = frozenset({"playbook_on_task_start", "playbook_on_handler_task_start"})
TASK_END_EVENTS = frozenset({"runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"})
# A node's promotion ends with this when its virtual cluster's control plane failed in the same run.
CONSEQUENCE_MARKER = run_result.step(run_result.CONSEQUENCE_STEP)
# The task a node enters each step of its promotion or return with (roles/node_promote/tasks/step.yml).
STEP_ACTION = "kosmos.kubenest.promotion_step"


@dataclass(frozen=True)
class Progress:
    current_role: str | None
    current_task: str | None
    tasks_done: int
    tasks_total: int | None
    version: int  # bumps on every change, so unchanged progress is not patched again


@dataclass(frozen=True)
class Failure:
    task: str | None
    role: str | None
    host: str | None
    message: str
    permanent: Permanent | None
    unreachable: bool = False

    def describe(self) -> str:
        where = f"task {self.task!r}" if self.task else "a task"
        if self.role:
            where += f" of role {self.role}"
        return summarize(f"{where} failed on {self.host or 'a host'}: {self.message}")


class RunTracker:
    """Folds the events of one run. `tasks_total` is an estimate, from the last successful run if known."""

    def __init__(self, tasks_total: int | None = None):
        self._lock = threading.Lock()
        self._tasks_total = tasks_total
        self._role: str | None = None
        self._task: str | None = None
        self._task_uuid: str | None = None
        self._task_counted = True  # nothing started yet, so nothing to count
        self._done = 0
        self._version = 0
        self.failures: list[Failure] = []
        self.result: dict[str, Any] | None = None
        self.finished = False
        # Errors outside tasks (syntax errors, missing files) only show up as output lines.
        self._output_tail: collections.deque[str] = collections.deque(maxlen=5)
        # Steps of promotions and returns: the one each node is in since when, when it last ended a task, and
        # (step, seconds) of every step left; a step lasts until the node enters the next or its last task ends.
        self._steps: dict[str, tuple[str, float]] = {}
        self._last_seen: dict[str, float] = {}
        self.step_durations: list[tuple[str, float]] = []

    def __call__(self, event: dict[str, Any]) -> bool:
        try:
            self._fold(event)
        except Exception:  # a malformed event must not break the run
            log.exception("could not interpret runner event %s", event.get("event"))
        return True  # keep the event in the artifacts

    def _fold(self, event: dict[str, Any]) -> None:
        name = event.get("event")
        data = event.get("event_data") or {}
        with self._lock:
            if name in TASK_START_EVENTS:
                self._finish_current()
                self._role = data.get("role") or None
                self._task = data.get("task") or data.get("name") or None
                self._task_uuid = data.get("task_uuid")
                self._task_counted = False
                self._version += 1
            elif name in TASK_END_EVENTS:
                if data.get("task_uuid") == self._task_uuid:
                    self._finish_current()
                self._track_step(name, data, _seconds(event.get("created")))
                if name in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
                    self._record_failure(data, unreachable=name == "runner_on_unreachable")
            elif name == "playbook_on_stats":
                self._finish_current()
                for host, (step, since) in sorted(self._steps.items()):
                    self.step_durations.append((step, max(0.0, self._last_seen.get(host, since) - since)))
                self._steps.clear()
                self._role = self._task = None
                artifact_data = data.get("artifact_data") or {}
                if isinstance(artifact_data.get(run_result.RESULT_KEY), dict):
                    self.result = artifact_data[run_result.RESULT_KEY]
                self.finished = True
                self._version += 1
            elif name in ("verbose", "error") and event.get("stdout"):
                for line in str(event["stdout"]).splitlines():
                    if line.strip():
                        self._output_tail.append(line.strip())

    def _track_step(self, name: str, data: dict[str, Any], at: float | None) -> None:
        host = data.get("host")
        if not host or at is None:
            return
        self._last_seen[host] = at
        step = (data.get("res") or {}).get("step") if name == "runner_on_ok" else None
        if data.get("task_action") != STEP_ACTION or not isinstance(step, str):
            return
        if host in self._steps:
            left, since = self._steps[host]
            self.step_durations.append((left, max(0.0, at - since)))
        self._steps[host] = (step, at)

    def _finish_current(self) -> None:
        if not self._task_counted:
            self._task_counted = True
            self._done += 1
            self._version += 1

    def _record_failure(self, data: dict[str, Any], unreachable: bool) -> None:
        messages = failure_messages(data.get("res"))
        permanent = next((p for p in map(parse_permanent, messages) if p is not None), None)
        self.failures.append(Failure(
            task=data.get("task"), role=data.get("role") or None, host=data.get("host"),
            message=summarize("; ".join(messages) or "no message"), permanent=permanent, unreachable=unreachable))

    def snapshot(self) -> Progress:
        with self._lock:
            total = self._tasks_total
            if total is not None:
                total = max(total, self._done)  # an estimate must never read as more than 100 %
            return Progress(self._role, self._task, self._done, total, self._version)

    @property
    def last_failure(self) -> Failure | None:
        """The failure that ended the run: the most recent one, except that nodes rolled back because their
        control plane did not come up (step ControlPlane) only follow from the failure that says why."""
        with self._lock:
            causes = [f for f in self.failures if CONSEQUENCE_MARKER not in f.message]
            return (causes or self.failures or [None])[-1]

    def note(self, line: str) -> None:
        """An error from outside the playbook, reported like its output."""
        with self._lock:
            self._output_tail.append(line)

    def output_tail(self) -> str:
        with self._lock:
            return summarize(" | ".join(self._output_tail))


def _seconds(created: Any) -> float | None:
    """An event's `created` time (ISO 8601, UTC) as a Unix time."""
    try:
        stamp = datetime.datetime.fromisoformat(str(created))
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.UTC)).timestamp()
