"""Where a virtual cluster's create time goes: the run's ansible-runner events folded into phases.

The controller's tasks (host localhost) are charged from their start to the start of its next task, so the
engine's overhead between tasks lands in the phase of the task it follows and the phases add up to the whole
run; time the controller spends waiting for nodes is the nodes'.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

PHASES = ["checks and ownership", "etcd PKI and objects", "etcd Ready", "control-plane PKI and kubeconfigs",
          "apiserver Ready", "controllers Ready", "tenant kubeconfig and node prerequisites",
          "nodes (claim, promote, report)", "add-ons (pod network, DNS)", "other"]
ETCD_READY = {"The etcd StatefulSet, behind its NetworkPolicy", "Wait for etcd", "Wait until etcd is ready",
              "Remove the snapshot chunks the members were restored from"}
TENANT_FILES = {"tenant_access.yml"}
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
        if tasks_file == "hosted_prepare.yml":  # the include of the Deployments, applied while etcd starts
            return "control-plane PKI and kubeconfigs"
        if task.startswith("Control-plane Deployments"):
            return "apiserver Ready" if "apiserver" in task else "controllers Ready"
        if tasks_file == "hosted_controllers_ready.yml":
            return "controllers Ready"
        if tasks_file in ROLLOUT_FILES or task.startswith("Report"):
            return current
        return "control-plane PKI and kubeconfigs"
    if role == "tenant_bootstrap":
        return "tenant kubeconfig and node prerequisites"
    if role == "node_promote":
        return "tenant kubeconfig and node prerequisites" if tasks_file in TENANT_FILES else \
            "nodes (claim, promote, report)"
    if role == "node_isolation":
        return "nodes (claim, promote, report)"
    if role in ("cilium", "coredns"):
        return "add-ons (pod network, DNS)"
    return "other"


CONTROLLER = "localhost"
RESULT_EVENTS = frozenset({"runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"})
NODES = "nodes (claim, promote, report)"
# A pause between two controller tasks longer than this, while nodes work, is the controller waiting for them;
# shorter ones are the engine's own overhead.
WAIT_S = 1.0


@dataclass(frozen=True)
class Result:
    host: str
    start: dt.datetime
    end: dt.datetime
    role: str
    path: str
    task: str
    play: str


def results(events: list[dict]) -> list[Result]:
    """Every host's task results, by start (with the free strategy, hosts run their tasks side by side)."""
    found = []
    for e in events:
        if e["event"] not in RESULT_EVENTS:
            continue
        data = e["event_data"]
        end = _time(data.get("end") or e["created"])
        found.append(Result(data.get("host") or "", _time(data.get("start") or data.get("end") or e["created"]),
                            end, data.get("role") or "", data.get("task_path") or "", data.get("task") or "",
                            data.get("play_uuid") or data.get("play") or ""))
    return sorted(found, key=lambda r: r.start)


def phase_seconds(events: list[dict]) -> tuple[dict[str, float], float, dt.datetime, dt.datetime]:
    """Seconds per phase (in PHASES order), the run's total, and its first and last event times.

    The controller's own tasks set the phase. While it waits for nodes (their plays, or the end of a play they
    share with it) the time is the nodes'; node work that runs beside controller tasks costs nothing here
    (node_steps shows it)."""
    first, last = _time(events[0]["created"]), _time(events[-1]["created"])
    found = results(events)
    controller = [r for r in found if r.host == CONTROLLER]
    nodes = [r for r in found if r.host != CONTROLLER]
    seconds = dict.fromkeys(PHASES, 0.0)
    current = PHASES[0]

    def charge(start: dt.datetime, end: dt.datetime, phase: str) -> None:
        if end <= start:
            return
        waiting = end - start > dt.timedelta(seconds=WAIT_S) and any(
            start < r.end and r.start < end for r in nodes)
        seconds[NODES if waiting else phase] += (end - start).total_seconds()

    at = first
    for task, following in zip(controller, controller[1:] + [None], strict=True):
        charge(at, task.start, current)
        current = classify(task.role, task.path, task.task, current)
        end = max(task.end, task.start)
        seconds[current] += (end - task.start).total_seconds()
        at = end if following is None else min(end, following.start)
    charge(at, last, current)
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


def node_steps(job_events: Path, host: str | None = None) -> list[tuple[str, float]]:
    """Seconds per step of one node's promotion (the node_promote role's `Step <name>` markers), in order: each
    of its tasks from start to end, and the pause before its next task in the same play, is charged to the
    step marked last. `host`: the node (default: the first with a step)."""
    found = [r for r in results(load_events(job_events))
             if r.host != CONTROLLER and (host is None or r.host == host)]
    marked = [r.host for r in found if _step(r)]
    if not marked:
        return []
    mine = [r for r in found if r.host == marked[0]]
    steps: dict[str, float] = {}
    step = None
    for task, following in zip(mine, mine[1:] + [None], strict=True):
        step = _step(task) or step
        if step is None:
            continue
        end = following.start if following is not None and following.play == task.play else task.end
        steps[step] = steps.get(step, 0.0) + max((end - task.start).total_seconds(), 0.0)
    return list(steps.items())


def _step(result: Result) -> str | None:
    if result.role == "node_promote" and result.task.startswith("Step ") and "{{" not in result.task:
        return result.task[len("Step "):]
    return None
