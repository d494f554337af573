"""The real operator against a real API server, running the test playbook through ansible-runner."""

from __future__ import annotations

import base64
import datetime
import re
import subprocess
import time

from tests.integration.operator.conftest import timings
from tests.integration.operator.operatorproc import VENV_BIN, condition, phase, stays, wait_for_vc
from tests.support.procs import wait_until

COMPLETED = 120  # seconds a run of the test playbook may take, with room for a slow machine


def completed(generation: int | None = None):
    def check(vc):
        status = (vc or {}).get("status") or {}
        return (status.get("phase") == "Completed" and condition(vc).get("status") == "True"
                and (generation is None or status.get("observedGeneration", 0) >= generation))
    return check


def test_virtualcluster_reaches_completed_with_kubeconfig(kube, operators):
    ns = kube.new_namespace(sleep=1)
    operator = operators.start("operator", "--namespace", ns)
    seen_progress, seen_phases = [], []

    def observe(vc):
        status = (vc or {}).get("status") or {}
        seen_phases.append(status.get("phase"))
        progress = status.get("progress") or {}
        if progress.get("currentTask") and (not seen_progress or seen_progress[-1] != progress):
            seen_progress.append(progress)

    started = time.monotonic()
    kube.create_vc(ns, "alpha", {"promoteResources": {"nodes": ["node-a", "node-b"]}})
    vc = wait_for_vc(kube, ns, "alpha", completed(), COMPLETED, "alpha Completed", operator, observe)
    timings["VirtualCluster create -> Completed (test playbook, 4 x 1 s steps)"] = time.monotonic() - started

    status = vc["status"]
    assert status["kubeconfigSecretRef"] == {"name": "alpha-admin-kubeconfig", "key": "kubeconfig"}
    assert status["endpoint"] == "https://127.0.0.1:6443"
    assert status["nodes"] == [{"name": "node-a", "ready": True}, {"name": "node-b", "ready": True}]
    assert status["nodeCount"] == 2 and status["nodesReady"] == "2/2"
    assert status["observedGeneration"] == vc["metadata"]["generation"]
    kubeconfig = kube.secret_text(ns, "alpha-admin-kubeconfig", "kubeconfig")
    assert "kubeconfig" not in vc["spec"]  # only with --spec-kubeconfig
    assert "Preparing" in seen_phases
    # Progress moved while the run went: several distinct tasks, the role's among them, counts rising.
    tasks = [p["currentTask"] for p in seen_progress]
    assert len(set(tasks)) >= 3, seen_progress
    assert any(p.get("currentRole") == "fake_control_plane" for p in seen_progress), seen_progress
    done = [p["tasksDone"] for p in seen_progress]
    assert done == sorted(done) and done[-1] > done[0], seen_progress
    final = status["progress"]
    assert final["tasksDone"] == final["tasksTotal"] > 0 and "currentTask" not in final
    assert final["summary"] == f"{final['tasksDone']}/{final['tasksDone']} done"
    assert any(p.get("summary", "").endswith(f" {p['currentTask']}") for p in seen_progress if p.get("currentTask"))

    # One run, and the spec.kubeconfig write-back did not start another.
    assert stays(lambda: kube.runs(ns, "alpha") == {"present": 1, "absent": 0}, 8)
    # The credential appears nowhere but in the Secret.
    token = next(line.split('"')[1] for line in kubeconfig.splitlines() if "token:" in line)
    for text, where in ((operator.log(), "operator log"), (kube.events_text(ns), "events"),
                        (str(kube.vc(ns, "alpha")["status"]), "status"),
                        (str(kube.vc(ns, "alpha")["metadata"]), "metadata")):
        assert token not in text and base64.b64encode(kubeconfig.encode()).decode() not in text, where
    # The run's directory is kept for debugging (--artifacts-keep 3) and holds no credential either.
    assert len(list(operator.runs_dir.iterdir())) == 1
    for path in operator.runs_dir.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def test_spec_change_runs_exactly_once_more(kube, operators):
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "beta", {})
    wait_for_vc(kube, ns, "beta", completed(), COMPLETED, "beta Completed", operator)
    assert stays(lambda: kube.runs(ns, "beta")["present"] == 1, 5)

    phases = set()
    changed = kube.patch_vc_spec(ns, "beta", {"externalIP": "192.0.2.10"})
    wait_for_vc(kube, ns, "beta", completed(changed["metadata"]["generation"]), COMPLETED,
                "beta Completed after the change", operator, lambda vc: phases.add(phase(vc)))
    assert "Updating" in phases and "Preparing" not in phases
    assert '"externalIP": "192.0.2.10"' in kube.core.read_namespaced_config_map("beta-controlplane", ns).data["spec"]
    # Exactly one more run, and no loop from the status and spec.kubeconfig writes that follow it.
    assert stays(lambda: kube.runs(ns, "beta")["present"] == 2, 15)
    assert kube.vc(ns, "beta")["status"]["observedGeneration"] == kube.vc(ns, "beta")["metadata"]["generation"]


def test_label_and_annotation_edits_run_nothing(kube, operators):
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "labelled", {})
    wait_for_vc(kube, ns, "labelled", completed(), COMPLETED, "labelled Completed", operator)
    assert stays(lambda: kube.runs(ns, "labelled")["present"] == 1, 5)
    before = kube.vc(ns, "labelled")
    kube.custom.patch_namespaced_custom_object(
        "kosmos.io", "v1alpha1", ns, "virtualclusters", "labelled",
        {"metadata": {"labels": {"team": "blue"}, "annotations": {"example.com/owner": "someone"}}})
    assert stays(lambda: kube.runs(ns, "labelled")["present"] == 1, 10)
    after = kube.vc(ns, "labelled")
    assert after["metadata"]["labels"]["team"] == "blue"
    assert after["status"]["phase"] == "Completed" and condition(after).get("status") == "True"
    assert after["metadata"]["generation"] == before["metadata"]["generation"]


def test_spec_change_during_a_run_is_picked_up_afterwards(kube, operators):
    ns = kube.new_namespace(sleep=2)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "gamma", {})
    wait_for_vc(kube, ns, "gamma", lambda vc: ((vc or {}).get("status") or {}).get("progress", {}).get(
        "currentRole") == "fake_control_plane", COMPLETED, "gamma's first run in its role", operator)
    changed = kube.patch_vc_spec(ns, "gamma", {"imageRepository": "registry.example/kubenest"})
    vc = wait_for_vc(kube, ns, "gamma", completed(changed["metadata"]["generation"]), 2 * COMPLETED,
                     "gamma Completed with the new spec", operator)
    assert "registry.example/kubenest" in kube.core.read_namespaced_config_map("gamma-controlplane", ns).data["spec"]
    assert vc["status"]["observedGeneration"] == vc["metadata"]["generation"]
    assert stays(lambda: kube.runs(ns, "gamma")["present"] == 2, 8)


def test_permanent_failure_is_not_retried_until_the_spec_changes(kube, operators):
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "delta", {"imageRepository": "refuse.invalid"})
    vc = wait_for_vc(kube, ns, "delta", lambda vc: phase(vc) == "Failed", COMPLETED, "delta Failed", operator)
    ready = condition(vc)
    assert ready["status"] == "False" and ready["reason"] == "InvalidRequest"
    assert ready["message"] == "imageRepository refuse.invalid is refused"
    assert vc["status"]["reason"] == "InvalidRequest"
    assert vc["status"]["observedGeneration"] == vc["metadata"]["generation"]
    # No retry storm: with a 2 s backoff a retried failure would have run several times by now.
    assert stays(lambda: kube.runs(ns, "delta")["present"] == 1, 20)
    assert "kubeconfig" not in vc["spec"]
    # Nor after a restart: resuming does not run a spec that failed permanently.
    assert operator.stop() == 0
    operator = operators.start("restarted", "--namespace", ns)
    wait_until(lambda: "this spec failed permanently; change the spec" in operator.log(), 30, "delta skipped",
               operator.process)
    assert stays(lambda: kube.runs(ns, "delta")["present"] == 1, 5)

    changed = kube.patch_vc_spec(ns, "delta", {"imageRepository": "kubenest.local"})
    wait_for_vc(kube, ns, "delta", completed(changed["metadata"]["generation"]), COMPLETED,
                "delta Completed after the fix", operator)
    assert kube.runs(ns, "delta")["present"] == 2


def test_a_permanent_failure_fixed_elsewhere_runs_again_when_asked(kube, operators, apiserver):
    """A cause outside the spec (here someone else's Secret where the tenant's etcd CA would go) leaves no spec to
    change: `kubectl kubenest retry` asks for one more run, and the annotation it writes runs nothing else."""
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.core.create_namespaced_secret(ns, {"metadata": {"name": "eps-etcd-pki"}, "stringData": {"ca.crt": "theirs"}})
    kube.create_vc(ns, "eps", {})
    vc = wait_for_vc(kube, ns, "eps", lambda vc: phase(vc) == "Failed", COMPLETED, "eps Failed", operator)
    assert condition(vc)["reason"] == "NotOwned" and f"Secret {ns}/eps-etcd-pki" in condition(vc)["message"]
    kube.core.delete_namespaced_secret("eps-etcd-pki", ns)
    # The cause is gone, the spec is the same: nothing runs by itself.
    assert stays(lambda: kube.runs(ns, "eps")["present"] == 1, 8)

    asked = subprocess.run([str(VENV_BIN / "kubectl-kubenest"), "--kubeconfig", str(apiserver.kubeconfig), "retry",
                            f"{ns}/eps"], capture_output=True, text=True, timeout=60, check=False)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith(f"virtualcluster {ns}/eps runs its spec again (it had failed for good: NotOwned: "
                                   f"Secret {ns}/eps-etcd-pki"), asked.stdout
    vc = wait_for_vc(kube, ns, "eps", completed(), COMPLETED, "eps Completed once asked", operator)
    assert kube.runs(ns, "eps")["present"] == 2
    assert vc["status"]["observedGeneration"] == vc["metadata"]["generation"]
    assert "asked by the annotation kubenest.kosmos.io/retry=" in operator.log()

    # Removing the annotation is no request: no run.
    kube.custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", ns, "virtualclusters", "eps",
                                               {"metadata": {"annotations": {"kubenest.kosmos.io/retry": None}}})
    assert stays(lambda: kube.runs(ns, "eps")["present"] == 2, 8)
    wait_until(lambda: "kubenest.kosmos.io/retry was removed: nothing to run" in operator.log(), 30,
               "the removal seen", operator.process)

    # A name that holds no virtual cluster: said, with exit status 1.
    missing = subprocess.run([str(VENV_BIN / "kubectl-kubenest"), "--kubeconfig", str(apiserver.kubeconfig),
                              "retry", f"{ns}/nobody"], capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 1 and f"virtualcluster {ns}/nobody not found" in missing.stderr, missing.stderr


def test_transient_failures_are_retried_with_backoff(kube, operators):
    ns = kube.new_namespace(sleep=0, fail_first=2)
    operator = operators.start("operator", "--namespace", ns)
    failures, messages = [], set()

    def observe(vc):
        ready = condition(vc)
        messages.add(((vc or {}).get("status") or {}).get("message"))
        if ready.get("reason") == "RunFailed" and ready.get("message") not in failures:
            failures.append(ready.get("message"))
            assert phase(vc) == "Preparing", "a transient failure must not leave the phase Pending or Failed"

    started = time.monotonic()
    kube.create_vc(ns, "epsilon", {})
    wait_for_vc(kube, ns, "epsilon", completed(), 3 * COMPLETED, "epsilon Completed", operator, observe)
    elapsed = time.monotonic() - started
    assert kube.runs(ns, "epsilon")["present"] == 3
    assert failures and "simulated outage" in failures[0]
    # Retries waited 2 s and then 4 s (--backoff-base 2).
    assert any(m and m.endswith("(retrying in 2s)") for m in messages), messages
    assert any(m and m.endswith("(retrying in 4s)") for m in messages), messages
    assert elapsed > 6
    assert stays(lambda: kube.runs(ns, "epsilon")["present"] == 3, 6)


def test_delete_runs_the_playbook_and_releases_the_finalizer(kube, operators):
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "zeta", {})
    vc = wait_for_vc(kube, ns, "zeta", completed(), COMPLETED, "zeta Completed", operator)
    assert vc["metadata"]["finalizers"] == ["kubenest.kosmos.io/finalizer"]
    assert kube.labelled("ConfigMap", ns, "zeta") == ["zeta-controlplane"]

    kube.delete_vc(ns, "zeta")
    wait_for_vc(kube, ns, "zeta", lambda vc: vc is None, COMPLETED, "zeta gone", operator)
    assert kube.runs(ns, "zeta") == {"present": 1, "absent": 1}
    assert kube.labelled("ConfigMap", ns, "zeta") == [] and kube.labelled("Secret", ns, "zeta") == []


def test_each_phase_and_each_node_gained_or_given_back_is_an_event(kube, operators):
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "eta", {"promoteResources": {"nodes": ["node-a", "node-b"]}})
    wait_for_vc(kube, ns, "eta", completed(), COMPLETED, "eta Completed", operator)
    kube.delete_vc(ns, "eta")
    wait_for_vc(kube, ns, "eta", lambda vc: vc is None, COMPLETED, "eta gone", operator)

    def described() -> set[str]:  # what kubectl describe vc lists (events within a second come in any order)
        found = kube.core.list_namespaced_event(ns, field_selector="involvedObject.name=eta").items
        return {re.sub(r"in \d+s$", "in Ns", f"{e.type} {e.reason} {e.message}") for e in found
                if e.reason in ("Preparing", "Completed", "Deleting", "NodePromoted", "NodeReturned")}

    wait_until(lambda: len(described()) == 7, 30, "the events of eta", operator.process)
    assert described() == {"Normal Preparing new -> Preparing: running virtualcluster.yml (state present)",
                           "Normal NodePromoted node-a joined the virtual cluster",
                           "Normal NodePromoted node-b joined the virtual cluster",
                           "Normal Completed Preparing -> Completed: virtualcluster.yml succeeded in Ns",
                           "Normal Deleting Completed -> Deleting: running virtualcluster.yml (state absent)",
                           "Normal NodeReturned node-a left the virtual cluster",
                           "Normal NodeReturned node-b left the virtual cluster"}


def test_deleting_during_a_stuck_create_cancels_it_and_tears_down(kube, operators):
    # A create whose first step takes ten minutes, as one waiting for a pod that can never start.
    ns = kube.new_namespace(sleep=600)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "stuck", {})
    # Counted: the run is past its first tasks and in its long step (the log line comes before that).
    wait_until(lambda: kube.runs(ns, "stuck")["present"] == 1, 60, "the create run to be under way")
    kube.set_control(ns, sleep=0)  # read by the next run only: the teardown is quick
    kube.delete_vc(ns, "stuck")
    # far less than the create would take: it was cancelled, not waited for
    wait_for_vc(kube, ns, "stuck", lambda vc: vc is None, COMPLETED, "stuck gone", operator)
    assert "deletion requested: ending the running create" in operator.log()
    assert re.search(r"run \S+: canceled after", operator.log())
    assert kube.runs(ns, "stuck") == {"present": 1, "absent": 1}
    assert kube.labelled("ConfigMap", ns, "stuck") == [] and kube.labelled("Secret", ns, "stuck") == []


def run_windows_by_id(log: str) -> dict[str, tuple[datetime.datetime, datetime.datetime]]:
    """(start, end) of every run by run id, from the operator's log lines "run <id>: ... with state" and
    "run <id>: ... after"."""
    starts, ends = {}, {}
    for line in log.splitlines():
        match = re.match(r"\[([0-9-]+ [0-9:,]+)\].* run (\S+): (.*)", line)
        if match:
            at = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
            (starts if " with state " in match.group(3) else ends)[match.group(2)] = at
    return {run: (starts[run], ends[run]) for run in starts if run in ends}


def run_windows(log: str) -> list[tuple[datetime.datetime, datetime.datetime]]:
    return sorted(run_windows_by_id(log).values())


def test_max_parallel_queues_runs(kube, operators):
    ns = kube.new_namespace(sleep=1)
    # No look meanwhile, as in the runner-slot test below.
    operator = operators.start("operator", "--namespace", ns, "--max-parallel", "1", "--resync-interval", "3600")
    kube.create_vc(ns, "kappa", {})
    kube.create_vc(ns, "lambda", {})
    queued = set()

    def both_done() -> bool:
        vcs = {name: kube.vc(ns, name) for name in ("kappa", "lambda")}
        queued.update(name for name, vc in vcs.items() if phase(vc) == "Pending"
                      and vc["status"].get("message") == "waiting for a free runner slot")
        return all(completed()(vc) for vc in vcs.values())

    wait_until(both_done, 2 * COMPLETED, "kappa and lambda Completed", operator.process, interval=0.25)
    assert len(queued) == 1
    first, second = run_windows(operator.log())
    assert second[0] >= first[1], "two runs at once despite --max-parallel 1"


def _tamper(kube, ns, name, value):
    return kube.custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", ns, "virtualclusters", name,
                                                      {"spec": {"kubeconfig": value}})


def test_spec_kubeconfig_is_kept_empty_and_cleared_when_someone_sets_it(kube, operators):
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "mu", {})
    wait_for_vc(kube, ns, "mu", completed(), COMPLETED, "mu Completed", operator)
    planted = base64.b64encode(b"apiVersion: v1\nclusters: [{cluster: {server: https://evil.example}}]").decode()
    _tamper(kube, ns, "mu", planted)
    vc = wait_for_vc(kube, ns, "mu", lambda vc: "kubeconfig" not in vc["spec"], 30, "spec.kubeconfig cleared",
                     operator)
    assert "removing it" in operator.log()
    assert stays(lambda: kube.runs(ns, "mu")["present"] == 1, 5)  # no run for it
    vc = kube.vc(ns, "mu")
    assert vc["status"]["observedGeneration"] == vc["metadata"]["generation"] and completed()(vc)


def test_with_spec_kubeconfig_it_is_written_and_restored_when_changed(kube, operators):
    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns, "--spec-kubeconfig")
    kube.create_vc(ns, "nu", {})
    vc = wait_for_vc(kube, ns, "nu", completed(), COMPLETED, "nu Completed", operator)
    kubeconfig = kube.secret_text(ns, "nu-admin-kubeconfig", "kubeconfig")
    assert base64.b64decode(vc["spec"]["kubeconfig"]).decode() == kubeconfig
    _tamper(kube, ns, "nu", base64.b64encode(b"server: https://evil.example").decode())
    wait_for_vc(kube, ns, "nu", lambda vc: base64.b64decode(vc["spec"].get("kubeconfig", "")).decode() == kubeconfig,
                30, "spec.kubeconfig restored", operator)
    assert "restoring it" in operator.log()
    assert stays(lambda: kube.runs(ns, "nu")["present"] == 1, 5)
    vc = kube.vc(ns, "nu")
    assert vc["status"]["observedGeneration"] == vc["metadata"]["generation"]


def test_one_namespace_cannot_hold_every_runner_slot(kube, operators):
    busy, other = kube.new_namespace("busy", sleep=2), kube.new_namespace("other", sleep=2)
    # No look meanwhile: it would find the stand-in's endpoint silent and take a Completed one out of Ready while
    # the others still run, on a machine slow enough for the runs to take longer than one resync interval.
    operator = operators.start("operator", "--namespace", busy, other, "--max-parallel", "2",
                               "--max-parallel-per-namespace", "1", "--resync-interval", "3600")
    kube.create_vc(busy, "xi", {})
    kube.create_vc(busy, "omicron", {})
    kube.create_vc(other, "pi", {})
    wait_until(lambda: all(completed()(kube.vc(ns, name)) for ns, name in
                           ((busy, "xi"), (busy, "omicron"), (other, "pi"))),
               3 * COMPLETED, "xi, omicron and pi Completed", operator.process, interval=0.5)
    windows = run_windows_by_id(operator.log())
    (b1, b2) = sorted(w for run, w in windows.items() if f"-{busy}." in run)
    (o1,) = [w for run, w in windows.items() if f"-{other}." in run]
    assert b2[0] >= b1[1], "two runs of one namespace at once despite --max-parallel-per-namespace 1"
    assert o1[0] < b1[1], "the other namespace had to wait for a free slot"


def test_a_restore_runs_only_once_it_has_handed_over(kube, operators):
    from kubenest_operator.restores import RESTORE_ANNOTATION

    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "restored", {}, annotations={RESTORE_ANNOTATION: "pending"})
    vc = wait_for_vc(kube, ns, "restored", lambda v: condition(v).get("reason") == "RestorePending", COMPLETED,
                     "restored to wait for its restore", operator)
    assert condition(vc)["status"] == "False" and "hand over" in condition(vc)["message"]
    # A run now would issue a fresh PKI where the restore puts the backed-up one.
    assert stays(lambda: kube.runs(ns, "restored") == {"present": 0, "absent": 0}, 8)
    kube.custom.patch_namespaced_custom_object("kosmos.io", "v1alpha1", ns, "virtualclusters", "restored", {
        "metadata": {"annotations": {RESTORE_ANNOTATION: "0f" * 32 + "/2"}}})
    wait_for_vc(kube, ns, "restored", completed(), COMPLETED, "restored Completed", operator)
    assert kube.runs(ns, "restored") == {"present": 1, "absent": 0}


def test_a_malformed_restore_annotation_fails_permanently_without_a_run(kube, operators):
    from kubenest_operator.restores import RESTORE_ANNOTATION

    ns = kube.new_namespace(sleep=0)
    operator = operators.start("operator", "--namespace", ns)
    kube.create_vc(ns, "forged", {}, annotations={RESTORE_ANNOTATION: "{{ lookup('pipe', 'id') }}"})
    vc = wait_for_vc(kube, ns, "forged", lambda v: condition(v).get("reason") == "InvalidRestore", COMPLETED,
                     "forged to be refused", operator)
    assert RESTORE_ANNOTATION in condition(vc)["message"]
    assert stays(lambda: kube.runs(ns, "forged") == {"present": 0, "absent": 0}, 5)
