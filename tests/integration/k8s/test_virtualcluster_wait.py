"""playbooks/tasks/virtualcluster_wait.yml (kosmos.kubenest.virtualcluster_wait) against a real API server, while
this test writes the status as the operator does: the wait prints each change and ends on Ready, Failed or time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import kubernetes
import pytest
import yaml

from tests.support.virtualclusters import ensure_namespace, install_crds

GROUP, VERSION, NS = "kosmos.io", "v1alpha1", "wait-tests"
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def custom(apiserver, api_client):
    install_crds(apiserver.kubeconfig)
    ensure_namespace(api_client, NS)
    return kubernetes.client.CustomObjectsApi(api_client)


def create(custom, name):
    return custom.create_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "VirtualCluster", "metadata": {"name": name},
        "spec": {"externalIP": "198.18.0.11"}})


def set_status(custom, name, status):
    custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, "virtualclusters", name, {"status": status},
                                                 _content_type="application/merge-patch+json")


def wait_play(apiserver, tmp_path, name, timeout) -> subprocess.Popen:
    """The playbooks' task file, as virtualcluster_apply.yml includes it, with the default output."""
    play = tmp_path / "wait.yml"
    play.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                     "vars": {"kubenest_vc_namespace": NS, "kubenest_vc_name": name,
                                              "kubenest_vc_wait_timeout": timeout},
                                     "tasks": [{"ansible.builtin.include_tasks": str(
                                         REPO / "playbooks/tasks/virtualcluster_wait.yml")}]}]))
    env = {**os.environ, "K8S_AUTH_KUBECONFIG": str(apiserver.kubeconfig), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.Popen([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(play),
                             "-e", f"ansible_python_interpreter={sys.executable}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def finished(proc: subprocess.Popen) -> tuple[int, str]:
    out = proc.communicate(timeout=180)[0]
    return proc.returncode, out


def test_the_wait_prints_each_phase_and_step_and_ends_when_the_current_spec_is_ready(custom, apiserver, tmp_path):
    generation = create(custom, "steps")["metadata"]["generation"]
    steps = [{"phase": "Preparing", "progress": {"runID": "r1", "summary": "3/40 Start etcd"}},
             {"progress": {"runID": "r1", "summary": "31/40 Step Kubelet"}, "nodesReady": "0/1"},
             {"phase": "Completed", "observedGeneration": generation, "nodesReady": "1/1",
              "endpoint": "https://198.18.0.11:31443", "kubernetesVersion": "v1.36.3",
              "kubeconfigSecretRef": {"name": "steps-admin-kubeconfig", "key": "kubeconfig"},
              "progress": {"runID": "r1", "summary": "40/40 done"},
              "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "ok",
                              "lastTransitionTime": "2026-12-03T12:00:00Z"}]}]

    # Each status is written once the wait has printed the one before: the test follows the wait, not a clock.
    proc = wait_play(apiserver, tmp_path, "steps", 120)
    lines, seen = [], []
    for line in proc.stdout:
        seen.append(line)
        if line.strip().startswith(f"{NS}/steps: "):
            lines.append(line.strip())
            if len(lines) <= len(steps):
                set_status(custom, "steps", steps[len(lines) - 1])
        if "PLAY RECAP" in line:
            break
    rc, rest = finished(proc)
    assert rc == 0, rest
    assert lines == [f"{NS}/steps: no status yet (waiting for the operator to take it up)",
                     f"{NS}/steps: Preparing, 3/40 Start etcd",
                     f"{NS}/steps: Preparing, 31/40 Step Kubelet, nodes 0/1",
                     f"{NS}/steps: Completed, 40/40 done, nodes 1/1"]
    output = "".join(seen) + rest
    assert "RETRYING" not in output
    assert (f"{NS}/steps is Ready at https://198.18.0.11:31443, Kubernetes v1.36.3, nodes 1/1; admin kubeconfig in "
            "Secret steps-admin-kubeconfig") in " ".join(output.split())


def test_a_virtual_cluster_the_operator_gave_up_on_fails_the_wait_with_its_reason(custom, apiserver, tmp_path):
    create(custom, "given-up")
    set_status(custom, "given-up", {"phase": "Failed", "reason": "Unsatisfiable",
                                    "message": "1 of 2 nodes available"})
    started = time.monotonic()
    rc, out = finished(wait_play(apiserver, tmp_path, "given-up", 120))
    assert rc != 0 and time.monotonic() - started < 60
    assert f"VirtualCluster {NS}/given-up failed: Failed Unsatisfiable 1 of 2 nodes available" in out


def test_a_wait_that_runs_out_of_time_says_so_with_the_last_status(custom, apiserver, tmp_path):
    create(custom, "slow")
    set_status(custom, "slow", {"phase": "Preparing", "message": "running virtualcluster.yml (state present)"})
    rc, out = finished(wait_play(apiserver, tmp_path, "slow", 3))
    assert rc != 0
    assert f"VirtualCluster {NS}/slow is not Ready in time: Preparing running virtualcluster.yml (state present)" in out
