"""The operator deployed into the host cluster from its image (`python -m sandbox.operator deploy`, what `make up`
does): two replicas on the control-plane node, one working; a VirtualCluster that asks for a node reaches Ready
although the working replica is deleted in the middle of its run, and its deletion gives the node back."""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s

from sandbox.operator_in_cluster import NAME, NAMESPACE
from tests.e2e.conftest import run_python
from tests.support import rotation
from tests.support.nodes import assert_back_in_host_clean, globalnode
from tests.support.virtualclusters import (
    condition,
    create_vc,
    delete_vc,
    ensure_namespace,
    get_vc,
    sandbox_operator_paused,
    tenant_client,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-in-cluster"
SELECTOR = f"app.kubernetes.io/name={NAME}"


@pytest.fixture(scope="module")
def in_cluster(host_cluster):
    sb, api = host_cluster
    with sandbox_operator_paused():  # a developer's local operator, if any, waits meanwhile
        started = time.monotonic()
        run_python("-m", "sandbox.operator", "deploy", timeout=1800)
        print(f"\noperator deployed in the host cluster in {time.monotonic() - started:.0f}s")
        ensure_namespace(api, NS)
        try:
            yield sb, api
        finally:
            for vc in k8s.CustomObjectsApi(api).list_namespaced_custom_object(
                    "kosmos.io", "v1alpha1", NS, "virtualclusters")["items"]:
                delete_vc(api, NS, vc["metadata"]["name"], timeout=600)
            run_python("-m", "sandbox.operator", "stop")  # the other modules run operators of their own


def _operator_may(api, verb: str, resource: str, namespace: str) -> bool:
    review = k8s.AuthorizationV1Api(api).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:{NAMESPACE}:{NAME}", "groups": ["system:serviceaccounts"],
                 "resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}}})
    return review.status.allowed


def _pods(api) -> list:
    return k8s.CoreV1Api(api).list_namespaced_pod(NAMESPACE, label_selector=SELECTOR).items


def _active_peer(api) -> str | None:
    """The peer that works: the highest priority among the live ones in the ClusterKopfPeering."""
    peering = k8s.CustomObjectsApi(api).get_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", "kubenest")
    peers = {pid: info for pid, info in (peering.get("status") or {}).items() if isinstance(info, dict)}
    return max(peers, key=lambda pid: peers[pid].get("priority", 0)) if peers else None


def test_two_replicas_run_non_root_on_the_control_plane_node(in_cluster):
    sb, api = in_cluster

    def two_ready():  # the standby is ready to take over as well
        ready = [p for p in _pods(api) if p.status.phase == "Running"
                 and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        return ready if len(ready) == 2 else None
    pods = wait_for(two_ready, 300, "two operator pods running and ready")
    control_planes = {n.name for n in sb.nodes if n.role == "control_plane"}
    for pod in pods:
        assert pod.spec.node_name in control_planes
        assert pod.spec.containers[0].image == "kubenest.local/kubenest-operator:1.0.0"
        assert pod.spec.security_context.run_as_non_root
        assert pod.spec.containers[0].security_context.read_only_root_filesystem
    pdb = k8s.PolicyV1Api(api).read_namespaced_pod_disruption_budget(NAME, NAMESPACE)
    assert pdb.spec.min_available == 1 and pdb.status.current_healthy == 2
    assert _active_peer(api) in {p.metadata.name for p in pods}
    # Its tenant rights come from kubenest-binder, namespace by namespace: none where no VirtualCluster is.
    binder = k8s.AppsV1Api(api).read_namespaced_deployment("kubenest-binder", NAMESPACE)
    assert binder.status.ready_replicas == 1, binder.status
    assert binder.spec.template.spec.service_account_name == "kubenest-binder"
    assert not k8s.RbacAuthorizationV1Api(api).list_cluster_role_binding(
        field_selector="metadata.name=kubenest-operator-tenant").items
    assert not _operator_may(api, "create", "secrets", NS)
    assert not _operator_may(api, "get", "secrets", "kube-system")


@rotation.turn("operator-replica-deleted-mid-run", rotation.SLOW_SCENARIOS)
def test_a_virtual_cluster_is_made_with_its_node_although_the_working_replica_is_deleted_mid_run(in_cluster):
    sb, api = in_cluster
    cp = next(n for n in sb.nodes if n.role == "control_plane")
    started = time.monotonic()
    create_vc(api, NS, "moved", {"externalIP": cp.ip, "promotePolicies": [
        {"labelSelector": {"matchLabels": {"kubernetes.io/hostname": "kn-w2"}}, "nodeCount": 1}]})

    def running():
        vc = get_vc(api, NS, "moved")
        progress = ((vc or {}).get("status") or {}).get("progress") or {}
        return vc if progress.get("tasksDone", 0) >= 5 else None
    first_run = wait_for(running, 300, "the first run of 'moved' under way", interval=0.5)["status"]["progress"]
    first_run = first_run["runID"]
    active = _active_peer(api)
    assert active in {p.metadata.name for p in _pods(api)}
    deleted_at = time.monotonic()
    k8s.CoreV1Api(api).delete_namespaced_pod(active, NAMESPACE)
    wait_for(lambda: _active_peer(api) not in (None, active), 180, "another replica to take over")
    took_over = time.monotonic() - deleted_at

    def resumed():
        run = (((get_vc(api, NS, "moved") or {}).get("status") or {}).get("progress") or {}).get("runID")
        return run if run and run != first_run else None
    wait_for(resumed, 300, "a new run of 'moved' by the other replica", interval=0.5)
    print(f"\nfailover: the other replica leads {took_over:.1f}s and has started a new run "
          f"{time.monotonic() - deleted_at:.1f}s after the working one was deleted")

    vc = wait_ready(api, NS, "moved", timeout=900)
    print(f"'moved' Ready with its node {time.monotonic() - started:.0f}s after it was created")
    assert vc["status"]["nodesReady"] == "1/1" and condition(vc, "NodesReady")["status"] == "True"
    tenant, _cfg = tenant_client(vc, api)
    nodes = k8s.CoreV1Api(tenant).list_node().items
    assert [n.metadata.name for n in nodes] == ["kn-w2"]
    assert globalnode(api, "kn-w2")["status"]["virtualCluster"] == f"{NS}/moved"
    assert _operator_may(api, "create", "secrets", NS)  # bound by kubenest-binder for the VirtualCluster
    assert len([p for p in _pods(api) if p.status.phase == "Running"]) >= 1

    seconds = delete_vc(api, NS, "moved", timeout=600)
    print(f"'moved' deleted in {seconds:.0f}s")
    wait_for(lambda: globalnode(api, "kn-w2")["status"].get("state") == "free", 300, "kn-w2 free")
    assert_back_in_host_clean(sb, api, "kn-w2")
    wait_for(lambda: not _operator_may(api, "create", "secrets", NS), 60,
             "the operator's rights in the namespace to go with its last VirtualCluster")
