"""The calico role against a real kube-apiserver of its own: a check-mode run is a server-side dry run of every
object (the API server validates them, nothing is written), a real run lands them with Calico's kinds served, a
second run changes nothing, and a bad setting fails before anything changes."""

from __future__ import annotations

import json
import sys

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from tests.support.apiserver import ApiServer
from tests.support.playbook import run_playbook, write_play

CALICO = "crd.projectcalico.org"


@pytest.fixture(scope="module")
def cluster(k8s_bin_dir):
    # a cluster of its own: Calico's cluster-wide kinds and roles stay out of the tier's shared API server
    with ApiServer() as api:
        client = kubernetes.config.new_client_from_config(config_file=str(api.kubeconfig))
        yield api, client
        client.close()


def _play(tmp_path, api, **role_vars):
    tasks = [{"name": "Pod network", "ansible.builtin.include_role": {"name": "kosmos.kubenest.calico"},
              "vars": {"calico_kubeconfig": str(api.kubeconfig), "calico_api_server_host": "198.18.0.11",
                       "calico_api_server_port": 31443, **role_vars}}]
    playbook = write_play(tmp_path / "calico.yml", tasks, hosts="localhost", connection="local")
    inventory = tmp_path / "hosts"
    inventory.write_text(f"localhost ansible_python_interpreter={sys.executable}\n")
    return playbook, inventory


def _daemonset(client):
    try:
        return kubernetes.client.AppsV1Api(client).read_namespaced_daemon_set("calico-node", "kube-system")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _calico_crds(client) -> list[str]:
    crds = kubernetes.client.ApiextensionsV1Api(client).list_custom_resource_definition().items
    return sorted(c.metadata.name for c in crds if c.spec.group == CALICO)


def test_check_mode_is_a_server_side_dry_run_that_writes_nothing(cluster, tmp_path):
    api, client = cluster
    playbook, inventory = _play(tmp_path, api)
    result = run_playbook(playbook, inventory, tmp_path / "cp", "--check")
    assert result.rc == 0, json.dumps(result.data)[-4000:]
    applied = next(task["hosts"]["localhost"] for play in result.data["plays"] for task in play["tasks"]
                   if task["task"]["name"].endswith("Pod network (Calico)"))
    assert applied["changed"] is True
    answered = [(o["kind"], o["metadata"]["name"]) for o in applied["objects"]]
    assert ("DaemonSet", "calico-node") in answered and ("CustomResourceDefinition", "ippools." + CALICO) in answered
    assert len(answered) == 38, answered  # every object came back as the server would have stored it
    daemonset = next(o for o in applied["objects"] if o["kind"] == "DaemonSet")
    assert daemonset["spec"]["revisionHistoryLimit"] == 10 and daemonset["metadata"]["uid"]  # server defaults
    # the API server answered for every object and stored none of them
    assert _calico_crds(client) == [] and _daemonset(client) is None


def test_the_role_applies_calico_with_its_kinds_served_and_a_second_run_changes_nothing(cluster, tmp_path):
    api, client = cluster
    playbook, inventory = _play(tmp_path, api, calico_labels={"team": "net"}, calico_pod_cidr="198.18.0.0/17")
    first = run_playbook(playbook, inventory, tmp_path / "cp")
    assert first.rc == 0, json.dumps(first.data)[-4000:]
    assert len(_calico_crds(client)) == 22
    daemonset = _daemonset(client)
    env = {e.name: e.value for e in daemonset.spec.template.spec.containers[0].env}
    assert env["CALICO_IPV4POOL_CIDR"] == "198.18.0.0/17" and daemonset.metadata.labels["team"] == "net"
    assert daemonset.spec.template.spec.containers[0].image.startswith("quay.io/calico/node:v")
    # the kinds are served: the pool calico-node would make at start can be written and read back
    custom = kubernetes.client.CustomObjectsApi(client)
    pool = {"apiVersion": f"{CALICO}/v1", "kind": "IPPool", "metadata": {"name": "probe"},
            "spec": {"cidr": "198.18.0.0/17", "vxlanMode": "Always", "natOutgoing": True}}
    custom.create_cluster_custom_object(CALICO, "v1", "ippools", pool)
    assert custom.get_cluster_custom_object(CALICO, "v1", "ippools", "probe")["spec"]["vxlanMode"] == "Always"
    custom.delete_cluster_custom_object(CALICO, "v1", "ippools", "probe")

    second = run_playbook(playbook, inventory, tmp_path / "cp")
    assert second.rc == 0 and second.host_stats("localhost")["changed"] == 0, second.data["stats"]


def test_a_bad_setting_fails_before_anything_changes(cluster, tmp_path):
    api, client = cluster
    before = _daemonset(client)
    playbook, inventory = _play(tmp_path, api, calico_pod_cidr="198.18.0.0/17\n  hostPID: true",
                                calico_labels={"run": "refused"})
    result = run_playbook(playbook, inventory, tmp_path / "cp")
    assert result.rc != 0
    assert "[kubenest:permanent:InvalidRequest] pod network (calico): pod CIDR" in json.dumps(result.data)
    after = _daemonset(client)
    assert (after.metadata.resource_version if after else None) == \
        (before.metadata.resource_version if before else None)
