"""An operator restart runs the playbook only for virtual clusters that drifted since their last run."""

from __future__ import annotations

import shutil
import time

import kubernetes

from tests.integration.operator.operatorproc import PLAYBOOKS, stays, wait_for_vc
from tests.integration.operator.test_virtualclusters import COMPLETED, completed
from tests.support.procs import wait_until


def test_a_restart_runs_only_what_drifted(kube, operators):
    ns = kube.new_namespace(sleep=0, real_api=True)
    first = operators.start("first", "--namespace", ns)
    for name in ("lambda", "mu"):
        kube.create_vc(ns, name, {})
    for name in ("lambda", "mu"):
        wait_for_vc(kube, ns, name, completed(), COMPLETED, f"{name} Completed", first)
    assert first.stop() == 0

    # Nothing changed: the restarted operator looks (workloads, the API, certificates) and runs nothing.
    second = operators.start("second", "--namespace", ns, runs_dir=first.runs_dir)
    wait_until(lambda: second.log().count("nothing drifted since the last run") == 2, 60, "both looked at",
               second.process)
    assert stays(lambda: kube.runs(ns, "lambda")["present"] == 1 and kube.runs(ns, "mu")["present"] == 1, 8)
    assert second.stop() == 0

    # A control-plane workload gone: that virtual cluster, and only that one, is converged again.
    kubernetes.client.AppsV1Api(kube.client).delete_namespaced_deployment("mu-scheduler", ns)
    third = operators.start("third", "--namespace", ns, runs_dir=first.runs_dir)
    wait_until(lambda: kube.runs(ns, "mu")["present"] == 2, COMPLETED, "mu converged again", third.process)
    assert "running again: Deployment mu-scheduler is missing" in third.log()
    wait_for_vc(kube, ns, "mu", completed(), COMPLETED, "mu Completed again", third)
    assert stays(lambda: kube.runs(ns, "lambda")["present"] == 1, 5)


def _ready(vc) -> dict:
    return next((c for c in ((vc or {}).get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})


def _set_ready_replicas(apps, ns: str, name: str, ready: int) -> None:
    """What the host's controllers would write (this API server runs none): the workload's ready replicas."""
    patch = {"status": {"replicas": 1, "readyReplicas": ready, "availableReplicas": ready}}
    if name.endswith("-etcd"):
        apps.patch_namespaced_stateful_set_status(name, ns, patch)
    else:
        apps.patch_namespaced_deployment_status(name, ns, patch)


def _exists(apps, ns: str, name: str) -> bool:
    try:
        apps.read_namespaced_deployment(name, ns)
    except kubernetes.client.rest.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_a_broken_control_plane_is_reported_and_repaired_while_running(kube, operators):
    ns = kube.new_namespace(sleep=0, real_api=True, replicas=1)
    operator = operators.start("operator", "--namespace", ns, "--resync-interval", "2")
    kube.create_vc(ns, "nu", {})
    # Nothing runs pods here: once the run has completed, the look finds the workloads not ready (within a
    # resync period, so sooner than a poll may see Ready True in between).
    vc = wait_for_vc(kube, ns, "nu", lambda vc: ((vc or {}).get("status") or {}).get("phase") == "Completed"
                     and _ready(vc).get("reason") == "ControlPlaneDegraded", COMPLETED, "nu Completed, then degraded",
                     operator)
    apps = kubernetes.client.AppsV1Api(kube.client)
    workloads = ["nu-etcd", "nu-apiserver", "nu-controller-manager", "nu-scheduler"]
    status = vc["status"]
    assert [(o["kind"], o["name"], o.get("replicas")) for o in status["controlPlaneObjects"]] == [
        ("Deployment", "nu-apiserver", 1), ("Deployment", "nu-controller-manager", 1),
        ("Deployment", "nu-scheduler", 1), ("Secret", "nu-admin-kubeconfig", None), ("StatefulSet", "nu-etcd", 1)]
    assert "StatefulSet nu-etcd has 0 of 1 replicas ready" in _ready(vc)["message"]
    for name in workloads:
        _set_ready_replicas(apps, ns, name, 1)
    wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("status") == "True", 30, "nu recovered", operator)

    # A workload that is not ready (its pod crashing or deleted): Ready says so, and says it again once it is.
    _set_ready_replicas(apps, ns, "nu-scheduler", 0)
    vc = wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("reason") == "ControlPlaneDegraded", 30,
                     "nu degraded", operator)
    assert _ready(vc)["status"] == "False"
    assert _ready(vc)["message"] == "Deployment nu-scheduler has 0 of 1 replicas ready"
    _set_ready_replicas(apps, ns, "nu-scheduler", 1)
    wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("status") == "True", 30, "nu recovered", operator)
    assert kube.runs(ns, "nu")["present"] == 1  # nothing to repair: no run

    # Scaled to 0 as `kubectl scale` does: the collection's replica count is taken back by a run.
    apps.patch_namespaced_deployment_scale("nu-apiserver", ns, {"spec": {"replicas": 0}}, field_manager="kubectl")
    vc = wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("reason") == "ControlPlaneDegraded", 30,
                     "nu degraded by the scale", operator)
    assert _ready(vc)["message"] == "Deployment nu-apiserver: spec.replicas is 0 where the collection set 1"
    wait_until(lambda: kube.runs(ns, "nu")["present"] == 2, COMPLETED, "nu repaired", operator.process)
    assert "repairing: Deployment nu-apiserver: spec.replicas is 0 where the collection set 1" in operator.log()
    wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("status") == "True", COMPLETED, "nu Ready again",
                operator)
    assert apps.read_namespaced_deployment("nu-apiserver", ns).spec.replicas == 1

    # An image changed as `kubectl set image` does: taken back the same way.
    apps.patch_namespaced_deployment("nu-scheduler", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "example.invalid/other:1"}]}}}}, field_manager="kubectl-set")
    wait_until(lambda: kube.runs(ns, "nu")["present"] == 3, COMPLETED, "nu repaired again", operator.process)
    assert "repairing: Deployment nu-scheduler: spec.template.spec.containers[name=c].image changed by kubectl-set" \
        in operator.log()
    wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("status") == "True", COMPLETED, "nu Ready again",
                operator)
    assert apps.read_namespaced_deployment("nu-scheduler", ns).spec.template.spec.containers[0].image == \
        "kubenest.local/pause:1"

    # A workload that is gone: repaired by a run, without a spec change or a restart.
    apps.delete_namespaced_deployment("nu-controller-manager", ns)
    wait_until(lambda: kube.runs(ns, "nu")["present"] == 4, COMPLETED, "nu repaired a third time",
               operator.process)
    assert "repairing: Deployment nu-controller-manager is missing" in operator.log()
    wait_until(lambda: _exists(apps, ns, "nu-controller-manager"), COMPLETED, "nu-controller-manager back",
               operator.process)
    _set_ready_replicas(apps, ns, "nu-controller-manager", 1)  # its new object has no controller either
    wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("status") == "True", COMPLETED, "nu Ready again",
                operator)
    assert stays(lambda: kube.runs(ns, "nu")["present"] == 4, 6)


def test_an_upgrade_runs_only_when_the_playbooks_mean_something_else_and_one_at_a_time(kube, operators, tmp_path):
    """The operator's playbooks replaced, as an upgrade of the operator and collection replaces them: reworded
    (a comment, a task's layout) they start no run; changed in what they do, each Ready virtual cluster runs
    once, never two at a time."""
    playbooks = tmp_path / "collection" / "playbooks"
    shutil.copytree(PLAYBOOKS, playbooks)
    ns = kube.new_namespace(sleep=0, real_api=True)
    first = operators.start("first", "--namespace", ns, "--playbook-dir", str(playbooks))
    names = ("xi", "omicron")
    for name in names:
        kube.create_vc(ns, name, {})
    for name in names:
        wait_for_vc(kube, ns, name, completed(), COMPLETED, f"{name} Completed", first)
    assert first.stop() == 0

    main = playbooks / "virtualcluster.yml"
    text = main.read_text()
    main.write_text(text.replace("\n  tasks:\n", "\n  # reworded in a new release\n  tasks:\n", 1)
                    .replace("        kind: ConfigMap\n", "        kind: 'ConfigMap'\n", 1))
    second = operators.start("second", "--namespace", ns, "--playbook-dir", str(playbooks), runs_dir=first.runs_dir)
    wait_until(lambda: second.log().count("nothing drifted since the last run") == 2, 60, "both looked at",
               second.process)
    assert stays(lambda: all(kube.runs(ns, name)["present"] == 1 for name in names), 5)
    assert second.stop() == 0

    # Several seconds a run, so two at once could not go unseen by a look every 0.2 s.
    kube.set_control(ns, sleep=1, real_api=True)
    main.write_text(main.read_text().replace("  vars:\n", "  vars:\n    test_release: 2\n", 1))
    third = operators.start("third", "--namespace", ns, "--playbook-dir", str(playbooks), runs_dir=first.runs_dir)
    together, deadline = [], time.monotonic() + 2 * COMPLETED
    while time.monotonic() < deadline:
        vcs = {name: kube.vc(ns, name) for name in names}
        if [vc["status"].get("phase") for vc in vcs.values()].count("Updating") > 1:
            together.append(time.monotonic())
        if all(kube.runs(ns, name)["present"] == 2 for name in names) and all(map(completed(), vcs.values())):
            break
        time.sleep(0.2)
    assert all(kube.runs(ns, name)["present"] == 2 for name in names), {n: kube.runs(ns, n) for n in names}
    assert third.log().count("running again: the collection's desired state changed since the last run") == 2
    assert not together, "two upgrade runs at once"
