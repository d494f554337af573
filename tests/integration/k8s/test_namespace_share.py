"""The site's cap on VirtualClusters per namespace, through the real virtualcluster playbook on a real API server:
the newest over the cap waits with a message that says why, and nothing of it is written; the first ones go on."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from kubenest_operator.extravars import dump_unsafe

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
NS = "share-tests"
RULES = [{"namespaces": ["other"], "max_virtual_clusters": 0}, {"namespaces": [NS], "max_virtual_clusters": 1}]


@pytest.fixture(scope="module")
def namespace(api_client, kosmos_crds):
    core = kubernetes.client.CoreV1Api(api_client)
    custom = kubernetes.client.CustomObjectsApi(api_client)
    try:
        core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=NS)))
    except ApiException as exc:
        if exc.status != 409:
            raise
    made = {}
    for name in ("first", "second"):  # one second apart: creation times order them
        made[name] = custom.create_namespaced_custom_object(
            "kosmos.io", "v1alpha1", NS, "virtualclusters",
            {"apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster", "metadata": {"name": name}, "spec": {}})
        time.sleep(1.1)
    # A Secret of the first one's name that it does not own: a run past the share check stops right after it.
    core.create_namespaced_secret(NS, kubernetes.client.V1Secret(
        metadata=kubernetes.client.V1ObjectMeta(name="first-pki"), string_data={"planted": "x"}))
    yield core, made
    core.delete_namespaced_secret("first-pki", NS)
    for name in made:
        custom.delete_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", name)


def run_playbook(tmp_path, apiserver, vc):
    extravars = tmp_path / "vc.yml"
    extravars.write_text(dump_unsafe({
        "kubenest_host_kubeconfig": str(apiserver.kubeconfig), "kubenest_namespace_rules": RULES,
        "virtualcluster": {"namespace": NS, "name": vc["metadata"]["name"], "uid": vc["metadata"]["uid"],
                           "state": "present", "spec": {}},
    }))
    return subprocess.run([ANSIBLE_PLAYBOOK, str(REPO / "playbooks" / "virtualcluster.yml"), "-e", f"@{extravars}"],
                          capture_output=True, text=True, timeout=600, check=False)


def test_the_newest_virtual_cluster_over_the_namespaces_share_waits_and_nothing_of_it_is_written(
        namespace, apiserver, tmp_path):
    core, made = namespace
    proc = run_playbook(tmp_path, apiserver, made["second"])
    assert proc.returncode != 0
    assert (f"namespace {NS} may have 1 VirtualCluster(s), and first came first: second is built once one of them "
            "is deleted") in proc.stdout, proc.stdout[-3000:]
    assert "[kubenest:permanent" not in proc.stdout  # it waits: the operator retries it
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_service("second-etcd", NS)
    assert missing.value.status == 404


def test_the_first_ones_are_not_held_back(namespace, apiserver, tmp_path):
    _core, made = namespace
    proc = run_playbook(tmp_path, apiserver, made["first"])
    assert "may have 1 VirtualCluster(s)" not in proc.stdout
    assert f"[kubenest:permanent:NotOwned] Secret {NS}/first-pki" in proc.stdout, proc.stdout[-3000:]
