"""An operator restart runs the playbook only for virtual clusters that drifted since their last run."""

from __future__ import annotations

import kubernetes

from tests.integration.operator.operatorproc import stays, wait_for_vc
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


def test_a_broken_control_plane_is_reported_and_repaired_while_running(kube, operators):
    ns = kube.new_namespace(sleep=0, real_api=True)
    operator = operators.start("operator", "--namespace", ns, "--resync-interval", "2")
    kube.create_vc(ns, "nu", {})
    wait_for_vc(kube, ns, "nu", completed(), COMPLETED, "nu Completed", operator)
    apps = kubernetes.client.AppsV1Api(kube.client)

    # A workload that is not ready (its pod crashing or deleted): Ready says so, and says it again once it is.
    apps.patch_namespaced_deployment("nu-scheduler", ns, {"spec": {"replicas": 1}})
    vc = wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("reason") == "ControlPlaneDegraded", 30,
                     "nu degraded", operator)
    assert _ready(vc)["status"] == "False"
    assert _ready(vc)["message"] == "Deployment nu-scheduler has 0 of 1 replicas ready"
    apps.patch_namespaced_deployment("nu-scheduler", ns, {"spec": {"replicas": 0}})
    wait_for_vc(kube, ns, "nu", lambda vc: _ready(vc).get("status") == "True", 30, "nu recovered", operator)
    assert kube.runs(ns, "nu")["present"] == 1  # nothing to repair: no run

    # A workload that is gone: repaired by a run, without a spec change or a restart.
    apps.delete_namespaced_deployment("nu-apiserver", ns)
    wait_until(lambda: kube.runs(ns, "nu")["present"] == 2, COMPLETED, "nu repaired", operator.process)
    assert "repairing: Deployment nu-apiserver is missing" in operator.log()
    wait_for_vc(kube, ns, "nu", completed(), COMPLETED, "nu Completed again", operator)
    apps.read_namespaced_deployment("nu-apiserver", ns)
    assert stays(lambda: kube.runs(ns, "nu")["present"] == 2, 6)
