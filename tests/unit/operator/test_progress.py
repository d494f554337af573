"""Runner events -> progress, failures and result (event shapes as ansible-runner 2.4 emits them)."""

from __future__ import annotations

import threading

from kubenest_operator.progress import RunTracker


def task_start(uuid: str, task: str, role: str = "", handler: bool = False) -> dict:
    event = "playbook_on_handler_task_start" if handler else "playbook_on_task_start"
    return {"event": event, "event_data": {"task": task, "task_uuid": uuid, "role": role, "name": task}}


def result(event: str, uuid: str, task: str, res: dict | None = None, ignore_errors=None, role: str = "") -> dict:
    return {"event": event, "event_data": {"task": task, "task_uuid": uuid, "role": role, "host": "localhost",
                                           "res": res or {}, "ignore_errors": ignore_errors}}


def stats(artifact_data: dict | None = None) -> dict:
    return {"event": "playbook_on_stats", "event_data": {"artifact_data": artifact_data or {}}}


def feed(tracker: RunTracker, *events: dict) -> None:
    for event in events:
        assert tracker(event) is True


def test_progress_follows_tasks_and_roles():
    tracker = RunTracker(tasks_total=5)
    assert tracker.snapshot().tasks_done == 0 and tracker.snapshot().current_task is None
    feed(tracker, {"event": "playbook_on_start", "event_data": {}}, task_start("t1", "Read"),
         {"event": "runner_on_start", "event_data": {"task_uuid": "t1"}})
    first = tracker.snapshot()
    assert (first.current_role, first.current_task, first.tasks_done, first.tasks_total) == (None, "Read", 0, 5)

    feed(tracker, result("runner_on_ok", "t1", "Read"), task_start("t2", "Start etcd", role="etcd"))
    second = tracker.snapshot()
    assert (second.current_role, second.current_task, second.tasks_done) == ("etcd", "Start etcd", 1)
    assert second.version > first.version

    # a skipped task counts as done, and a second host's result does not count twice
    feed(tracker, result("runner_on_skipped", "t2", "Start etcd"), result("runner_on_ok", "t2", "Start etcd"),
         task_start("t3", "Restart", role="etcd", handler=True), result("runner_on_ok", "t3", "Restart"))
    assert tracker.snapshot().tasks_done == 3
    feed(tracker, stats({"kubenest_result": {"endpoint": "https://192.0.2.1:31443"}}))
    final = tracker.snapshot()
    assert (final.current_role, final.current_task, final.tasks_done) == (None, None, 3)
    assert tracker.result == {"endpoint": "https://192.0.2.1:31443"} and tracker.finished
    assert tracker.failures == []


def test_unchanged_progress_keeps_its_version():
    tracker = RunTracker()
    feed(tracker, task_start("t1", "Read"))
    version = tracker.snapshot().version
    feed(tracker, {"event": "runner_on_start", "event_data": {"task_uuid": "t1"}},
         {"event": "playbook_on_include", "event_data": {}})
    assert tracker.snapshot().version == version


def test_estimated_total_never_reads_as_more_than_all():
    tracker = RunTracker(tasks_total=1)
    feed(tracker, task_start("t1", "a"), task_start("t2", "b"), task_start("t3", "c"))
    progress = tracker.snapshot()
    assert progress.tasks_done == 2 and progress.tasks_total == 2
    assert RunTracker().snapshot().tasks_total is None


def test_a_permanent_failure_is_recognised_also_inside_a_loop():
    tracker = RunTracker()
    feed(tracker, task_start("t1", "Every promote policy has enough matching nodes"),
         result("runner_on_failed", "t1", "Every promote policy has enough matching nodes", {
             "msg": "One or more items failed", "results": [
                 {"failed": True, "msg": "[kubenest:permanent:Unsatisfiable] promotePolicies[0] wants 2"}]}),
         stats())
    failure = tracker.last_failure
    assert failure.permanent.reason == "Unsatisfiable"
    assert failure.permanent.message == "promotePolicies[0] wants 2"
    assert "Every promote policy" in failure.describe() and "localhost" in failure.describe()


def test_ignored_errors_do_not_count_and_the_last_failure_decides():
    tracker = RunTracker()
    feed(tracker, task_start("t1", "probe"), result("runner_on_failed", "t1", "probe", {"msg": "nope"}, True),
         task_start("t2", "refuse"),
         result("runner_on_failed", "t2", "refuse", {"msg": "[kubenest:permanent:InvalidRequest] bad"}),
         task_start("t3", "connect"), result("runner_on_unreachable", "t3", "connect", {"msg": "timed out"}))
    assert [f.task for f in tracker.failures] == ["refuse", "connect"]
    assert tracker.last_failure.permanent is None and tracker.last_failure.unreachable


def test_nodes_rolled_back_for_a_failed_control_plane_do_not_hide_its_failure():
    tracker = RunTracker()
    feed(tracker, task_start("t1", "Wait for etcd", role="etcd"),
         result("runner_on_failed", "t1", "Wait for etcd", {"msg": "[kubenest:permanent:Bad] etcd refused"}),
         task_start("t2", "Report the failed step", role="node_promote"),
         result("runner_on_failed", "t2", "Report the failed step", {
             "msg": "[kubenest:step:ControlPlane] promoting kn-w1 failed at step ControlPlane and was rolled back"}))
    assert len(tracker.failures) == 2
    assert tracker.last_failure.task == "Wait for etcd" and tracker.last_failure.permanent.reason == "Bad"

    alone = RunTracker()
    feed(alone, task_start("t2", "Report the failed step"), result("runner_on_failed", "t2", "Report the failed step", {
        "msg": "[kubenest:step:ControlPlane] promoting kn-w1 failed at step ControlPlane and was rolled back"}))
    assert alone.last_failure.task == "Report the failed step"


def test_errors_outside_tasks_are_kept_as_output():
    tracker = RunTracker()
    feed(tracker, {"event": "verbose", "stdout": "ERROR! the playbook: x.yml could not be found\n\n"})
    assert tracker.last_failure is None
    assert tracker.output_tail() == "ERROR! the playbook: x.yml could not be found"


def test_a_malformed_event_does_not_break_the_run():
    tracker = RunTracker()
    assert tracker({"event": "playbook_on_task_start", "event_data": None}) is True
    assert tracker({"event": "runner_on_failed", "event_data": {"res": "not a dict"}}) is True
    assert tracker({"event": "playbook_on_stats", "event_data": {"artifact_data": "junk"}}) is True
    assert tracker.result is None


def test_snapshots_from_another_thread_see_consistent_counts():
    tracker = RunTracker()
    events = []
    for i in range(500):
        events += [task_start(f"t{i}", f"task {i}"), result("runner_on_ok", f"t{i}", f"task {i}")]
    worker = threading.Thread(target=feed, args=(tracker, *events))
    worker.start()
    seen = []
    while worker.is_alive():
        seen.append(tracker.snapshot().tasks_done)
    worker.join()
    assert seen == sorted(seen) and tracker.snapshot().tasks_done == 500


def test_notes_from_outside_the_playbook_read_like_its_output():
    tracker = RunTracker()
    tracker.note("could not run virtualcluster.yml: [Errno 28] No space left on device")
    assert "No space left" in tracker.output_tail()


def step(host: str, name: str, at: str, action: str = "kosmos.kubenest.promotion_step", event="runner_on_ok") -> dict:
    return {"event": event, "created": f"2026-12-05T10:00:{at}", "event_data": {
        "task": f"Step {name}", "task_uuid": f"{host}-{name}", "host": host, "task_action": action,
        "res": {"step": name}}}


def test_each_node_step_lasts_until_the_next_step_or_the_nodes_last_task():
    tracker = RunTracker()
    feed(tracker,
         step("w1", "Drain", "00.000000"), step("w2", "Drain", "01.000000"),
         step("w1", "Images", "03.500000"),
         # Not a step: a task of w2 that ends its Drain only as its last task.
         step("w2", "ignored", "04.000000", action="kosmos.kubenest.kube_apply"),
         step("w1", "Kubelet", "05.000000"),
         step("w1", "failed", "09.000000", action="ansible.builtin.command", event="runner_on_failed"),
         stats())
    assert sorted(tracker.step_durations) == [("Drain", 3.0), ("Drain", 3.5), ("Images", 1.5), ("Kubelet", 4.0)]
    assert tracker(stats()) is True and len(tracker.step_durations) == 4  # a second end adds nothing
