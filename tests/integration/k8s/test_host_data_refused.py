"""A node whose host pods would leave data on it is refused before promotion touches it: the real tasks on a real
API server (pods bound to the node by name, as the scheduler binds them; a local PersistentVolume of the node)."""

from __future__ import annotations

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

from sandbox.machines.config import REPO_ROOT
from tests.support.playbook import run_playbook

HOST_DATA_TASKS = REPO_ROOT / "roles/node_promote/tasks/host_data.yml"
NODE, NS = "hd-node", "hd-shop"


def _absent(call, *args):
    try:
        call(*args)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def host(api_client):
    core = kubernetes.client.CoreV1Api(api_client)
    # No controller-manager here to make the namespace's default service account: the test does.
    for create, args in ((core.create_namespace, ({"metadata": {"name": NS}},)),
                         (core.create_namespaced_service_account, (NS, {"metadata": {"name": "default"}}))):
        try:
            create(*args)
        except ApiException as exc:
            if exc.status != 409:
                raise
    made = []

    def pod(name, volumes, mounts):
        core.create_namespaced_pod(NS, {"metadata": {"name": name}, "spec": {
            "nodeName": NODE, "volumes": volumes, "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "kubenest.local/pause:3.10", "volumeMounts": mounts}]}})
        made.append(name)

    yield core, pod
    for name in made:
        core.delete_namespaced_pod(name, NS, grace_period_seconds=0)
    _absent(core.patch_persistent_volume, "hd-pv", {"metadata": {"finalizers": None}})
    _absent(core.delete_persistent_volume, "hd-pv")


def _run(tmp_path, apiserver):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {NODE: {"ansible_connection": "local"}}}}))
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"name": "check", "hosts": NODE, "gather_facts": False, "tasks": [
        {"name": "data", "ansible.builtin.include_tasks": str(HOST_DATA_TASKS),
         "vars": {"node_promote_host_kubeconfig": str(apiserver.kubeconfig)}}]}]))
    return run_playbook(play, inventory, tmp_path / "control")


def test_a_node_with_host_data_is_refused_naming_each_pod_and_a_clean_one_passes(host, apiserver, tmp_path):
    core, pod = host
    pod("reader", [{"name": "clock", "hostPath": {"path": "/etc/localtime"}}],
        [{"name": "clock", "mountPath": "/etc/localtime", "readOnly": True}])
    clean = _run(tmp_path, apiserver)
    assert clean.rc == 0, clean.stderr

    pod("db-0", [{"name": "data", "hostPath": {"path": "/srv/db"}}], [{"name": "data", "mountPath": "/var/db"}])
    core.create_persistent_volume({"metadata": {"name": "hd-pv"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "hd-local",
        "local": {"path": "/srv/queue"}, "claimRef": {"namespace": NS, "name": "queue"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}]}}}})
    pod("queue", [{"name": "q", "persistentVolumeClaim": {"claimName": "queue"}}],
        [{"name": "q", "mountPath": "/q"}])
    refused = _run(tmp_path, apiserver)
    assert refused.rc != 0
    message = refused.task("Check that no host pod keeps data on the node", NODE)["msg"]
    assert message.startswith(f"{NODE} is left in the host cluster untouched: the host's pods keep data on it")
    assert f"{NS}/db-0 (hostPath /srv/db, written)" in message
    assert f"{NS}/queue (PersistentVolume hd-pv on the node)" in message
    assert "reader" not in message
