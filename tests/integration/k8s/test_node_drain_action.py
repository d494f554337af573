"""kosmos.kubenest.node_drain on a real API server: cordon and evictions through the Eviction API, pods that
stay, waiting for evicted pods until they are gone, refusals that touch nothing, a disruption budget that
keeps refusing, and check mode. There is no kubelet here: an evicted pod stays terminating until the test
deletes it for good, as a kubelet does once its containers are gone."""

from __future__ import annotations

import threading
import time

import kubernetes
import pytest

from tests.support.apiserver import ApiServer
from tests.support.playbook import run_module
from tests.support.virtualclusters import ensure_namespace

NS = "node-drain"


@pytest.fixture(scope="module")
def core(api_client):
    ensure_namespace(api_client, NS)
    core = kubernetes.client.CoreV1Api(api_client)
    # No controller-manager makes it: pods are admitted only with their service account present.
    core.create_namespaced_service_account(NS, {"metadata": {"name": "default"}})
    yield core
    # The API server is shared with the other test files of this worker: roles that count Nodes (coredns waits
    # for its pods once a cluster has nodes) must not find these.
    for name in NODES:
        core.delete_node(name)
    core.delete_collection_namespaced_pod(NS, grace_period_seconds=0)


NODES: list[str] = []


def node(core, name):
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    NODES.append(name)


def pod(core, name, node_name, owner=None, labels=None):
    meta = {"name": name, "labels": labels or {}}
    if owner:  # no controller-manager runs here: an owner that does not exist is never collected
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "controller": True,
                                    "uid": "00000000-0000-0000-0000-000000000001"}]
    core.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "nodeName": node_name, "containers": [{"name": "c", "image": "kubenest.local/echo:1.0"}]}})


def drain(kubeconfig, name, check=False, **args):
    rc, result, _out = run_module("node_drain", kubeconfig, check=check, name=name, **args)
    return rc, result


def terminating(core, name):
    return core.read_namespaced_pod(name, NS).metadata.deletion_timestamp is not None


def test_evicts_controlled_pods_keeps_daemonset_pods_and_waits_until_the_evicted_are_gone(apiserver, core):
    node(core, "drain-a")
    pod(core, "app", "drain-a", owner="ReplicaSet")
    pod(core, "agent", "drain-a", owner="DaemonSet")
    pod(core, "elsewhere", "drain-b", owner="ReplicaSet")
    rc, result = drain(apiserver.kubeconfig, "drain-a", wait=False)
    assert rc == 0 and result["changed"], result
    assert (result["evicted"], result["left"]) == ([f"{NS}/app"], [f"{NS}/agent"])
    assert core.read_node("drain-a").spec.unschedulable
    assert terminating(core, "app") and not terminating(core, "agent") and not terminating(core, "elsewhere")

    # The pod is still terminating: a wait ends in an error that names it.
    started = time.monotonic()
    rc, result = drain(apiserver.kubeconfig, "drain-a", timeout=2)
    assert rc != 0 and f"pods evicted from drain-a still run after 2.0s: {NS}/app" in result["msg"], result
    # The pod goes away while the next run waits for it: after that run's start-up (as long as this one's, on a
    # machine as busy) and a margin, not after a fixed time a loaded machine may need just to start Ansible.
    startup = time.monotonic() - started - 2.0

    def kubelet_done():
        time.sleep(max(1.5, 2 * startup + 1))
        core.delete_namespaced_pod("app", NS, grace_period_seconds=0)
    threading.Thread(target=kubelet_done, daemon=True).start()
    rc, result = drain(apiserver.kubeconfig, "drain-a", timeout=60)
    assert rc == 0 and result["evicted"] == [f"{NS}/app"] and result["waited"] >= 0.5, result
    assert [p.metadata.name for p in core.list_namespaced_pod(NS, field_selector="spec.nodeName=drain-a").items] \
        == ["agent"]


def test_pods_that_would_be_lost_are_refused_and_nothing_is_touched(apiserver, core):
    node(core, "drain-c")
    pod(core, "bare", "drain-c")
    pod(core, "kept", "drain-c", owner="ReplicaSet")
    rc, result = drain(apiserver.kubeconfig, "drain-c", wait=False)
    assert rc != 0 and result["msg"] == (
        f"cannot drain drain-c: pods without a controller would be lost (force deletes them): {NS}/bare"), result
    assert not core.read_node("drain-c").spec.unschedulable
    assert not terminating(core, "bare") and not terminating(core, "kept")


def test_check_mode_names_the_pods_and_changes_nothing(apiserver, core):
    node(core, "drain-d")
    pod(core, "dry", "drain-d", owner="StatefulSet")
    rc, result = drain(apiserver.kubeconfig, "drain-d", check=True)
    assert rc == 0 and result["changed"] and result["evicted"] == [f"{NS}/dry"], result
    assert not core.read_node("drain-d").spec.unschedulable and not terminating(core, "dry")


def test_a_budget_that_keeps_refusing_fails_the_drain_naming_it(apiserver, api_client, core):
    node(core, "drain-e")
    pod(core, "guarded", "drain-e", owner="ReplicaSet", labels={"app": "guarded"})
    # Budgets guard running pods only (a pending one is evicted regardless): report it running, as a kubelet would.
    core.patch_namespaced_pod_status("guarded", NS, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})
    kubernetes.client.PolicyV1Api(api_client).create_namespaced_pod_disruption_budget(NS, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    rc, result = drain(apiserver.kubeconfig, "drain-e", wait=False, timeout=2)
    assert rc != 0 and "a disruption budget still refuses to evict from drain-e after 2.0s" in result["msg"], result
    assert not terminating(core, "guarded")


def test_a_missing_node_is_named(apiserver):
    rc, result = drain(apiserver.kubeconfig, "drain-none")
    assert rc != 0 and result["msg"] == "Node drain-none does not exist", result


def _ready(core, name, unschedulable=False):
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                      "spec": {"unschedulable": unschedulable}})
    core.patch_node_status(name, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})


def _guarded(core, policy, name, node_name):
    pod(core, name, node_name, owner="ReplicaSet", labels={"app": name})
    core.patch_namespaced_pod_status(name, NS, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})
    policy.create_namespaced_pod_disruption_budget(NS, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": name}}}})


def test_with_no_other_node_to_take_a_replacement_a_budget_does_not_hold_the_drain(k8s_bin_dir):
    """Every node of a cluster leaving at once (a virtual cluster deleted): no replacement can become ready, so a
    budget would only hold the drain until its timeout. Its own API server: the shared one may hold Ready nodes."""
    with ApiServer() as api:
        client = kubernetes.config.new_client_from_config(config_file=str(api.kubeconfig))
        try:
            ensure_namespace(client, NS)
            core, policy = kubernetes.client.CoreV1Api(client), kubernetes.client.PolicyV1Api(client)
            core.create_namespaced_service_account(NS, {"metadata": {"name": "default"}})
            _ready(core, "leaving-1")
            _ready(core, "leaving-2", unschedulable=True)  # leaving too: already cordoned by its own drain
            _guarded(core, policy, "dns", "leaving-1")
            # As kubectl does by default: the budget is waited for, up to the timeout.
            rc, result = drain(api.kubeconfig, "leaving-1", wait=False, timeout=2)
            assert rc != 0 and "a disruption budget still refuses" in result["msg"], result
            assert not terminating(core, "dns")
            rc, result = drain(api.kubeconfig, "leaving-1", wait=False, timeout=60, without_room="delete")
            assert rc == 0 and result["deleted_without_room"] == [f"{NS}/dns"], result
            assert terminating(core, "dns")

            # A schedulable Ready node elsewhere could take the replacement: the budget is honoured.
            _ready(core, "staying")
            _guarded(core, policy, "web", "leaving-1")
            rc, result = drain(api.kubeconfig, "leaving-1", wait=False, timeout=2, without_room="delete")
            assert rc != 0 and "a disruption budget still refuses" in result["msg"], result
            assert not terminating(core, "web")
        finally:
            client.close()
