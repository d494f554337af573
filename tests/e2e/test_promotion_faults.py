"""Rollback and resume of node promotion and return, with a fault injected at each step.

A fault (node_promote_fault_step) fails the named step on entry. A failed promotion must leave the node back in
the host cluster: Ready, schedulable, its labels back, GlobalNode free, and nothing of the tenant on it or about
it in the tenant. A failed return leaves the node held by its virtual cluster, and the next run finishes it.
CI runs a few steps; `make test-long` runs every one.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from sandbox.operator import write_site_vars
from tests.e2e.conftest import run_python
from tests.support.nodes import (
    PlainPlaybook,
    globalnode,
    host_ca_pem,
    host_node,
    host_node_ready,
    kubelet_cert_issuer,
    on_node,
)
from tests.support.virtualclusters import (
    REPO_ROOT,
    OperatorProcess,
    condition,
    create_vc,
    delete_vc,
    ensure_namespace,
    get_vc,
    install_crds,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-faults"
NODE, NODE_IP = "kn-w3", "198.18.0.14"
PROMOTE_STEPS = ["Drain", "Stash", "Reset", "RemoveHostNode", "Token", "NodeFiles", "Images", "Kubelet", "Register",
                 "ServingCertificate", "Labels", "PodNetwork", "Ready", "Occupied"]
RETURN_STEPS = ["Returning", "TenantDrain", "HostRejoin", "HostWipe", "HostRestore", "HostKubelet", "HostReady",
                "HostRelease"]
IN_CI = {"Reset", "HostKubelet"}
WANTS_NODE = {"promoteResources": {"nodes": [NODE]}}
NO_NODES = {"promoteResources": {"nodes": []}}


def _steps(steps):
    return [pytest.param(s, id=s, marks=() if s in IN_CI else pytest.mark.long) for s in steps]


@pytest.fixture(scope="module")
def faults(host_cluster, tmp_path_factory):
    """An operator (it keeps GlobalNodes and serves the operator case) and a plain-playbook virtual cluster whose
    control plane is built once, without nodes."""
    sb, api = host_cluster
    kubeconfig = sb.state_dir / "kubeconfig"
    install_crds(kubeconfig)
    sandbox_operator = subprocess.run([sys.executable, "-m", "sandbox.operator", "status"], cwd=REPO_ROOT,
                                      capture_output=True, check=False).returncode == 0
    if sandbox_operator:
        run_python("-m", "sandbox.operator", "stop")
    ensure_namespace(api, NS)
    workdir = tmp_path_factory.mktemp("faults")
    site_vars = workdir / "operator-vars.yml"
    site_vars.write_text(write_site_vars(sb.state_dir).read_text())
    proc = OperatorProcess(kubeconfig, workdir, "--site-vars", str(site_vars), "--node-wait-interval", "5",
                           "--resync-interval", "10", "--backoff-base", "30").start()
    wait_for(lambda: _free(api, NODE), 120, f"GlobalNode {NODE} free")
    playbook = PlainPlaybook(sb, NS, "plain", workdir)
    playbook.ok("present", NO_NODES)
    yield sb, api, playbook, site_vars
    playbook.ok("absent", NO_NODES)
    for vc in k8s.CustomObjectsApi(api).list_namespaced_custom_object("kosmos.io", "v1alpha1", NS,
                                                                     "virtualclusters")["items"]:
        delete_vc(api, NS, vc["metadata"]["name"], timeout=600)
    proc.stop()
    if sandbox_operator:
        run_python("-m", "sandbox.operator", "start")


def _free(api, name: str) -> bool:
    try:
        status = globalnode(api, name).get("status") or {}
    except ApiException:
        return False
    return status.get("state") == "free" and not status.get("virtualCluster")


def assert_back_in_host_clean(sb, api, tenant=None) -> None:
    """The end state of every failed promotion and of every finished return."""
    node = host_node(api, NODE)
    assert node is not None and host_node_ready(api, NODE), f"{NODE} is not Ready in the host cluster"
    assert not node.spec.unschedulable, f"{NODE} is still cordoned"
    assert node.metadata.labels.get("kubernetes.io/hostname") == NODE
    assert _free(api, NODE), f"GlobalNode {NODE}: {globalnode(api, NODE).get('status')}"
    stashes = k8s.CoreV1Api(api).list_namespaced_secret("kubenest-system").items
    assert f"kubenest-node-{NODE}" not in {s.metadata.name for s in stashes}
    # On the node: the host CA pinned, a host-issued kubelet certificate, no tenant network or join file.
    assert on_node(sb, NODE, "cat /etc/kubernetes/pki/ca.crt").strip() == host_ca_pem(sb).strip()
    assert "kubenest-vc-ca" not in kubelet_cert_issuer(sb, NODE)
    files = on_node(sb, NODE, "ls /etc/cni/net.d /etc/kubernetes")
    assert "10-kubenest-tenant.conflist" not in files and "bootstrap-kubelet.conf" not in files
    if tenant is not None:  # nothing about the node left in the tenant
        assert NODE not in {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items}
        tokens = k8s.CoreV1Api(tenant).list_namespaced_secret(
            "kube-system", label_selector=f"kosmos.io/globalnode={NODE}").items
        assert not tokens, [t.metadata.name for t in tokens]


@pytest.mark.parametrize("step", _steps(PROMOTE_STEPS))
def test_a_failed_promotion_puts_the_node_back_into_the_host(faults, step):
    sb, api, playbook, _site = faults
    proc = playbook.run("present", WANTS_NODE, node_promote_fault_step=step)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-4000:]
    assert f"[kubenest:step:{step}] promoting {NODE} failed at step {step} and was rolled back" in out, out[-4000:]
    assert f"fault injected on entering step {step}" in out
    assert_back_in_host_clean(sb, api, playbook.tenant(api))


@pytest.mark.parametrize("step", _steps(RETURN_STEPS))
def test_a_failed_return_is_finished_by_the_next_run(faults, step):
    sb, api, playbook, _site = faults
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
    assert_back_in_host_clean(sb, api, tenant)


def _set_fault(site_vars, step: str | None) -> None:
    data = yaml.safe_load(site_vars.read_text())
    data.pop("node_promote_fault_step", None)
    if step:
        data["node_promote_fault_step"] = step
    site_vars.write_text(yaml.safe_dump(data))


def test_the_operator_shows_the_failed_step_and_retries(faults):
    """Through a VirtualCluster: the failed step in the Ready condition, the node back in the host meanwhile, and
    the retry (with backoff) promotes the node once the fault is gone."""
    sb, api, _playbook, site_vars = faults
    _set_fault(site_vars, "Kubelet")
    try:
        create_vc(api, NS, "faulty", WANTS_NODE)

        def failed():
            vc = get_vc(api, NS, "faulty") or {}
            retrying = "retrying in" in (vc.get("status") or {}).get("message", "")
            return vc if condition(vc, "Ready").get("reason") == "NodeStepFailed" and retrying else None

        vc = wait_for(failed, 900, "Ready reason NodeStepFailed and a retry planned")
        message = condition(vc, "Ready")["message"]
        assert "failed at step Kubelet and was rolled back" in message, message
        assert vc["status"]["reason"] == "RunFailed" and vc["status"]["phase"] != "Completed"
        assert_back_in_host_clean(sb, api)
    finally:
        _set_fault(site_vars, None)
    vc = wait_ready(api, NS, "faulty", timeout=900)
    assert vc["status"]["nodes"] == [{"name": NODE, "ip": NODE_IP, "ready": True}]
    delete_vc(api, NS, "faulty", timeout=600)
    assert_back_in_host_clean(sb, api)
