"""bench/phases.py: a run's events folded into the phases of a virtual cluster's create."""

from __future__ import annotations

import datetime as dt
import json

from bench import phases

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def at(seconds):
    return (T0 + dt.timedelta(seconds=seconds)).isoformat()


def event(counter, seconds, name="runner_on_ok", role="", path="playbooks/virtualcluster.yml:1", task="",
          host="localhost", took=0.5, play="p1"):
    """A task's result (it started at `seconds` and took `took`); other events carry only their time."""
    data = {"role": role, "task_path": path, "task": task, "host": host, "play_uuid": play}
    if name == "runner_on_ok":
        data.update(start=at(seconds), end=at(seconds + took))
    return {"counter": counter, "event": name, "created": at(seconds + took if name == "runner_on_ok" else seconds),
            "event_data": data}


RUN = [
    event(1, 0, name="playbook_on_start"),
    event(2, 1, task="Check the request"),
    event(3, 2, role="etcd", path="roles/etcd/tasks/hosted.yml:3", task="Issue or reuse the etcd PKI"),
    event(4, 4, role="etcd", path="roles/etcd/tasks/hosted.yml:90",
          task="The etcd StatefulSet, behind its NetworkPolicy"),
    event(5, 5, role="etcd", path="roles/etcd/tasks/hosted.yml:99", task="Wait until etcd is ready"),
    event(6, 9, task="Control plane"),
    event(7, 9.5, role="control_plane", path="roles/control_plane/tasks/hosted.yml:3",
          task="Issue or reuse the control-plane PKI and kubeconfigs"),
    event(8, 11, role="control_plane", path="roles/control_plane/tasks/rollout_group.yml:3",
          task="Control-plane Deployments apiserver"),
    event(9, 12, role="control_plane", path="roles/control_plane/tasks/rollout_group.yml:20",
          task="Wait until the control plane is available"),
    event(10, 18, role="control_plane", path="roles/control_plane/tasks/rollout_group.yml:3",
          task="Control-plane Deployments controller-manager, scheduler"),
    event(11, 19, role="control_plane", path="roles/control_plane/tasks/rollout_group.yml:20",
          task="Wait until the control plane is available"),
    event(12, 23, role="control_plane", path="roles/control_plane/tasks/hosted_rollout.yml:20",
          task="Report the result to the operator"),
    event(13, 24, role="node_promote", path="roles/node_promote/tasks/tenant_access.yml:2",
          task="Read the tenant's admin kubeconfig"),
    event(14, 26, role="cilium", path="roles/cilium/tasks/main.yml:2", task="Pod network"),
    event(15, 27, role="node_promote", path="roles/node_promote/tasks/claim.yml:2", task="Reserve the nodes"),
    event(16, 30, role="coredns", path="roles/coredns/tasks/main.yml:2", task="CoreDNS"),
    event(17, 31, name="playbook_on_stats"),
]

NODE = "roles/node_promote/tasks/promote_prepare.yml"


def test_the_controller_waiting_for_nodes_is_their_time_and_work_beside_it_is_free():
    run = [
        event(1, 0, name="playbook_on_start"),
        event(2, 1, task="Check the request"),
        event(3, 2, role="node_promote", path="roles/node_promote/tasks/claim.yml:2", task="Reserve the nodes"),
        # play 2: the node prepares while the control plane comes up
        event(4, 3, role="node_promote", path=NODE, task="Step Drain", host="kn-w1", took=6, play="p2"),
        event(5, 3.5, role="control_plane", path="roles/control_plane/tasks/rollout_group.yml:3",
              task="Control-plane Deployments apiserver", took=4, play="p2"),
        event(6, 8, task="The control plane is up, nodes may join", took=0.1, play="p2"),
        event(7, 9.5, role="node_promote", path=NODE, task="Step Images", host="kn-w1", took=2, play="p2"),
        # plays of the nodes alone, then the report
        event(8, 12, role="node_promote", path=NODE, task="Step Kubelet", host="kn-w1", took=3, play="p3"),
        event(9, 16, role="coredns", path="roles/coredns/tasks/main.yml:2", task="CoreDNS", took=1, play="p4"),
        event(10, 17.5, name="playbook_on_stats"),
    ]
    seconds, total = phases.phase_seconds(run)[:2]
    assert total == 17.5 and abs(sum(seconds.values()) - 17.5) < 1e-9
    assert abs(seconds["apiserver Ready"] - 4.6) < 1e-9  # 3.5 .. 8.1: the play-level fact follows it
    assert abs(seconds["nodes (claim, promote, report)"] - (1 + 0.5 + 7.9)) < 1e-9  # claim; waits 8.1 .. 16
    assert seconds["add-ons (pod network, DNS)"] == 1.5


def test_every_second_of_the_run_lands_in_exactly_one_phase(tmp_path):
    seconds, total, first, last = phases.phase_seconds(RUN)
    assert total == 31 and sum(seconds.values()) == 31
    assert seconds == {
        "checks and ownership": 2.0,
        "etcd PKI and objects": 2.0,
        "etcd Ready": 5.5,  # the play-level "Control plane" include follows the etcd wait
        "control-plane PKI and kubeconfigs": 1.5,
        "apiserver Ready": 7.0,
        "controllers Ready": 6.0,
        "tenant kubeconfig and node prerequisites": 2.0,
        "nodes (claim, promote, report)": 3.0,
        "add-ons (pod network, DNS)": 2.0,
        "other": 0.0,
    }


def test_the_table_adds_the_operators_time_around_the_run(tmp_path):
    runs = tmp_path / "runs" / "run-20260101T120000-ns.vc1-abc123" / "artifacts" / "x" / "job_events"
    runs.mkdir(parents=True)
    for e in RUN:
        (runs / f"{e['counter']}.json").write_text(json.dumps(e))
    (runs / "partial.json").write_text('{"counter": 99, "ev')  # a run still writing
    found = phases.find_run(tmp_path / "runs", "ns", "vc1")
    created = (T0 - dt.timedelta(seconds=2)).replace(tzinfo=dt.UTC)
    ready = (T0 + dt.timedelta(seconds=34)).replace(tzinfo=dt.UTC)
    rows = dict(phases.table(found, created, ready))
    assert rows["operator: event to run start"] == 2 and rows["operator: run end to Ready in status"] == 3
    assert "other" not in rows and sum(rows.values()) == 36


def test_node_promotion_time_is_charged_to_its_steps(tmp_path):
    promote = "roles/node_promote/tasks/promote.yml"
    run = [
        event(1, 0, name="playbook_on_start"),
        event(2, 1, role="node_promote", path=NODE, task="Step Drain", host="kn-w1", play="p2"),
        event(3, 2, role="node_promote", path=NODE, task="Cordon and drain", host="kn-w1", took=3, play="p2"),
        event(4, 6, role="node_promote", path=NODE, task="Step Reset", host="kn-w1", play="p2"),
        event(5, 7, role="node_promote", path=NODE, task="Wipe", host="kn-w1", took=2, play="p2"),
        event(6, 7.5, role="etcd", task="Wait until etcd is ready", took=10, play="p2"),  # the controller's
        # the next play starts once the control plane is up: the wait is no step's
        event(7, 20, role="node_promote", path=promote, task="Step Ready", host="kn-w1", play="p3"),
        event(8, 21, role="node_promote", path=promote, task="Wait", host="kn-w1", took=2, play="p3"),
        event(9, 22, role="node_promote", path=promote, task="Step Drain", host="kn-w2", play="p3"),
        event(10, 24, name="playbook_on_stats"),
    ]
    runs = tmp_path / "job_events"
    runs.mkdir()
    for e in run:
        (runs / f"{e['counter']}.json").write_text(json.dumps(e))
    assert phases.node_steps(runs) == [("Drain", 5.0), ("Reset", 3.0), ("Ready", 3.0)]
    assert phases.node_steps(runs, "kn-w2") == [("Drain", 0.5)]


def test_the_controllers_waited_for_after_the_tenants_objects_are_their_own_phase():
    path = "roles/control_plane/tasks/hosted_controllers_ready.yml:4"
    assert phases.classify("control_plane", path, "Wait until the controllers are available",
                           "add-ons (pod network, DNS)") == "controllers Ready"


def test_the_deployments_applied_while_etcd_starts_are_part_of_the_control_planes_preparation():
    path = "roles/control_plane/tasks/hosted_prepare.yml:164"
    task = "Egress selector, NetworkPolicies and Deployments of the control plane"
    assert phases.classify("control_plane", path, task,
                           "control-plane PKI and kubeconfigs") == "control-plane PKI and kubeconfigs"
