"""The look at a virtual cluster between runs, its nodes part (API calls stubbed; the e2e test uses a real tenant)."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import kopf
import pytest

from kubenest_operator import looks


class FakeApi:
    def __init__(self):
        self.status_patches, self.condition_bodies = [], []

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


def run_look(body, tenant):
    ctx = SimpleNamespace(api=FakeApi())
    changed = asyncio.run(looks.follow_nodes(ctx, body, tenant, logging.getLogger("test")))
    return changed, ctx.api


def test_a_node_that_went_not_ready_moves_phase_and_conditions(posted):
    changed, api = run_look(vc("Completed", True), {"kn-w1": False})
    assert [(kind, reason) for kind, reason, _message in posted] == [("Warning", "NodeNotReady"),
                                                                     ("Normal", "Initialized")]
    assert changed
    (patch,) = api.status_patches
    assert patch["phase"] == "Initialized" and patch["nodesReady"] == "0/1"
    assert patch["nodes"] == [{"name": "kn-w1", "ip": "198.18.0.12", "ready": False}]
    (conditions,) = api.condition_bodies
    assert conditions["Ready"]["status"] == "False" and conditions["NodesReady"]["reason"] == "NodeNotReady"
    assert "kn-w1 not Ready" in conditions["NodesReady"]["message"]


def test_a_node_missing_from_the_tenant_counts_as_not_ready():
    changed, api = run_look(vc("Completed", True), {})
    assert changed and api.status_patches[0]["nodesReady"] == "0/1"


def test_it_comes_back_when_the_node_is_ready_again():
    changed, api = run_look(vc("Initialized", False, nodes_reason="NodeNotReady"), {"kn-w1": True})
    assert changed and api.status_patches[0]["phase"] == "Completed"
    assert api.condition_bodies[0]["Ready"]["status"] == "True"


@pytest.mark.parametrize("body", [
    vc("Completed", True),                                  # nothing changed
    vc("Initialized", False, nodes_reason="NodesNotReady"),  # a run's own report: the run retries
    vc("Updating", True),                                   # a run is under way
    vc("Pending", False, nodes_reason="WaitingForNodes"),
])
def test_no_change_without_cause(body):
    changed, api = run_look(body, {"kn-w1": True})
    assert not changed and api.status_patches == [] and api.condition_bodies == []


def test_a_node_back_in_a_cluster_without_dns_leaves_ready_false():
    body = vc("Initialized", False, nodes_reason="NodeNotReady")
    body["status"]["conditions"].append({"type": "AddonsReady", "status": "False", "reason": "DNSNotReady",
                                         "message": "coredns has no available replica"})
    changed, api = run_look(body, {"kn-w1": True})
    assert changed and api.status_patches[0]["phase"] == "Initialized"
    conditions = api.condition_bodies[0]
    assert conditions["NodesReady"]["status"] == "True"
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == ("False", "DNSNotReady")
    assert conditions["AddonsReady"]["reason"] == "DNSNotReady"  # carried along, not dropped by the apply


class Assessments:
    """health.assess stubbed: what each look finds, and which parts it was asked for."""

    def __init__(self, findings=(), due=()):
        self.found = looks.health.Assessment(findings=list(findings), nodes={"kn-w1": True}, due=list(due))
        self.asked = []

    async def __call__(self, ctx, body, control_plane=True, certificates=True):
        self.asked.append((control_plane, certificates))
        return self.found


def look_twice(monkeypatch, body, assessments, advance):
    """Two looks; between them `advance` names the pace entries that came due."""
    runs = []

    async def run(ctx, body, found, repair, logger):
        runs.append("repair" if repair else "renew")
        return "repaired" if repair else "renewed"

    monkeypatch.setattr(looks.health, "assess", assessments)
    monkeypatch.setattr(looks, "_run", run)
    ctx = SimpleNamespace(api=FakeApi(), config=SimpleNamespace(resync_interval=30.0, cert_check_interval=3600.0,
                                                                backoff_max=600.0))
    pace, outcomes = looks.Pace(), []
    for _look in range(2):
        outcomes.append(asyncio.run(looks.look(ctx, body, pace, logging.getLogger("test"))))
        for entry in advance:
            setattr(pace, entry, 0.0)
    return outcomes, runs, ctx.api


def test_drift_is_repaired_once_and_then_only_after_a_pause(monkeypatch):
    drifted = Assessments([looks.health.Finding("Deployment vc1-apiserver is missing", True)])
    outcomes, runs, api = look_twice(monkeypatch, vc("Completed", True), drifted, ["look_at"])
    assert outcomes == ["repaired", "degraded"] and runs == ["repair"]
    assert api.condition_bodies[0]["Ready"]["reason"] == "ControlPlaneDegraded"
    assert drifted.asked == [(True, True), (True, False)]  # the certificates wait for their own interval


def test_what_no_run_can_help_is_reported_and_never_run_for(monkeypatch):
    down = Assessments([looks.health.Finding("the virtual cluster's API does not answer: HTTP 503", False)])
    outcomes, runs, api = look_twice(monkeypatch, vc("Completed", True), down, ["look_at"])
    assert outcomes == ["degraded", "degraded"] and runs == []
    assert "HTTP 503" in api.condition_bodies[0]["Ready"]["message"]


def test_due_certificates_start_a_renewal_whatever_the_phase(monkeypatch):
    due = Assessments(due=["vc1-pki/apiserver.crt (expires in 0h05m)"])
    outcomes, runs, _api = look_twice(monkeypatch, vc("Pending", False, nodes_reason="WaitingForNodes"), due,
                                      ["certificates_at"])
    assert outcomes == ["renewed", "renewed"] and runs == ["renew", "renew"]
    assert due.asked == [(False, True), (False, True)]  # a Pending control plane is a run's to report


@pytest.mark.parametrize("body", [
    kopf.Body({"metadata": {"namespace": "t1", "name": "vc1"}, "status": {"phase": "Preparing"}}),  # not built
    kopf.Body(dict(vc("Completed", True), metadata={"namespace": "t1", "name": "vc1",
                                                    "deletionTimestamp": "2026-12-05T08:00:00Z"})),
    kopf.Body(dict(vc("Failed", False), metadata={"namespace": "t1", "name": "vc1", "generation": 2})),  # given up
])
def test_nothing_is_looked_at_before_it_is_built_while_it_goes_or_once_given_up(monkeypatch, body):
    assessments = Assessments(due=["vc1-pki/apiserver.crt (expired)"])
    outcomes, runs, _api = look_twice(monkeypatch, body, assessments, ["look_at", "certificates_at"])
    assert outcomes == ["skipped", "skipped"] and runs == [] and assessments.asked == []
