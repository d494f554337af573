"""The operator SIGKILLed in the middle of a promotion and of a return, and started again.

Wherever it dies, the node must end in exactly one place: in the tenant (GlobalNode occupied, tenant Node
Ready, no host Node) or in the host (GlobalNode free, host Node Ready), never lost, never in both, and never
without a running kubelet. The kill points are tasks of the node_promote role, seen in the run's own events.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from tests.support import rotation
from tests.support.kills import kill_at
from tests.support.nodes import globalnode, host_node, host_node_ready, kubelet_cert_issuer, on_node
from tests.support.virtualclusters import (
    create_vc,
    delete_vc,
    get_vc,
    own_operator,
    tenant_client,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-kills"
NODE = "kn-w1"
# (task of promotion at which the operator dies, task of return at which it dies), in role order.
POINTS = [
    ("Cordon the host node and evict its pods", "Drain the node in the tenant"),
    ("Delete the Node from the host cluster", "Put the host configuration back"),
    ("Start the kubelet", "Start the host node services"),
    ("Wait until the Node is Ready in the tenant", "Wait until the node is Ready in the host cluster"),
]
ROLE_TASKS = Path(__file__).resolve().parents[2] / "roles" / "node_promote" / "tasks"


def _task_names(tasks):
    for task in tasks or []:
        if isinstance(task, dict):
            yield task.get("name", "")
            yield from _task_names(task.get("block"))
            yield from _task_names(task.get("rescue"))
            yield from _task_names(task.get("always"))


def test_every_kill_point_is_a_task_of_the_role():
    """In CI: a renamed task would leave its long point waiting 15 minutes for a task that never comes."""
    names = [name for path in sorted(ROLE_TASKS.glob("*.yml"))
             for name in _task_names(yaml.safe_load(path.read_text()))]
    missing = [task for point in POINTS for task in point if not any(task in name for name in names)]
    assert not missing, f"kill points that are no task of the node_promote role: {missing}"


@pytest.fixture(scope="module")
def operator(host_cluster, tmp_path_factory):
    sb, api = host_cluster
    with own_operator(sb, api, NS, tmp_path_factory.mktemp("operator"), "--node-wait-interval", "5",
                      "--resync-interval", "10", "--backoff-base", "5") as proc:
        yield sb, api, proc, proc.runs_dir


def _in_tenant_only(sb, api, vc) -> None:
    status = globalnode(api, NODE)["status"]
    assert status["state"] == "occupied" and status["virtualCluster"] == f"{NS}/{vc['metadata']['name']}", status
    assert host_node(api, NODE) is None, f"{NODE} is in the host cluster too"
    tenant, _cfg = tenant_client(vc, api)
    nodes = {n.metadata.name: n for n in k8s.CoreV1Api(tenant).list_node().items}
    assert NODE in nodes and any(c.type == "Ready" and c.status == "True" for c in nodes[NODE].status.conditions)
    assert "kubenest-vc-ca" in kubelet_cert_issuer(sb, NODE)
    assert on_node(sb, NODE, "systemctl is-active kubelet").strip() == "active"


def _in_host_only(sb, api) -> None:
    status = globalnode(api, NODE)["status"]
    assert status["state"] == "free" and not status.get("virtualCluster"), status
    assert host_node_ready(api, NODE) and not host_node(api, NODE).spec.unschedulable
    assert "kubenest-vc-ca" not in kubelet_cert_issuer(sb, NODE)
    assert on_node(sb, NODE, "systemctl is-active kubelet").strip() == "active"
    assert "10-kubenest-tenant.conflist" not in on_node(sb, NODE, "ls /etc/cni/net.d")


# About 2 min a point: make test runs those of its commit's turn (tests/support/rotation.py), make test-long all.
@pytest.mark.parametrize(("promotion_task", "return_task"), rotation.params(
    POINTS, [f"{point[0].split()[0]}-{point[0].split()[-1]}" for point in POINTS], "operator-kill"))
def test_a_killed_operator_leaves_the_node_in_exactly_one_cluster(operator, promotion_task, return_task):
    sb, api, proc, runs = operator
    name = "killed"
    if get_vc(api, NS, name) is not None:  # left by a failed point: each point starts from a free node
        delete_vc(api, NS, name, timeout=900)
    create_vc(api, NS, name, {"promoteResources": {"nodes": [NODE]}})
    print(f"\npromotion killed at {kill_at(proc, runs, NS, name, promotion_task)!r}")
    vc = wait_ready(api, NS, name, timeout=900)
    _in_tenant_only(sb, api, vc)

    k8s.CustomObjectsApi(api).delete_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", name)
    print(f"return killed at {kill_at(proc, runs, NS, name, return_task)!r}")
    wait_for(lambda: get_vc(api, NS, name) is None, 900, f"{name} deleted after the restart")
    _in_host_only(sb, api)
