"""Host Nodes (created directly through the API, no kubelet) -> GlobalNodes, kept in sync by the operator."""

from __future__ import annotations

import uuid

import pytest
from kubernetes.client.rest import ApiException

from tests.integration.operator.operatorproc import stays
from tests.support.procs import wait_until

GROUP, VERSION, PLURAL = "kosmos.io", "v1alpha1", "globalnodes"
TIMEOUT = 30


@pytest.fixture
def nodes(kube):
    """Create Nodes with `nodes.add(name, labels, ip)`; they and their GlobalNodes are removed afterwards."""
    made: list[str] = []

    class Nodes:
        def add(self, name: str, labels: dict, ip: str) -> str:
            kube.core.create_node({"metadata": {"name": name, "labels": labels}})
            # Addresses live in the status, which a kubelet would report.
            kube.core.patch_node_status(name, {"status": {"addresses": [{"type": "InternalIP", "address": ip},
                                                                        {"type": "Hostname", "address": name}]}})
            made.append(name)
            return name

    yield Nodes()
    for name in made:
        for delete in (kube.core.delete_node,
                       lambda n: kube.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, n)):
            try:
                delete(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def globalnode(kube, name: str) -> dict | None:
    try:
        return kube.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_globalnodes_follow_host_nodes(kube, operators, nodes):
    tag = uuid.uuid4().hex[:6]
    worker = nodes.add(f"worker-{tag}", {"kubernetes.io/hostname": f"worker-{tag}", "zone": "a"}, "10.20.0.11")
    control = nodes.add(f"control-{tag}", {"node-role.kubernetes.io/control-plane": ""}, "10.20.0.1")
    # A namespace of its own keeps this operator off the VirtualClusters of other tests; Nodes and
    # GlobalNodes are cluster-scoped and served regardless.
    operator = operators.start("operator", "--namespace", kube.new_namespace("gn"))

    wait_until(lambda: ((globalnode(kube, worker) or {}).get("status") or {}).get("state") == "free", TIMEOUT,
               "worker's GlobalNode free", operator.process)
    record = globalnode(kube, worker)
    assert record["status"]["stateSince"]  # as the claim protocol writes every state
    assert [(c["type"], c["status"], c["reason"]) for c in record["status"]["conditions"]] == [
        ("Claimed", "False", "Registered")]
    assert record["spec"] == {"nodeIP": "10.20.0.11",
                              "labels": {"kubernetes.io/hostname": worker, "zone": "a"}}
    late = nodes.add(f"late-{tag}", {"zone": "b"}, "10.20.0.12")
    wait_until(lambda: globalnode(kube, late) is not None, TIMEOUT, "GlobalNode of a node added later",
               operator.process)
    assert stays(lambda: globalnode(kube, control) is None, 3), "control-plane nodes are not promotable"

    # Label changes follow, removals included.
    kube.core.patch_node(worker, {"metadata": {"labels": {"zone": "c", "gpu": "true"}}})
    wait_until(lambda: globalnode(kube, worker)["spec"]["labels"].get("zone") == "c", TIMEOUT, "labels synced",
               operator.process)
    assert globalnode(kube, worker)["spec"]["labels"] == {"kubernetes.io/hostname": worker, "zone": "c",
                                                          "gpu": "true"}
    kube.core.patch_node(worker, {"metadata": {"labels": {"gpu": None}}})
    wait_until(lambda: "gpu" not in globalnode(kube, worker)["spec"]["labels"], TIMEOUT, "label removal synced",
               operator.process)

    # An occupied node's record belongs to its virtual cluster: label sync leaves it alone ...
    kube.custom.patch_cluster_custom_object_status(
        GROUP, VERSION, PLURAL, worker, {"status": {"state": "occupied", "virtualCluster": "tenants/vc1"}},
        _content_type="application/merge-patch+json")
    before = globalnode(kube, worker)
    kube.core.patch_node(worker, {"metadata": {"labels": {"zone": "d"}}})
    kube.core.patch_node(late, {"metadata": {"labels": {"zone": "e"}}})  # a free one still syncs meanwhile
    wait_until(lambda: globalnode(kube, late)["spec"]["labels"].get("zone") == "e", TIMEOUT, "free node synced",
               operator.process)
    after = globalnode(kube, worker)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"]["labels"]["zone"] == "c" and after["status"]["state"] == "occupied"

    # ... and so does deleting its Node (promotion removes it from the host), while a free node's goes with it.
    kube.core.delete_node(worker)
    kube.core.delete_node(late)
    wait_until(lambda: globalnode(kube, late) is None, TIMEOUT, "free GlobalNode deleted with its Node",
               operator.process)
    status = globalnode(kube, worker)["status"]
    assert (status["state"], status["virtualCluster"]) == ("occupied", "tenants/vc1")
    assert "GlobalNode" not in "".join(line for line in operator.log().splitlines() if "ERROR" in line)


def test_a_reservation_whose_virtual_cluster_is_gone_is_released_as_the_protocol_releases(kube, operators):
    """A reservation left by a run whose VirtualCluster is gone goes back to the pool after the grace period,
    written as the collection's own transition writes it: stateSince and the Claimed condition move too."""
    name = f"orphan-{uuid.uuid4().hex[:6]}"
    kube.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode", "metadata": {"name": name}, "spec": {}})
    try:
        operator = operators.start("operator", "--namespace", kube.new_namespace("gn"), "--resync-interval", "2")
        # Reserved once the operator watches, so that the move shows as events too.
        wait_until(lambda: f"[{name}] Indexer 'globalnode_records' succeeded." in operator.log(), TIMEOUT,
                   "the GlobalNode seen by the operator", operator.process)
        stale = "2020-01-01T00:00:00Z"  # long past the grace period
        kube.custom.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, name, {"status": {
            "state": "reserved", "virtualCluster": "gone-ns/gone", "stateSince": stale, "conditions": [
                {"type": "Claimed", "status": "True", "reason": "Reserved", "message": "for gone-ns/gone",
                 "lastTransitionTime": stale}]}}, _content_type="application/merge-patch+json")
        wait_until(lambda: globalnode(kube, name)["status"]["state"] == "free", TIMEOUT, "the reservation released",
                   operator.process)
        status = globalnode(kube, name)["status"]
        assert "virtualCluster" not in status
        assert status["stateSince"] > stale
        [claimed] = status["conditions"]
        assert (claimed["status"], claimed["reason"], claimed["message"]) == (
            "False", "VirtualClusterGone", "released: its virtual cluster gone-ns/gone is gone")
        assert claimed["lastTransitionTime"] > stale
        assert f"GlobalNode {name} released: its virtual cluster gone-ns/gone is gone" in operator.log()
        # kubectl describe globalnode shows the move (events of cluster-scoped objects are kept in default).
        wait_until(lambda: {(e.type, e.reason, e.message) for e in kube.core.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={name}").items} == {
            ("Normal", "Reserved", "new -> reserved for gone-ns/gone (Reserved: for gone-ns/gone)"),
            ("Normal", "Free", "reserved -> free (VirtualClusterGone: released: its virtual cluster gone-ns/gone "
                               "is gone)")}, TIMEOUT, "the GlobalNode's events", operator.process)
    finally:
        kube.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
