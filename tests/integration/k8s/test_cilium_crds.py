"""Cilium's CRDs registered ahead of its operator, from the image catalog's copy of the pinned release, against a
real kube-apiserver of its own: the CRDs the agent waits for are served and labelled as the operator labels
them, a second run sends nothing, an outdated one is updated, check mode writes nothing and a bad file changes
nothing."""

from __future__ import annotations

import json
import sys
import time

import kubernetes
import pytest

from tests.support.apiserver import ApiServer
from tests.support.playbook import run_playbook, write_play

LABEL = "io.cilium.k8s.crd.schema.version"
# Among those the agent waits for with the role's configuration (Cilium's pkg/k8s/synced/crd.go).
AGENT_WAITS_FOR = {"ciliumnodes.cilium.io", "ciliumendpoints.cilium.io", "ciliumidentities.cilium.io",
                   "ciliumnetworkpolicies.cilium.io", "ciliumclusterwidenetworkpolicies.cilium.io",
                   "ciliumcidrgroups.cilium.io", "ciliumpodippools.cilium.io"}


@pytest.fixture(scope="module")
def cluster(k8s_bin_dir):
    with ApiServer() as api:  # cluster-wide kinds of its own, away from the tier's shared API server
        client = kubernetes.config.new_client_from_config(config_file=str(api.kubeconfig))
        yield api, client
        client.close()


@pytest.fixture(scope="module")
def crds_file(oci_images):
    path = oci_images["cilium"]["path"].parent / "cilium-crds.json"
    assert path.is_file(), f"{path} is missing: the image build writes it next to the archives"
    return path


def _run(tmp_path, api, crds_file, *args, **options):
    tasks = [{"name": "crds", "kosmos.kubenest.cilium_crds": {"kubeconfig": str(api.kubeconfig),
                                                              "crds_file": str(crds_file), **options}}]
    playbook = write_play(tmp_path / "crds.yml", tasks, hosts="localhost", connection="local")
    inventory = tmp_path / "hosts"
    inventory.write_text(f"localhost ansible_python_interpreter={sys.executable}\n")
    result = run_playbook(playbook, inventory, tmp_path / "cp", *args)
    return result, result.task("crds", "localhost")


def _cilium_crds(client):
    crds = kubernetes.client.ApiextensionsV1Api(client).list_custom_resource_definition().items
    return {c.metadata.name: c for c in crds if c.spec.group == "cilium.io"}


def test_check_mode_writes_nothing(cluster, crds_file, tmp_path):
    api, client = cluster
    result, task = _run(tmp_path, api, crds_file, "--check")
    assert result.rc == 0, json.dumps(task)[-2000:]
    assert task["changed"] is True and AGENT_WAITS_FOR <= set(task["registered"])
    assert _cilium_crds(client) == {}


def test_registered_as_the_operator_does_then_nothing_is_sent_again(cluster, crds_file, tmp_path):
    api, client = cluster
    release = json.loads(crds_file.read_text())
    result, task = _run(tmp_path, api, crds_file)
    assert result.rc == 0, json.dumps(task)[-2000:]
    crds = _cilium_crds(client)
    assert set(crds) == set(task["registered"]) and AGENT_WAITS_FOR <= set(crds)
    assert len(crds) == len(release["definitions"])
    for crd in crds.values():
        assert crd.metadata.labels[LABEL] == release["schemaVersion"]
        assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    # a kind is served: a CiliumNode is written and read back
    custom = kubernetes.client.CustomObjectsApi(client)
    custom.create_cluster_custom_object("cilium.io", "v2", "ciliumnodes", {
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": "kn-w1"}, "spec": {}})
    assert custom.get_cluster_custom_object("cilium.io", "v2", "ciliumnodes", "kn-w1")["metadata"]["name"] == "kn-w1"

    again, task = _run(tmp_path, api, crds_file)
    assert again.rc == 0 and task["changed"] is False
    assert task["registered"] == [] and task["current"] == len(crds)


def test_a_crd_of_another_schema_version_is_updated(cluster, crds_file, tmp_path):
    api, client = cluster
    _run(tmp_path, api, crds_file)
    ext = kubernetes.client.ApiextensionsV1Api(client)
    ext.patch_custom_resource_definition("ciliumnodes.cilium.io", {"metadata": {"labels": {LABEL: "1.0.0"}}})
    result, task = _run(tmp_path, api, crds_file)
    assert result.rc == 0 and task["registered"] == ["ciliumnodes.cilium.io"]
    release = json.loads(crds_file.read_text())
    assert ext.read_custom_resource_definition("ciliumnodes.cilium.io").metadata.labels[LABEL] == \
        release["schemaVersion"]


def test_without_wait_it_returns_once_stored_and_they_become_established(cluster, crds_file, tmp_path):
    api, client = cluster
    ext = kubernetes.client.ApiextensionsV1Api(client)
    ext.delete_custom_resource_definition("ciliumnodes.cilium.io")
    _wait_gone(ext, "ciliumnodes.cilium.io")
    result, task = _run(tmp_path, api, crds_file, wait=False)
    assert result.rc == 0 and task["registered"] == ["ciliumnodes.cilium.io"], json.dumps(task)[-2000:]
    # what the agent does: wait for the kind to be served
    deadline = time.monotonic() + 60
    while not _established(ext.read_custom_resource_definition("ciliumnodes.cilium.io")):
        assert time.monotonic() < deadline, "ciliumnodes.cilium.io not Established within 60 s"
        time.sleep(0.2)


def _established(crd) -> bool:
    return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))


def _wait_gone(ext, name: str) -> None:
    deadline = time.monotonic() + 60
    while name in {c.metadata.name for c in ext.list_custom_resource_definition().items}:
        assert time.monotonic() < deadline, f"{name} still there after 60 s"
        time.sleep(0.2)


@pytest.mark.parametrize(("content", "message"), [
    ('{"schemaVersion": "1.33.12", "definitions": [{"apiVersion": "v1", "kind": "ConfigMap"}]}',
     "definition 0 is not an apiextensions.k8s.io/v1 CustomResourceDefinition"),
    ('{"schemaVersion": "1 2", "definitions": []}', "the CRD schema version must be one word"),
    ("[]", "expected an object with schemaVersion and a list of definitions"),
])
def test_a_bad_file_fails_and_changes_nothing(cluster, crds_file, tmp_path, content, message):
    api, client = cluster
    before = {name: crd.metadata.resource_version for name, crd in _cilium_crds(client).items()}
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result, task = _run(tmp_path, api, bad)
    assert result.rc != 0 and message in task["msg"], task["msg"]
    assert {name: crd.metadata.resource_version for name, crd in _cilium_crds(client).items()} == before
