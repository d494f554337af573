"""Machines reboot under a virtual cluster: a promoted node, and the host's control-plane machine that also runs
the tenant's control plane.

A reboot here is `python -m sandbox.machines reboot`: a clean shutdown asked for, the power cut after 20 s if it
has not finished (a host with pods never finishes in time: its containers die as in a crash), and a boot on the
same disk, so /run, every process and everything the kernel held (iptables chains, routes) start anew. Nothing
outside the machine helps it back: the operator runs on as it was, and what has to return must return from the
machine's own disk.

The module's tests take one turn together in make test (tests/support/rotation.py); make test-long runs them always.
"""

from __future__ import annotations

import itertools
import time

import pytest
from kubernetes import client as k8s

from tests.e2e.conftest import run_python
from tests.support import rotation
from tests.support.background import Requests
from tests.support.http import get_text
from tests.support.nodes import (
    assert_back_in_host_clean,
    echo_on_node,
    globalnode,
    host_ca_pem,
    host_node,
    kubelet_cert_issuer,
    on_node,
)
from tests.support.virtualclusters import (
    condition,
    create_vc,
    delete_vc,
    get_vc,
    own_operator,
    tenant_client,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-reboot"
NAME = "rebooted"
NODE = "kn-w1"
# Where the node keeps what it was told: the isolation chains and what reaches the tenant or the host.
CHAINS = "iptables -t mangle -S KUBENEST-ISOLATION; ip6tables -t mangle -S KUBENEST-ISOLATION; " \
         "iptables -t mangle -S PREROUTING | grep KUBENEST; ip6tables -t mangle -S PREROUTING | grep KUBENEST"
CREDENTIAL_DIRS = "/etc/kubernetes /var/lib/kubelet/pki /etc/cni /etc/kubenest"


@pytest.fixture(scope="module")
def rebooting(host_cluster, tmp_path_factory):
    """One virtual cluster holding NODE, with an echo pod on it, under an operator of the module's own."""
    sb, api = host_cluster
    log_dir = tmp_path_factory.mktemp("operator")
    with own_operator(sb, api, NS, log_dir, "--node-wait-interval", "5", "--resync-interval", "10",
                      "--backoff-base", "5"):
        try:
            create_vc(api, NS, NAME, {"promoteResources": {"nodes": [NODE]}})
            vc = wait_ready(api, NS, NAME, timeout=900)
            tenant = tenant_client(vc, api)[0]
            yield sb, api, tenant, echo_on_node(tenant, "web", NODE), log_dir / "runs"
        finally:
            if get_vc(api, NS, NAME) is not None:
                delete_vc(api, NS, NAME, timeout=900)


def _reboot(name: str) -> float:
    started = time.monotonic()
    run_python("-m", "sandbox.machines", "reboot", name, timeout=300)
    return time.monotonic() - started


def _node_ready(core, name: str) -> bool:
    try:
        node = core.read_node(name, _request_timeout=5)
    except Exception:  # the API unreachable in any way: not ready yet
        return False
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def _web_pod(tenant):
    pods = k8s.CoreV1Api(tenant).list_namespaced_pod("default", label_selector="app=web").items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


def _restarts(pod) -> int:
    return sum(s.restart_count for s in pod.status.container_statuses or [])


def _pod_ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _chains(sb, name: str) -> set[str]:
    return set(on_node(sb, name, CHAINS).splitlines())


def _host_settled(api) -> bool:
    """Every host Node Ready and every host system pod ready, as before the reboot."""
    core = k8s.CoreV1Api(api)
    try:
        nodes = core.list_node(_request_timeout=5).items
        pods = core.list_namespaced_pod("kube-system", _request_timeout=5).items
    except Exception:  # the API unreachable in any way: not ready yet
        return False
    return all(_node_ready(core, n.metadata.name) for n in nodes) and all(
        _pod_ready(p) for p in pods if p.status.phase != "Succeeded")


@rotation.turn("machine-reboots")
def test_a_promoted_node_comes_back_ready_in_its_tenant_isolated_and_without_host_credentials(rebooting):
    sb, api, tenant, port, _runs = rebooting
    core = k8s.CoreV1Api(tenant)
    chains = _chains(sb, NODE)
    assert any(line.endswith("-j KUBENEST-ISOLATION") for line in chains), chains
    restarts = _restarts(_web_pod(tenant))
    in_host = []  # a host kubelet started on the node would register it in the host as soon as it runs

    def back() -> bool:
        if host_node(api, NODE) is not None:
            in_host.append(time.monotonic())
        pod = _web_pod(tenant)
        return _node_ready(core, NODE) and _pod_ready(pod) and _restarts(pod) > restarts

    booted = _reboot(NODE)
    started = time.monotonic()
    wait_for(back, 300, f"{NODE} Ready in its tenant with its pod running", interval=0.5)
    ready = time.monotonic() - started
    assert "host=web-" in get_text(f"http://{_node_ip(sb, NODE)}:{port}/")  # its NodePort serves again
    print(f"\n{NODE}: agent answering {booted:.1f}s after the reboot began, Node Ready with its pod serving "
          f"{ready:.1f}s later; pod restarts {restarts} -> {_restarts(_web_pod(tenant))}")

    # Its isolation chains are the ones it was told before the reboot, back from its own disk.
    assert _chains(sb, NODE) == chains
    # No host credential came back: the host never saw a Node of it, its kubelet's certificate is the tenant's,
    # and nothing on the node holds the host's CA.
    assert not in_host and host_node(api, NODE) is None, "a host Node registered for the rebooted tenant node"
    assert f"kubenest-vc-ca-{NS}-{NAME}" in kubelet_cert_issuer(sb, NODE)
    ca_line = host_ca_pem(sb).strip().splitlines()[1]
    holding = on_node(sb, NODE, f"grep -rlF -e '{ca_line}' {CREDENTIAL_DIRS} 2>/dev/null || true").split()
    assert not holding, f"files on {NODE} that hold the host's CA: {holding}"
    status = globalnode(api, NODE)["status"]
    assert status["state"] == "occupied" and status["virtualCluster"] == f"{NS}/{NAME}", status
    vc = wait_ready(api, NS, NAME, timeout=120)
    assert vc["status"]["nodesReady"] == "1/1", vc["status"]


class TenantWriter(Requests):
    """Writes a ConfigMap into the tenant every 100 ms and remembers each write the API server acknowledged, the
    failed ones, and the longest stretch without an acknowledged write (longest_silence)."""

    def __init__(self, tenant):
        super().__init__(0.1)
        self.core = k8s.CoreV1Api(tenant)
        self.acknowledged: list[str] = []
        self._number = 0

    def attempt(self) -> None:
        self._number += 1
        name = f"w-{self._number:06d}"
        self.core.create_namespaced_config_map("default", {
            "metadata": {"name": name, "labels": {"kubenest-e2e": "reboot"}}}, _request_timeout=2)
        self.acknowledged.append(name)

    def longest_silence(self) -> tuple[float, float]:
        """(start, end), as time.monotonic(), of the longest stretch without an acknowledged write."""
        times = [self.started, *self.answered_at]
        return max(itertools.pairwise(times), key=lambda pair: pair[1] - pair[0], default=(0.0, 0.0))


@rotation.turn("machine-reboots")
def test_the_host_control_plane_machine_comes_back_with_the_tenant_control_plane_and_its_data(rebooting):
    sb, api, tenant, _port, runs = rebooting
    cp = next(n.name for n in sb.nodes if n.role == "control_plane")
    hosted = {p.metadata.name: p.spec.node_name for p in k8s.CoreV1Api(api).list_namespaced_pod(NS).items}
    assert hosted and set(hosted.values()) == {cp}, f"the tenant's control plane is not on {cp} alone: {hosted}"
    chains = _chains(sb, cp)
    assert f"-A KUBENEST-ISOLATION -s {_node_ip(sb, NODE)}/32 -j DROP" in chains, chains  # the tenant's node kept out
    runs_before = set(runs.glob("run-*"))
    core = k8s.CoreV1Api(tenant)

    with TenantWriter(tenant) as writer:
        wait_for(lambda: len(writer.acknowledged) >= 20, 60, "tenant writes before the reboot", interval=0.2)
        started = time.monotonic()
        booted = _reboot(cp)
        written_before = len(writer.acknowledged)
        wait_for(lambda: len(writer.acknowledged) > written_before + 20, 300, "tenant writes after the reboot",
                 interval=0.5)
    wait_for(lambda: _host_settled(api), 300, "every host Node and system pod ready again")
    wait_for(lambda: _node_ready(core, NODE), 300, f"{NODE} Ready in its tenant again")
    vc = wait_ready(api, NS, NAME, timeout=300)
    settled = time.monotonic() - started

    # Every write the tenant's API server acknowledged before, during and after the reboot is there.
    listed = core.list_namespaced_config_map("default", label_selector="kubenest-e2e=reboot", _request_timeout=30)
    kept = {c.metadata.name for c in listed.items}
    lost = [name for name in writer.acknowledged if name not in kept]
    runs_during = len(set(runs.glob("run-*")) - runs_before)
    restarts = {name: _restarts(pod) for name, pod in
                ((p.metadata.name, p) for p in k8s.CoreV1Api(api).list_namespaced_pod(NS).items)}
    gap_from, gap_to = (t - started for t in writer.longest_silence())
    print(f"\n{cp} rebooted: agent answering after {booted:.1f}s, no tenant write acknowledged from {gap_from:.1f}s "
          f"to {gap_to:.1f}s, the host and the VirtualCluster Ready after {settled:.1f}s; "
          f"{len(writer.acknowledged)} writes acknowledged, {writer.failed} failed, {len(lost)} lost; "
          f"playbook runs meanwhile: {runs_during}; tenant control-plane restarts: {restarts}")
    assert not lost, f"acknowledged tenant writes lost in the reboot: {lost[:10]} ({len(lost)} in all)"
    assert condition(vc, "Ready")["status"] == "True"
    assert vc["status"]["nodesReady"] == "1/1", vc["status"]
    # The host's side of the isolation is back from the machine's own disk too.
    assert _chains(sb, cp) == chains


@rotation.turn("machine-reboots")
def test_the_rebooted_node_returns_to_the_host_clean(rebooting):
    sb, api, _tenant, _port, _runs = rebooting
    delete_vc(api, NS, NAME, timeout=900)
    assert_back_in_host_clean(sb, api, NODE)


def _node_ip(sb, name: str) -> str:
    return next(n.ip for n in sb.nodes if n.name == name)
