"""The operator is SIGKILLed in the middle of a run and started again: the work still gets done, once."""

from __future__ import annotations

from tests.integration.operator.operatorproc import alive, condition, phase, wait_for_vc
from tests.support.procs import wait_until

TIMEOUT = 180


def in_task(task_prefix: str):
    def check(vc):
        progress = ((vc or {}).get("status") or {}).get("progress") or {}
        return (progress.get("currentTask") or "").startswith(task_prefix)
    return check


def kill_mid_run(operator) -> list[int]:
    playbooks = operator.playbook_pids()
    assert playbooks, "no ansible-playbook was running"
    operator.kill()
    return playbooks


def no_orphans(playbooks: list[int]) -> None:
    # Whatever of the killed operator's run was still going, the restarted operator ends it before it runs
    # the playbook again, so two runs of one VirtualCluster never overlap.
    wait_until(lambda: not any(alive(pid) for pid in playbooks), 15, "the killed operator's playbook gone")


def test_killed_during_create_and_restarted_completes_without_duplicates(kube, operators):
    ns = kube.new_namespace(sleep=10)  # a long task in flight when the operator dies
    first = operators.start("first", "--namespace", ns)
    kube.create_vc(ns, "eta", {})
    wait_for_vc(kube, ns, "eta", in_task("Start the API server"), TIMEOUT, "eta half-way", first)
    orphans = kill_mid_run(first)
    assert kube.runs(ns, "eta")["present"] == 1
    assert phase(kube.vc(ns, "eta")) == "Preparing"

    kube.set_control(ns, sleep=1)
    second = operators.start("second", "--namespace", ns, runs_dir=first.runs_dir)  # a restart of the same
    no_orphans(orphans)
    assert "left over from run" in second.log()
    vc = wait_for_vc(kube, ns, "eta", lambda vc: phase(vc) == "Completed" and condition(vc).get("status") == "True",
                     TIMEOUT, "eta Completed after the restart", second)
    assert kube.runs(ns, "eta")["present"] == 2
    assert kube.labelled("ConfigMap", ns, "eta") == ["eta-controlplane"]
    assert kube.labelled("Secret", ns, "eta") == ["eta-admin-kubeconfig"]
    assert vc["status"]["kubeconfigSecretRef"]["name"] == "eta-admin-kubeconfig"
    assert vc["status"]["observedGeneration"] == vc["metadata"]["generation"]


def test_stopped_during_a_run_ends_its_playbook_and_the_next_start_completes(kube, operators):
    ns = kube.new_namespace(sleep=30)
    first = operators.start("first", "--namespace", ns)
    kube.create_vc(ns, "iota", {})
    wait_for_vc(kube, ns, "iota", in_task("Start etcd"), TIMEOUT, "iota in a long task", first)
    playbooks = first.playbook_pids()
    assert playbooks
    assert first.stop() == 0  # SIGTERM: kopf cancels the handler, which cancels the run
    wait_until(lambda: not any(alive(pid) for pid in playbooks), 5, "the playbook ended with a clean stop")

    kube.set_control(ns, sleep=0)
    second = operators.start("second", "--namespace", ns, runs_dir=first.runs_dir)
    wait_for_vc(kube, ns, "iota", lambda vc: phase(vc) == "Completed", TIMEOUT, "iota Completed", second)
    assert kube.runs(ns, "iota")["present"] == 2
    assert "left over from run" not in second.log()


def test_killed_during_delete_and_restarted_still_deletes(kube, operators):
    ns = kube.new_namespace(sleep=0)
    first = operators.start("first", "--namespace", ns)
    kube.create_vc(ns, "theta", {})
    wait_for_vc(kube, ns, "theta", lambda vc: phase(vc) == "Completed", TIMEOUT, "theta Completed", first)
    kube.set_control(ns, sleep=4)
    kube.delete_vc(ns, "theta")
    vc = wait_for_vc(kube, ns, "theta", in_task("Take the control plane down"), TIMEOUT, "theta's delete run", first)
    assert phase(vc) == "Deleting"
    orphans = kill_mid_run(first)
    assert kube.vc(ns, "theta") is not None, "the finalizer must hold the object while its delete run is unfinished"

    kube.set_control(ns, sleep=0)
    second = operators.start("second", "--namespace", ns, runs_dir=first.runs_dir)  # a restart of the same
    no_orphans(orphans)
    wait_for_vc(kube, ns, "theta", lambda vc: vc is None, TIMEOUT, "theta gone after the restart", second)
    runs = kube.runs(ns, "theta")
    assert runs["present"] == 1 and runs["absent"] == 2
    assert kube.labelled("ConfigMap", ns, "theta") == [] and kube.labelled("Secret", ns, "theta") == []
