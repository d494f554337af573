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
