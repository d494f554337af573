"""The machines whose released etcd volumes a run wipes are reached pinned to the agent certificates their
GlobalNodes record, as every other run's nodes are: the real tasks on a real API server, the real agent over
mutual TLS. A machine that was once a tenant's node had its agent re-keyed; a copy of the old key kept by the
tenant must not receive the wipe."""

from __future__ import annotations

import hashlib

import kubernetes
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes.client.rest import ApiException

from sandbox.machines.config import REPO_ROOT
from tests.support.agentproc import AgentProcess, shutdown_muxes
from tests.support.playbook import run_playbook

RELEASED_TASKS = REPO_ROOT / "roles/local_volumes/tasks/released.yml"
NODE, PV, CLASS = "lv-pins-node", "lv-pins-vol-001", "kubenest-lv-pins"
GROUP, VERSION, PLURAL = "kosmos.io", "v1alpha1", "globalnodes"


def _absent(delete, *args):
    try:
        delete(*args)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _clean(core, custom):
    # No controller-manager here to drop the PV's protection finalizer once nothing uses it: the test does.
    try:
        core.patch_persistent_volume(PV, {"metadata": {"finalizers": None}})
    except ApiException as exc:
        if exc.status != 404:
            raise
    for delete, args in ((core.delete_persistent_volume, (PV,)), (core.delete_node, (NODE,)),
                         (custom.delete_cluster_custom_object, (GROUP, VERSION, PLURAL, NODE))):
        _absent(delete, *args)


@pytest.fixture
def released_volume(api_client, kosmos_crds):
    """A released pool volume on node NODE (InternalIP 127.0.0.1), and NODE's GlobalNode."""
    core, custom = kubernetes.client.CoreV1Api(api_client), kubernetes.client.CustomObjectsApi(api_client)
    _clean(core, custom)
    core.create_node({"metadata": {"name": NODE}})
    core.patch_node_status(NODE, {"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}})
    core.create_persistent_volume({
        "metadata": {"name": PV, "labels": {"kosmos.io/local-volume": CLASS, "kosmos.io/local-volume-node": NODE}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": CLASS,
                 "persistentVolumeReclaimPolicy": "Retain", "local": {"path": "/var/lib/kubenest/volumes/vol-001"},
                 "claimRef": {"namespace": "gone", "name": "etcd-data", "uid": "0b5e6f1e-0000-4000-8000-000000000001"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}]}}}})
    core.patch_persistent_volume_status(PV, {"status": {"phase": "Released"}})
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode", "metadata": {"name": NODE},
        "spec": {"nodeIP": "127.0.0.1", "labels": {}}})

    def record(pins):
        custom.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, NODE, {"status": {
            "state": "free", "agent": {"certificateSHA256": pins}}})
    yield record
    _clean(core, custom)


@pytest.fixture
def agent(tmp_path):
    proc = AgentProcess.with_fresh_pki(tmp_path / "node").start()
    served = x509.load_pem_x509_certificate((proc.pki / "node1.crt").read_bytes()).public_bytes(Encoding.DER)
    yield proc, hashlib.sha256(served).hexdigest()
    shutdown_muxes(tmp_path / "control")
    proc.stop()


def _run(tmp_path, apiserver, agent_proc):
    files = agent_proc.client_files
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"kubenest_agent_ca_file": files["ca_file"], "kubenest_agent_cert_file": files["cert_file"],
                 "kubenest_agent_key_file": files["key_file"], "ansible_port": agent_proc.port,
                 "ansible_python_interpreter": "/usr/bin/python3"},
        "hosts": {"localhost": {"ansible_connection": "local"}}}}))
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([
        {"name": "controller", "hosts": "localhost", "gather_facts": False, "tasks": [
            {"name": "find", "ansible.builtin.include_tasks": str(RELEASED_TASKS),
             "vars": {"local_volumes_kubeconfig": str(apiserver.kubeconfig), "local_volumes_storage_class": CLASS,
                      "local_volumes_dir": "/var/lib/kubenest/volumes", "local_volumes_claims": [],
                      "local_volumes_release_retries": 1}}]},
        {"name": "node", "hosts": "kubenest_local_volumes_reclaim", "gather_facts": False, "tasks": [
            {"name": "t", "ansible.builtin.ping": {}}]},
    ]))
    return run_playbook(play, inventory, tmp_path / "control")


def test_a_machine_whose_agent_the_globalnode_no_longer_lists_gets_no_wipe(
        released_volume, agent, apiserver, tmp_path):
    agent_proc, _served = agent
    released_volume(["00" * 32])  # re-keyed since: what answers is a copy of the old key
    result = _run(tmp_path, apiserver, agent_proc)
    assert result.host_stats(NODE)["unreachable"] == 1
    assert "not the one recorded for it" in result.task("t", NODE)["msg"]


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "none-recorded"])
def test_the_recorded_agent_or_any_the_ca_signed_when_none_is_recorded_is_reached(
        released_volume, agent, apiserver, tmp_path, recorded):
    agent_proc, served = agent
    released_volume([served] if recorded else [])
    result = _run(tmp_path, apiserver, agent_proc)
    assert result.rc == 0, result.stderr
    assert result.task("t", NODE)["ping"] == "pong"
