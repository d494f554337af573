"""kosmos.kubenest.workload_rollout on a real API server, with the workload controller's and the kubelet's
status writes made by the test: it waits until the status says rolled out, names a pod that cannot start, and
says how far a rollout got when it times out."""

from __future__ import annotations

import kubernetes
import pytest

from tests.support.playbook import run_module
from tests.support.procs import free_ports
from tests.support.virtualclusters import ensure_namespace

NS = "rollout-action"
LABELS = {"app": "web"}


@pytest.fixture(scope="module")
def apps(api_client):
    ensure_namespace(api_client, NS)
    # No controller-manager here makes the namespace's default service account, which pods need.
    kubernetes.client.CoreV1Api(api_client).create_namespaced_service_account(NS, {"metadata": {"name": "default"}})
    return kubernetes.client.AppsV1Api(api_client)


def deployment(name):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": dict(LABELS, name=name)},
                     "template": {"metadata": {"labels": dict(LABELS, name=name)},
                                  "spec": {"containers": [{"name": "c", "image": "kubenest.local/none:1"}]}}}}


def rollout(apiserver, name, **args):
    rc, result, _out = run_module("workload_rollout", apiserver.kubeconfig, kind="Deployment", name=name,
                                  namespace=NS, **args)
    return rc, result


def test_a_rolled_out_status_ends_the_wait(apiserver, apps):
    made = apps.create_namespaced_deployment(NS, deployment("done"))
    apps.patch_namespaced_deployment_status("done", NS, {"status": {
        "observedGeneration": made.metadata.generation, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
        "availableReplicas": 1}})
    rc, result = rollout(apiserver, "done", timeout=30)
    assert rc == 0 and result["rolled_out"] and not result["changed"], result


def rolled_out_deployment(apps, name):
    made = apps.create_namespaced_deployment(NS, deployment(name))
    apps.patch_namespaced_deployment_status(name, NS, {"status": {
        "observedGeneration": made.metadata.generation, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
        "availableReplicas": 1}})


def test_a_reachable_url_must_answer_too(apiserver, apps):
    rolled_out_deployment(apps, "reached")
    rc, result = rollout(apiserver, "reached", timeout=30, reachable_url=f"{apiserver.url}/readyz")
    assert rc == 0 and result["rolled_out"] and result["reachable"], result
    # Nothing listens there: the wait goes on until its timeout and says what the URL did.
    (port,) = free_ports(1)
    url = f"https://127.0.0.1:{port}/readyz"
    rc, result = rollout(apiserver, "reached", timeout=1, reachable_url=url)
    assert rc != 0 and result["rolled_out"] and not result["reachable"], result
    assert result["msg"].startswith(f"Deployment {NS}/reached is rolled out but {url} does not answer after 1 s: ")
    assert "refused" in result["msg"], result
    # A status other than 200 is not an answer (an API server that cannot serve yet says 403 or 500).
    rc, result = rollout(apiserver, "reached", timeout=1, reachable_url=f"{apiserver.url}/no-such-path")
    assert rc != 0 and result["msg"].endswith(": HTTP 403"), result  # anonymous, beyond /readyz
    rc, result = rollout(apiserver, "reached", timeout=1, reachable_url="ftp://127.0.0.1/")
    assert rc != 0 and result["msg"] == "reachable_url must be an http:// or https:// URL, not 'ftp://127.0.0.1/'"


def test_a_timeout_says_how_far_it_got_and_a_missing_workload_is_named(apiserver, apps):
    apps.create_namespaced_deployment(NS, deployment("slow"))
    rc, result = rollout(apiserver, "slow", timeout=1)
    assert rc != 0 and result["msg"] == f"Deployment {NS}/slow is not rolled out after 1 s: 0 of 1 replicas ready"
    rc, result = rollout(apiserver, "absent", timeout=1)
    assert rc != 0 and result["msg"] == f"Deployment {NS}/absent is not rolled out after 1 s: it does not exist"
    rc, result = rollout(apiserver, "absent", timeout=0, check=True)
    assert rc == 0 and not result["rolled_out"], result


def test_a_pod_that_cannot_start_is_named(apiserver, apps, api_client):
    apps.create_namespaced_deployment(NS, deployment("broken"))
    core = kubernetes.client.CoreV1Api(api_client)
    core.create_namespaced_pod(NS, {"metadata": {"name": "broken-1", "labels": dict(LABELS, name="broken")},
                                    "spec": {"containers": [{"name": "c", "image": "kubenest.local/none:1"}]}})
    core.patch_namespaced_pod_status("broken-1", NS, {"status": {"containerStatuses": [{
        "name": "c", "image": "kubenest.local/none:1", "imageID": "", "ready": False, "restartCount": 0,
        "state": {"waiting": {"reason": "ErrImageNeverPull", "message": "image is not present"}}}]}})
    rc, result = rollout(apiserver, "broken", timeout=60)
    assert rc != 0 and result["pod"] == "broken-1", result
    assert result["msg"] == (f"Deployment {NS}/broken cannot come up: pod broken-1: "
                             "ErrImageNeverPull: image is not present"), result


def test_an_unschedulable_pod_names_the_taints_the_scheduler_meant(apiserver, apps, api_client):
    """The scheduler says only "node(s) had untolerated taint(s)"; the wait names them, from the real Nodes."""
    core = kubernetes.client.CoreV1Api(api_client)
    nodes = {"rollout-taint-1": {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"},
             "rollout-taint-2": {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}}
    for name, taint in nodes.items():  # the API server adds node.kubernetes.io/not-ready to a new Node
        core.create_node({"metadata": {"name": name, "labels": {"pool": "rollout-taint"}}, "spec": {"taints": [taint]}})
    try:
        apps.create_namespaced_deployment(NS, deployment("pressed"))
        core.create_namespaced_pod(NS, {"metadata": {"name": "pressed-1", "labels": dict(LABELS, name="pressed")},
                                        "spec": {"containers": [{"name": "c", "image": "kubenest.local/none:1"}],
                                                 "nodeSelector": {"pool": "rollout-taint"},
                                                 "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                                                                  "operator": "Exists"},
                                                                 {"key": "node.kubernetes.io/not-ready",
                                                                  "operator": "Exists"}]}})
        said = "0/2 nodes are available: 2 node(s) had untolerated taint(s)."
        core.patch_namespaced_pod_status("pressed-1", NS, {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": said}]}})
        rc, result = rollout(apiserver, "pressed", timeout=60, unschedulable_after=0)
        assert rc != 0 and result["pod"] == "pressed-1", result
        assert result["msg"] == (f"Deployment {NS}/pressed cannot come up: pod pressed-1: Unschedulable: {said} "
                                 "(untolerated: rollout-taint-1 node.kubernetes.io/disk-pressure:NoSchedule)")
    finally:
        for name in nodes:
            core.delete_node(name)


def test_negative_numbers_are_refused(apiserver, apps):
    rc, result = rollout(apiserver, "done", timeout=-1, crash_restarts=-2)
    assert rc != 0 and result["msg"] == "crash_restarts, timeout must not be negative", result


def daemonset(name):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": dict(LABELS, name=name)},
                     "template": {"metadata": {"labels": dict(LABELS, name=name)},
                                  "spec": {"containers": [{"name": "c", "image": "kubenest.local/none:1"}]}}}}


def test_a_daemonset_on_every_node_waits_until_its_controller_counted_every_node(apiserver, apps, api_client):
    core = kubernetes.client.CoreV1Api(api_client)
    nodes = len(core.list_node().items)
    made_nodes = [f"rollout-node-{number}" for number in range(nodes, 2)]  # two at least, whatever others left
    for name in made_nodes:
        core.create_node({"metadata": {"name": name}})
    try:
        _every_node(apiserver, apps, nodes + len(made_nodes))
    finally:  # the API server is shared: a test of a cluster without nodes may come next (test_coredns_role.py)
        for name in made_nodes:
            core.delete_node(name)


def _every_node(apiserver, apps, nodes):
    made = apps.create_namespaced_daemon_set(NS, daemonset("agent"))

    def status(desired, ready):
        apps.patch_namespaced_daemon_set_status("agent", NS, {"status": {
            "observedGeneration": made.metadata.generation, "currentNumberScheduled": desired,
            "numberMisscheduled": 0, "desiredNumberScheduled": desired, "numberReady": ready,
            "updatedNumberScheduled": desired}})

    # Rolled out on the nodes its controller counted, one Node short of the cluster's.
    status(nodes - 1, nodes - 1)
    rc, result = run_module("workload_rollout", apiserver.kubeconfig, kind="DaemonSet", name="agent",
                            namespace=NS, timeout=0)[:2]
    assert rc == 0 and result["rolled_out"] and result["ready"] == nodes - 1, result
    rc, result = run_module("workload_rollout", apiserver.kubeconfig, kind="DaemonSet", name="agent",
                            namespace=NS, timeout=1, on_every_node=True)[:2]
    assert rc != 0 and not result["rolled_out"], result
    assert result["msg"] == (f"DaemonSet {NS}/agent is not rolled out after 1 s: {nodes - 1} of {nodes - 1} pods "
                             f"ready, {nodes - 1} of the latest template (the cluster has {nodes} nodes)"), result
    status(nodes, nodes)
    rc, result = run_module("workload_rollout", apiserver.kubeconfig, kind="DaemonSet", name="agent",
                            namespace=NS, timeout=30, on_every_node=True)[:2]
    assert rc == 0 and result["rolled_out"] and result["ready"] == nodes, result
    # Only a DaemonSet runs on every node.
    rc, result = rollout(apiserver, "done", timeout=1, on_every_node=True)
    assert rc != 0 and result["msg"] == "on_every_node is for a DaemonSet, not a Deployment", result
