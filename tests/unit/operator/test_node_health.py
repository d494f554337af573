"""The look at a virtual cluster's nodes between runs (API calls stubbed; the e2e test uses a real tenant)."""

from __future__ import annotations

import asyncio
import base64
import logging
from types import SimpleNamespace

import kopf
import pytest

from kubenest_operator import node_health

SECRET = {"kubeconfig": base64.b64encode(b"apiVersion: v1").decode()}


class FakeApi:
    def __init__(self):
        self.status_patches, self.condition_bodies = [], []

    async def read_secret_data(self, namespace, name):
        assert (namespace, name) == ("t1", "vc1-admin-kubeconfig")
        return SECRET

    async def patch_virtualcluster_status(self, namespace, name, patch):
        self.status_patches.append(patch["status"])

    async def apply_virtualcluster_conditions(self, body):
        self.condition_bodies.append({c["type"]: c for c in body["status"]["conditions"]})


def vc(phase, ready, nodes_reason="AllNodesReady", wanted=1):
    conditions = [{"type": "Ready", "status": "True" if phase == "Completed" else "False", "reason": "Reconciled"},
                  {"type": "NodesReady", "status": "True" if phase == "Completed" else "False",
                   "reason": nodes_reason}]
    return kopf.Body({"metadata": {"namespace": "t1", "name": "vc1"}, "status": {
        "phase": phase, "observedGeneration": 2, "conditions": conditions,
        "kubeconfigSecretRef": {"name": "vc1-admin-kubeconfig", "key": "kubeconfig"},
        "nodes": [{"name": "kn-w1", "ip": "198.18.0.12", "ready": ready}], "nodesReady": f"{int(ready)}/{wanted}"}})


def run_look(body, tenant, monkeypatch):
    monkeypatch.setattr(node_health, "_tenant_ready", lambda _kubeconfig: tenant)
    ctx = SimpleNamespace(api=FakeApi())
    changed = asyncio.run(node_health.look(ctx, body, logging.getLogger("test")))
    return changed, ctx.api


def test_a_node_that_went_not_ready_moves_phase_and_conditions(monkeypatch):
    changed, api = run_look(vc("Completed", True), {"kn-w1": False}, monkeypatch)
    assert changed
    (patch,) = api.status_patches
    assert patch["phase"] == "Initialized" and patch["nodesReady"] == "0/1"
    assert patch["nodes"] == [{"name": "kn-w1", "ip": "198.18.0.12", "ready": False}]
    (conditions,) = api.condition_bodies
    assert conditions["Ready"]["status"] == "False" and conditions["NodesReady"]["reason"] == "NodeNotReady"
    assert "kn-w1 not Ready" in conditions["NodesReady"]["message"]


def test_a_node_missing_from_the_tenant_counts_as_not_ready(monkeypatch):
    changed, api = run_look(vc("Completed", True), {}, monkeypatch)
    assert changed and api.status_patches[0]["nodesReady"] == "0/1"


def test_it_comes_back_when_the_node_is_ready_again(monkeypatch):
    changed, api = run_look(vc("Initialized", False, nodes_reason="NodeNotReady"), {"kn-w1": True}, monkeypatch)
    assert changed and api.status_patches[0]["phase"] == "Completed"
    assert api.condition_bodies[0]["Ready"]["status"] == "True"


@pytest.mark.parametrize("body", [
    vc("Completed", True),                                  # nothing changed
    vc("Initialized", False, nodes_reason="NodesNotReady"),  # a run's own report: the run retries
    vc("Updating", True),                                   # a run is under way
    vc("Pending", False, nodes_reason="WaitingForNodes"),
])
def test_no_change_without_cause(body, monkeypatch):
    changed, api = run_look(body, {"kn-w1": True}, monkeypatch)
    assert not changed and api.status_patches == [] and api.condition_bodies == []


def test_a_node_back_in_a_cluster_without_dns_leaves_ready_false(monkeypatch):
    body = vc("Initialized", False, nodes_reason="NodeNotReady")
    body["status"]["conditions"].append({"type": "AddonsReady", "status": "False", "reason": "DNSNotReady",
                                         "message": "coredns has no available replica"})
    changed, api = run_look(body, {"kn-w1": True}, monkeypatch)
    assert changed and api.status_patches[0]["phase"] == "Initialized"
    conditions = api.condition_bodies[0]
    assert conditions["NodesReady"]["status"] == "True"
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "DNSNotReady")
    assert conditions["AddonsReady"]["reason"] == "DNSNotReady"  # carried along, not dropped by the apply
