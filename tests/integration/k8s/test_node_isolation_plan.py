"""kosmos.kubenest.node_isolation_plan on a real API server: one task reads the host's Nodes and the GlobalNodes
and gives every node's filter, as the node_isolation filter does from the same objects."""

from __future__ import annotations

import kubernetes
import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.node_isolation import PORTS_ANNOTATION, plan
from kubernetes.client.rest import ApiException

from tests.support.playbook import run_module

GROUP, VERSION, PLURAL = "kosmos.io", "v1alpha1", "globalnodes"


@pytest.fixture(scope="module")
def objects(api_client, kosmos_crds):
    core = kubernetes.client.CoreV1Api(api_client)
    custom = kubernetes.client.CustomObjectsApi(api_client)
    for name, address in (("iso-host-a", "198.18.7.1"), ("iso-host-b", "198.18.7.2")):
        try:
            core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
        core.create_node({"metadata": {"name": name}})
        core.patch_node_status(name, {"status": {"addresses": [{"type": "InternalIP", "address": address}]}})
    # A node that left the host and belongs to a tenant: no Node, a GlobalNode with the tenant's API ports.
    try:
        custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "iso-tenant-a")
    except ApiException as exc:
        if exc.status != 404:
            raise
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode",
        "metadata": {"name": "iso-tenant-a", "annotations": {PORTS_ANNOTATION: "31443,31132"}},
        "spec": {"nodeIP": "198.18.7.9"}})
    custom.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, "iso-tenant-a", {
        "status": {"state": "occupied", "virtualCluster": "tenants/vc-a"}})
    return core, custom


def test_the_plan_of_the_objects_the_host_has_now(objects, apiserver):
    core, custom = objects
    rc, result, out = run_module("node_isolation_plan", apiserver.kubeconfig)
    assert rc == 0, out
    assert result["changed"] is False
    nodes = core.api_client.sanitize_for_serialization(core.list_node().items)
    global_nodes = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    assert result["plan"] == plan(nodes, global_nodes)
    assert (result["nodes"], result["global_nodes"]) == (len(nodes), len(global_nodes))
    assert result["plan"]["iso-tenant-a"]["side"] == "tenants/vc-a"
    assert result["plan"]["iso-host-a"]["side"] == "host"
    # The host's nodes keep the tenant's node off everything but its API server's ports.
    assert any("198.18.7.9" in str(entry) for entry in result["plan"]["iso-host-a"]["allow"])


def test_check_mode_reads_the_same(objects, apiserver):
    rc, normal, _out = run_module("node_isolation_plan", apiserver.kubeconfig)
    rc_check, checked, out = run_module("node_isolation_plan", apiserver.kubeconfig, check=True)
    assert (rc, rc_check) == (0, 0), out
    assert checked["plan"] == normal["plan"]


def test_an_unreadable_kubeconfig_fails_naming_it(tmp_path):
    missing = tmp_path / "missing.kubeconfig"
    rc, result, _out = run_module("node_isolation_plan", missing)
    assert rc != 0
    assert result["failed"] is True
    assert str(missing) in result["msg"]
