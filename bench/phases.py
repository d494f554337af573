"""Where a virtual cluster's create time goes: the run's ansible-runner events folded into phases.

Each task is charged from its start to the start of the next task, so the engine's own overhead between
tasks lands in the phase of the task it follows, and the phases add up to the whole run.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

PHASES = ["checks and ownership", "etcd PKI and objects", "etcd Ready", "control-plane PKI and kubeconfigs",
          "apiserver Ready", "controllers Ready", "tenant kubeconfig and node prerequisites",
          "nodes (claim, promote, report)", "add-ons (pod network, DNS)", "other"]
ETCD_READY = {"The etcd StatefulSet", "Wait for etcd", "Wait until etcd is ready",
              "Remove the snapshot chunks the members were restored from"}
TENANT_FILES = {"tenant_access.yml", "tenant_prepare.yml"}
ROLLOUT_FILES = {"hosted_rollout.yml", "rollout_group.yml"}


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def load_events(job_events: Path) -> list[dict]:
    events = []
    for path in job_events.glob("*.json"):
        try:
            events.append(json.loads(path.read_text()))
        except ValueError:  # a partly written event of a run still going
            continue
    return sorted(events, key=lambda e: e.get("counter", 0))


def classify(role: str, path: str, task: str, current: str) -> str:
    """The phase of a task; `current` is the phase of the task before it (play-level tasks and waits that
    follow an apply belong to what precedes them)."""
    tasks_file = path.rsplit("/", 1)[-1].split(":", 1)[0]
    if role in ("", "secret_files"):  # play-level tasks; PKI Secrets of older versions
        return current
    if role == "etcd":
        return "etcd Ready" if task in ETCD_READY else "etcd PKI and objects"
    if role == "control_plane":
        if task.startswith("Control-plane Deployments"):
            return "apiserver Ready" if "apiserver" in task else "controllers Ready"
        if tasks_file in ROLLOUT_FILES or task.startswith(("Wait until tenants", "Report")):
            return current
        return "control-plane PKI and kubeconfigs"
    if role == "node_promote":
        return "tenant kubeconfig and node prerequisites" if tasks_file in TENANT_FILES else \
            "nodes (claim, promote, report)"
    if role in ("cilium", "coredns"):
        return "add-ons (pod network, DNS)"
    return "other"


def phase_seconds(events: list[dict]) -> tuple[dict[str, float], float, dt.datetime, dt.datetime]:
    """Seconds per phase (in PHASES order), the run's total, and its first and last event times."""
    starts = [(_time(e["created"]), e["event_data"].get("role") or "", e["event_data"].get("task_path") or "",
               e["event_data"].get("task") or "") for e in events if e["event"] == "playbook_on_task_start"]
    first, last = _time(events[0]["created"]), _time(events[-1]["created"])
    seconds = dict.fromkeys(PHASES, 0.0)
    current = PHASES[0]
    seconds[current] += (starts[0][0] - first).total_seconds() if starts else 0.0
    for (at, role, path, task), following in zip(starts, [s[0] for s in starts[1:]] + [last], strict=True):
        current = classify(role, path, task, current)
        seconds[current] += (following - at).total_seconds()
    return seconds, (last - first).total_seconds(), first, last


def find_run(runs_dir: Path, namespace: str, name: str) -> Path:
    """job_events of the first run the operator made for the virtual cluster (its create)."""
    candidates = sorted(runs_dir.glob(f"run-*-{namespace}.{name}-*/artifacts/*/job_events"))
    if not candidates:
        raise FileNotFoundError(f"no run of {namespace}/{name} under {runs_dir}")
    return candidates[0]


def table(job_events: Path, created: dt.datetime, ready: dt.datetime) -> list[tuple[str, float]]:
    """Rows for the create of one virtual cluster: the operator's time before and after its run, the phases."""
    seconds, _total, first, last = phase_seconds(load_events(job_events))
    rows = [("operator: event to run start", (first - created).total_seconds())]
    rows += [(name, value) for name, value in seconds.items() if value > 0 or name != "other"]
    rows.append(("operator: run end to Ready in status", (ready - last).total_seconds()))
    return rows


def node_steps(job_events: Path) -> list[tuple[str, float]]:
    """Seconds per step of node promotion (the node_promote role's `Step <name>` markers), in order; time
    between two markers is charged to the first."""
    events = load_events(job_events)
    starts = [(_time(e["created"]), e["event_data"].get("role") or "", e["event_data"].get("task") or "")
              for e in events if e["event"] == "playbook_on_task_start"]
    ends = [s[0] for s in starts[1:]] + [_time(events[-1]["created"])] if events else []
    steps: dict[str, float] = {}
    step = None
    for (at, role, task), following in zip(starts, ends, strict=True):
        if role == "node_promote" and task.startswith("Step ") and "{{" not in task:
            step = task[len("Step "):]
        elif role not in ("node_promote", ""):
            step = None
        if step:
            steps[step] = steps.get(step, 0.0) + (following - at).total_seconds()
    return list(steps.items())
