"""Rollback and resume of node promotion and return, with a fault injected at each step.

A fault (node_promote_fault_step) fails the named step on entry. A failed promotion must leave the node back in
the host cluster: Ready, schedulable, its labels back, GlobalNode free, and nothing of the tenant on it or about
it in the tenant. A failed return leaves the node held by its virtual cluster, and the next run finishes it.
`make test-long` runs every step; `make test` runs the steps of its commit's turn (tests/support/rotation.py),
besides the failed promotion and return through the operator in test_promotion.py.
"""

from __future__ import annotations

import time

import pytest
from kubernetes import client as k8s

from sandbox.machines.machine import Machine
from sandbox.machines.pki import client_files
from tests.support import rotation
from tests.support.nodes import (
    PlainPlaybook,
    assert_back_in_host_clean,
    globalnode,
    globalnode_free,
)
from tests.support.virtualclusters import (
    own_operator,
    wait_for,
)

NS = "kubenest-e2e-faults"
NODE = "kn-w3"
PROMOTE_STEPS = ["Drain", "Stash", "Images", "Reset", "RemoveHostNode", "Isolate", "ControlPlane", "Token",
                 "NodeFiles", "Kubelet", "Register", "PodNetwork", "Ready", "Occupied"]
RETURN_STEPS = ["Returning", "TenantDrain", "HostRejoin", "HostWipe", "HostRestore", "HostKubelet", "HostReady",
                "AgentIdentity", "HostRelease"]
WANTS_NODE = {"promoteResources": {"nodes": [NODE]}}
NO_NODES = {"promoteResources": {"nodes": []}}


@pytest.fixture(scope="module")
def faults(host_cluster, tmp_path_factory):
    """An operator (it keeps GlobalNodes) and a plain-playbook virtual cluster whose control plane is built once,
    without nodes."""
    sb, api = host_cluster
    workdir = tmp_path_factory.mktemp("faults")
    with own_operator(sb, api, NS, workdir, "--resync-interval", "10"):
        wait_for(lambda: globalnode_free(api, NODE), 120, f"GlobalNode {NODE} free")
        playbook = PlainPlaybook(sb, NS, "plain", workdir)
        playbook.ok("present", NO_NODES)
        yield sb, api, playbook
        playbook.ok("absent", NO_NODES)


@pytest.mark.parametrize("step", rotation.params(PROMOTE_STEPS, PROMOTE_STEPS, "promote-fault"))
def test_a_failed_promotion_puts_the_node_back_into_the_host(faults, step):
    sb, api, playbook = faults
    proc = playbook.run("present", WANTS_NODE, node_promote_fault_step=step)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert f"[kubenest:step:{step}] promoting {NODE} failed at step {step} and was rolled back" in out, out[-4000:]
    assert f"fault injected on entering step {step}" in out
    assert_back_in_host_clean(sb, api, NODE, playbook.tenant(api))


@rotation.turn("control-plane-fails-while-a-node-is-prepared")
def test_a_control_plane_failing_while_the_node_is_prepared_rolls_the_node_back(faults):
    """The node leaves the host while the control plane comes up (one play, free strategy); when the controller
    side fails there, the prepared node goes back instead of joining, and the run names the cause."""
    sb, api, playbook = faults
    proc = playbook.run("present", WANTS_NODE, node_promote_tenant_kubeconfig_secret="plain-no-such-kubeconfig")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert "Secret kubenest-e2e-faults/plain-no-such-kubeconfig is missing" in out, out[-4000:]
    assert "TASK [kosmos.kubenest.node_promote : Cordon the host node and evict its pods" in out, out[-4000:]
    assert (f"[kubenest:step:ControlPlane] promoting {NODE} failed at step ControlPlane and was rolled back: "
            "the control plane of kubenest-e2e-faults/plain did not come up in this run") in out, out[-4000:]
    assert_back_in_host_clean(sb, api, NODE, playbook.tenant(api))


def test_a_promotion_stops_at_isolate_while_a_host_node_keeps_its_old_filter(faults):
    """Isolation fails closed: with kn-w1's agent stopped its filter cannot change, and the old one would let the
    tenant's root on the promoted node reach it; the promotion is rolled back, naming kn-w1."""
    sb, api, playbook = faults
    machine = Machine(sb, next(n for n in sb.nodes if n.name == "kn-w1"))
    machine.nsenter(["systemctl", "stop", "kubenest-agent"])
    try:
        proc = playbook.run("present", WANTS_NODE)
    finally:
        machine.nsenter(["systemctl", "start", "kubenest-agent"])
        machine.wait_agent(client_files(sb), time.monotonic() + 60)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert f"[kubenest:step:Isolate] promoting {NODE} failed at step Isolate and was rolled back" in out, out[-4000:]
    assert "node isolation could not be put in force on kn-w1 (its agent was not reached)" in out, out[-4000:]
    assert_back_in_host_clean(sb, api, NODE, playbook.tenant(api))


@pytest.mark.parametrize("step", rotation.params(RETURN_STEPS, RETURN_STEPS, "return-fault"))
def test_a_failed_return_is_finished_by_the_next_run(faults, step):
    sb, api, playbook = faults
    playbook.ok("present", WANTS_NODE)
    tenant = playbook.tenant(api)
    assert NODE in {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items}

    proc = playbook.run("present", NO_NODES, node_promote_fault_step=step)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert f"[kubenest:step:{step}] returning {NODE} failed at step {step}" in out, out[-4000:]
    status = globalnode(api, NODE)["status"]
    # Still held by its virtual cluster: no one else can take a half-returned node.
    assert status["state"] in ("occupied", "returning") and status["virtualCluster"] == f"{NS}/plain", status

    playbook.ok("present", NO_NODES)
    assert_back_in_host_clean(sb, api, NODE, tenant)
