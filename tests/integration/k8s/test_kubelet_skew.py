"""The version-skew policy between a node's kubelet and its tenant's API servers, kept before a node is touched:
the real tasks on a real API server, the version a kubelet reports as a Node's status (written here as a kubelet
writes it) and the pinned kubelet's own `--version`.

- Promotion (host_kubelet.yml): a tenant that would run the host's kubelet, and is on an older minor than it, is
  refused naming both versions; a tenant of the kubelet's minor is not. A kubelet program the site names is judged
  by its own `--version`, and one that does not run is refused too.
- Upgrade (kubelet_upgrade.yml): the kubelet a node moves to is the program it would run, by its `--version`. A
  program newer than the tenant's new version is refused before the node is cordoned; one the node already runs (a
  tenant whose nodes keep the host's kubelet, a minor behind the new version) leaves the node alone, where it was
  once drained and waited on for a version its kubelet would never report.
"""

from __future__ import annotations

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

from sandbox.machines.config import REPO_ROOT
from tests.support import k8sbin
from tests.support.playbook import run_playbook

HOST_KUBELET_TASKS = REPO_ROOT / "roles/node_promote/tasks/host_kubelet.yml"
NODE = "skew-node"
# How the play output names a task of the role's.
ROLE = "kosmos.kubenest.node_promote : "
KUBELET = k8sbin.binary("kubelet") if (k8sbin.bin_dir() / "kubelet").exists() else None
PINNED = k8sbin.versions()["KUBERNETES_VERSION"]
MAJOR, MINOR = (int(part) for part in PINNED.lstrip("v").split(".")[:2])
OLDER = f"v{MAJOR}.{MINOR - 1}.4"
NEWER = f"v{MAJOR}.{MINOR + 1}.0"


@pytest.fixture
def node(api_client):
    """A Node reporting the pinned kubelet's version, and the tenant's kube-proxy DaemonSet rolled out."""
    core, apps = kubernetes.client.CoreV1Api(api_client), kubernetes.client.AppsV1Api(api_client)
    core.create_node({"metadata": {"name": NODE}})
    core.patch_node_status(NODE, {"status": {
        "nodeInfo": {"kubeletVersion": PINNED, "kubeProxyVersion": "", "machineID": "", "systemUUID": "",
                     "bootID": "", "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                     "operatingSystem": "linux", "architecture": "amd64"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}]}})
    labels = {"k8s-app": "kube-proxy"}
    apps.create_namespaced_daemon_set("kube-system", {
        "metadata": {"name": "kube-proxy"},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "containers": [{"name": "kube-proxy", "image": "kubenest.local/kube-proxy:" + PINNED}]}}}})
    # No controller-manager here: the status a rolled-out DaemonSet on no node has.
    apps.patch_namespaced_daemon_set_status("kube-proxy", "kube-system", {"status": {
        "observedGeneration": 1, "desiredNumberScheduled": 0, "currentNumberScheduled": 0,
        "numberMisscheduled": 0, "numberReady": 0, "updatedNumberScheduled": 0}})
    yield core
    core.delete_node(NODE)
    try:
        apps.delete_namespaced_daemon_set("kube-proxy", "kube-system")
    except ApiException as exc:
        if exc.status != 404:
            raise


def _play(tmp_path, apiserver, tasks):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {NODE: {
        "ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}}}}))
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"name": "skew", "hosts": NODE, "gather_facts": False, "tasks": tasks}]))
    return run_playbook(play, inventory, tmp_path / "control")


def _promotion(tmp_path, apiserver, version, kubelet_bin=""):
    return _play(tmp_path, apiserver, [
        {"name": "Look up the host Node", "kosmos.kubenest.kube_info": {
            "kubeconfig": str(apiserver.kubeconfig), "kind": "Node", "name": NODE},
         "register": "node_promote_host_node"},
        {"name": "check", "ansible.builtin.include_tasks": str(HOST_KUBELET_TASKS), "vars": {
            "node_promote_vc": {"namespace": "t", "name": "vc", "kubernetes_version": version},
            "node_promote_kubelet_own_version": False, "node_promote_kubelet_bin": kubelet_bin}}])


def test_a_tenant_older_than_the_hosts_kubelet_is_refused_before_promotion_naming_both(node, apiserver, tmp_path):
    same = _promotion(tmp_path, apiserver, PINNED)
    assert same.rc == 0, same.stderr
    assert not same.task("Check that the tenant may run the host's kubelet", NODE).get("failed")

    refused = _promotion(tmp_path, apiserver, OLDER)
    assert refused.rc != 0
    message = refused.task("Check that the tenant may run the host's kubelet", NODE)["msg"]
    assert message.startswith(f"[kubenest:permanent:KubeletVersionSkew] {NODE} is left in the host cluster "
                              f"untouched: the tenant would run its host kubelet, and kubelet {PINNED} is newer "
                              f"than the API servers' {OLDER}")
    assert "kubenest_kubelet_binaries" in message


@pytest.mark.skipif(KUBELET is None, reason="the pinned kubelet is built with `make k8s`")
def test_a_kubelet_program_of_the_sites_is_judged_by_its_own_version_before_promotion(node, apiserver, tmp_path):
    """node_promote_kubelet_bin: the program's `--version` on the node, not the host Node's kubelet, is what the
    tenant would run; a program that does not run there is refused as well, before anything changes."""
    check = "Check that the tenant may run the site's kubelet program"
    same = _promotion(tmp_path, apiserver, PINNED, str(KUBELET))
    assert same.rc == 0, same.stderr
    assert not same.task(check, NODE).get("failed")
    assert same.task("Check that the tenant may run the host's kubelet", NODE).get("skipped")

    refused = _promotion(tmp_path, apiserver, OLDER, str(KUBELET))
    assert refused.rc != 0
    assert refused.task(check, NODE)["msg"].startswith(
        f"[kubenest:permanent:KubeletVersionSkew] {NODE} is left in the host cluster untouched: the tenant would "
        f"run {KUBELET}, and kubelet {PINNED} is newer than the API servers' {OLDER}")

    missing = tmp_path / "no-kubelet"
    absent = _promotion(tmp_path, apiserver, PINNED, str(missing))
    assert absent.rc != 0
    message = absent.task(check, NODE)["msg"]
    assert message.startswith(f"[kubenest:permanent:KubeletProgram] {NODE} is left in the host cluster untouched: "
                              f"the kubelet program node_promote_kubelet_bin names, {missing}, does not run there ("), (
        message)
    assert "not found" in message, message


def _upgrade(tmp_path, apiserver, version):
    return _play(tmp_path, apiserver, [{"name": "upgrade", "ansible.builtin.include_role": {
        "name": "kosmos.kubenest.node_promote", "tasks_from": "kubelet_upgrade.yml"}, "vars": {
            "node_promote_vc": {"namespace": "t", "name": "vc", "kubernetes_version": version},
            "node_promote_tenant_kubeconfig": str(apiserver.kubeconfig),
            # The record of how the host ran the node: here the pinned kubelet, run only for its --version.
            "node_promote_host_layout": {"kubelet_program": str(KUBELET)},
            "node_promote_kubelet_binaries": {}, "node_promote_ready_timeout": 10}}])


@pytest.mark.skipif(KUBELET is None, reason="the pinned kubelet is built with `make k8s`")
def test_an_upgrade_moves_a_node_only_to_a_kubelet_the_policy_allows_and_not_to_the_one_it_runs(
        node, apiserver, tmp_path):
    refused = _upgrade(tmp_path, apiserver, OLDER)
    assert refused.rc != 0
    message = refused.task(ROLE + "Check that the kubelet the node moves to may serve the new version", NODE)["msg"]
    assert message.startswith(f"[kubenest:permanent:KubeletVersionSkew] {NODE} keeps its kubelet {PINNED}: "
                              f"it would move to {KUBELET}, and kubelet {PINNED} is newer than the API servers' "
                              f"{OLDER}")
    untouched = node.read_node(NODE)
    assert not untouched.spec.unschedulable
    assert "kubenest.kosmos.io/kubelet-upgrade" not in (untouched.metadata.annotations or {})

    # The control plane moved a minor up; the node keeps the host's kubelet, which the policy allows.
    kept = _upgrade(tmp_path, apiserver, NEWER)
    assert kept.rc == 0, kept.stderr
    target = kept.task(ROLE + "Note the kubelet the node moves to", NODE)["ansible_facts"]
    assert target["node_promote_kubelet_target"] == PINNED
    assert kept.task(ROLE + "Mark the node cordoned for the upgrade", NODE).get("skipped")
    assert kept.task(ROLE + "Drain the node in the tenant", NODE).get("skipped")
    after = node.read_node(NODE)
    assert not after.spec.unschedulable and after.status.node_info.kubelet_version == PINNED
