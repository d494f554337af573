"""Tenant control planes on a dedicated pool of host workers, reached through a NodePort of the pool or the host's
load balancer, never tied to the host's control-plane node.

The load balancer is the sandbox's stand-in for a platform's own (sandbox/loadbalancer.py: an address on the
sandbox's bridge, proxied to the Service's NodePorts; in the last test an address a host node answers for, as
kube-vip gives); the first and the last tests show it keeps the contract the collection relies on.

The module's tests take one turn together in make test (tests/support/rotation.py); make test-long runs them always.
"""

from __future__ import annotations

import base64
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse

import pytest
from cryptography import x509
from kubernetes import client as k8s

from tests.support import rotation
from tests.support.nodes import (
    FirstRegistration,
    assert_back_in_host_clean,
    assert_registered_cordoned_and_tainted,
    globalnode,
    on_node,
)
from tests.support.virtualclusters import (
    REPO_ROOT,
    condition,
    create_vc,
    delete_vc,
    get_vc,
    own_operator,
    tenant_client,
    wait_for,
    wait_ready,
)

NS = "kubenest-e2e-placement"
# The NodePort tenant also has the longest namespace and name there are: its CAs' common names, which carry
# both, pass X.509's 64 characters.
LONG_NS = "kubenest-e2e-placement-" + "l" * 40
LONG_NAME = "pool-np-" + "n" * 32
POOL_LABEL = "kubenest.io/pool"
POOL_VALUE = "control-plane"
PLACEMENT = {
    "kubenest_control_plane_node_selector": {POOL_LABEL: POOL_VALUE},
    "kubenest_control_plane_tolerations": [{"key": POOL_LABEL, "operator": "Equal", "value": POOL_VALUE,
                                            "effect": "NoSchedule"}],
    # The pool has no local volumes (those are on the control-plane machine): etcd in an emptyDir.
    "etcd_hosted_ephemeral": True,
    # Not the default 120 s: the test of a host without a load balancer waits for it to pass.
    "control_plane_hosted_load_balancer_timeout": 20,
}
TAINT = {"key": POOL_LABEL, "value": POOL_VALUE, "effect": "NoSchedule"}


def _bridge_addresses(bridge: str) -> set[str]:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", bridge], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[3].split("/")[0] for line in out.splitlines()}


@pytest.fixture(scope="module")
def pool_node(host_cluster):
    """The last worker as a pool that only control planes use: labelled and tainted, given back afterwards."""
    sb, api = host_cluster
    node = [n for n in sb.nodes if n.role == "workers"][-1]
    core = k8s.CoreV1Api(api)
    taints = core.read_node(node.name).spec.taints or []
    core.patch_node(node.name, {"metadata": {"labels": {POOL_LABEL: POOL_VALUE}},
                                "spec": {"taints": [t.to_dict() for t in taints] + [TAINT]}})
    yield node
    taints = [t.to_dict() for t in core.read_node(node.name).spec.taints or [] if t.key != POOL_LABEL]
    core.patch_node(node.name, {"metadata": {"labels": {POOL_LABEL: None}}, "spec": {"taints": taints or None}})


@pytest.fixture(scope="module")
def load_balancer(host_cluster, tmp_path_factory):
    """The sandbox's load-balancer stand-in, for this module only."""
    log = tmp_path_factory.mktemp("loadbalancer") / "loadbalancer.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sandbox.loadbalancer"], cwd=REPO_ROOT, stdout=out,
                                stderr=subprocess.STDOUT)
    time.sleep(1)
    assert proc.poll() is None, log.read_text()
    yield proc, log
    proc.send_signal(signal.SIGCONT)
    proc.terminate()
    proc.wait(30)


@pytest.fixture(scope="module")
def operator(host_cluster, pool_node, load_balancer, tmp_path_factory):
    sb, api = host_cluster
    with own_operator(sb, api, (NS, LONG_NS), tmp_path_factory.mktemp("operator"), site=PLACEMENT,
                      leftovers_timeout=300) as proc:
        yield proc, api


def _pods_nodes(api, namespace: str, name: str) -> dict[str, str]:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"kosmos.io/virtualcluster={name}").items
    return {p.metadata.name: p.spec.node_name for p in pods}


def _server_names(host: str, port: int) -> list[str]:
    """The addresses the serving certificate names, read from the TLS handshake."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    sans = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return [str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress)]


@rotation.turn("control-plane-placement")
def test_control_planes_run_on_the_pool_behind_a_load_balancer_or_the_pools_node_port(
        host_cluster, operator, pool_node):
    sb, _api = host_cluster
    _proc, api = operator
    started = time.monotonic()
    create_vc(api, NS, "pool-lb", {"apiServerServiceType": "LoadBalancer"})
    create_vc(api, LONG_NS, LONG_NAME, {})
    balanced, plain = wait_ready(api, NS, "pool-lb"), wait_ready(api, LONG_NS, LONG_NAME)
    print(f"\nboth Ready in {time.monotonic() - started:.0f}s")

    for namespace, name in ((NS, "pool-lb"), (LONG_NS, LONG_NAME)):
        placed = _pods_nodes(api, namespace, name)
        assert len(placed) == 4 and set(placed.values()) == {pool_node.name}, placed

    # Behind the load balancer: its address at the Service port, in the status and in the kubeconfig.
    service = k8s.CoreV1Api(api).read_namespaced_service("pool-lb-apiserver", NS)
    ingress = service.status.load_balancer.ingress
    assert len(ingress) == 1 and ingress[0].ip_mode == "Proxy"
    assert ingress[0].ip in _bridge_addresses(sb.bridge)
    assert balanced["status"]["endpoint"] == f"https://{ingress[0].ip}:6443"
    assert {ingress[0].ip, pool_node.ip} <= set(_server_names(ingress[0].ip, 6443))
    tenant, config = tenant_client(balanced, api)
    assert config["clusters"][0]["cluster"]["server"] == balanced["status"]["endpoint"]
    assert k8s.CoreV1Api(tenant).read_namespace("default").status.phase == "Active"

    # NodePort: the pool node's address, not the control-plane node's; the certificate names the pool.
    endpoint = urllib.parse.urlsplit(plain["status"]["endpoint"])
    control_plane_ips = {n.ip for n in sb.nodes if n.role == "control_plane"}
    assert endpoint.hostname == pool_node.ip and endpoint.hostname not in control_plane_ips
    assert pool_node.ip in _server_names(endpoint.hostname, endpoint.port)
    ca = k8s.CoreV1Api(api).read_namespaced_secret(f"{LONG_NAME}-pki", LONG_NS).data["ca.crt"]
    common_name = x509.load_pem_x509_certificate(base64.b64decode(ca)).subject.rfc4514_string()
    assert common_name.startswith(f"CN=kubenest-vc-ca-{LONG_NS[:32]}") and len(common_name) == len("CN=") + 64
    assert k8s.CoreV1Api(tenant_client(plain, api)[0]).read_namespace("default").status.phase == "Active"

    # The stand-in gives the address back with the Service.
    delete_vc(api, NS, "pool-lb")
    wait_for(lambda: ingress[0].ip not in _bridge_addresses(sb.bridge), 30,
             "the load balancer to release the deleted Service's address")
    assert "pool-lb-apiserver" not in {s.metadata.name for s in k8s.CoreV1Api(api).list_namespaced_service(NS).items}


@rotation.turn("control-plane-placement")
def test_without_a_load_balancer_the_run_fails_saying_what_the_host_lacks(operator, load_balancer):
    _proc, api = operator
    balancer, _log = load_balancer
    balancer.send_signal(signal.SIGSTOP)  # a host without a load-balancer controller, for a while
    try:
        create_vc(api, NS, "pool-nolb", {"apiServerServiceType": "LoadBalancer"})

        def failing():
            ready = condition(get_vc(api, NS, "pool-nolb"), "Ready")
            return ready if "no address in" in ready.get("message", "") else None

        ready = wait_for(failing, 240, "pool-nolb to fail for want of a load balancer")
        assert ready["status"] == "False"
        assert "needs a load-balancer controller" in ready["message"], ready
    finally:
        balancer.send_signal(signal.SIGCONT)
    wait_ready(api, NS, "pool-nolb")  # the next run, with the controller back
    delete_vc(api, NS, "pool-nolb")


# Names on the promoted worker: an image the host has (the echo image every host node gets) put under a private
# name before promotion, and the one a tenant's root puts under that host name while it holds the node.
HOST_IMAGE_FROM = "kubenest.local/echo:1.0"
HOST_PRIVATE = "host.example/private:1"
TENANT_IMAGE = "kubenest.local/coredns"  # a tenant node image: on the node while the tenant holds it


def _images(sb, node: str) -> set[str]:
    return set(on_node(sb, node, "ctr -n k8s.io images ls -q").split())


def _digest(sb, node: str, ref: str) -> str | None:
    for line in on_node(sb, node, f"ctr -n k8s.io images ls name=={ref}").splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == ref:
            return fields[2]
    return None


def _holders(sb, ip: str, besides: str) -> list[str]:
    return [n.name for n in sb.nodes if n.name != besides
            and f" {ip}/32 " in on_node(sb, n.name, "ip -o -4 addr show dev host0")]


@rotation.turn("control-plane-placement")
def test_a_node_promoted_behind_a_load_balancer_that_host_nodes_answer_for_joins_and_works_through_it(
        host_cluster, operator, load_balancer, tmp_path):
    """MetalLB's or kube-vip's way (ipMode VIP): the tenant's node reaches a host node at the load balancer's
    address and Service port, which node isolation lets through for that tenant's nodes only."""
    sb, _api = host_cluster
    _proc, api = operator
    proxying, _log = load_balancer
    proxying.send_signal(signal.SIGCONT)
    proxying.terminate()  # one stand-in at a time; it gives its addresses back
    proxying.wait(30)
    log = tmp_path / "loadbalancer-vip.log"
    with open(log, "wb") as out:
        balancer = subprocess.Popen([sys.executable, "-m", "sandbox.loadbalancer", "--mode", "vip"], cwd=REPO_ROOT,
                                    stdout=out, stderr=subprocess.STDOUT)
    worker = next(n for n in sb.nodes if n.role == "workers")  # the pool is the last worker
    # An image only the host has (a private one, say): the tenant must not get it with the node.
    on_node(sb, worker.name, f"ctr -n k8s.io images tag --force {HOST_IMAGE_FROM} {HOST_PRIVATE}")
    genuine = _digest(sb, worker.name, HOST_IMAGE_FROM)
    try:
        started = time.monotonic()
        create_vc(api, NS, "pool-vip", {"apiServerServiceType": "LoadBalancer", "promotePolicies": [
            {"labelSelector": {"matchLabels": {"kubernetes.io/hostname": worker.name}}, "nodeCount": 1}]})
        vc = wait_ready(api, NS, "pool-vip", timeout=900)
        print(f"\npool-vip Ready with its node in {time.monotonic() - started:.0f}s")
        assert vc["status"]["nodesReady"] == "1/1", vc["status"]

        [ingress] = k8s.CoreV1Api(api).read_namespaced_service("pool-vip-apiserver", NS).status.load_balancer.ingress
        vip = ingress.ip
        assert ingress.ip_mode == "VIP" and vc["status"]["endpoint"] == f"https://{vip}:6443"
        assert vip not in _bridge_addresses(sb.bridge)  # nothing listens for it but kube-proxy on a host node
        [holder] = _holders(sb, vip, besides=worker.name)
        assert globalnode(api, worker.name)["metadata"]["annotations"]["kosmos.io/tenant-api-endpoints"] == (
            f"{vip}:6443,{vip}:8132")
        chain = on_node(sb, holder, "iptables -t mangle -S KUBENEST-ISOLATION")
        assert f"-s {worker.ip}/32 -d {vip}/32 -p tcp -m multiport --dports 6443,8132 -j RETURN" in chain, chain

        # The node's kubelet joined at the address and keeps its node Ready through it.
        assert f"server: https://{vip}:6443" in on_node(sb, worker.name, "cat /etc/kubernetes/kubelet.conf")
        tenant, _config = tenant_client(vc, api)
        tenant_core = k8s.CoreV1Api(tenant)
        [node] = tenant_core.list_node().items
        assert node.metadata.name == worker.name
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
        # Logs go through the Konnectivity agent on the node, which dials the address at 8132.
        agents = k8s.AppsV1Api(tenant).read_namespaced_daemon_set("konnectivity-agent", "kube-system").status
        assert agents.number_ready == 1, agents
        dns_pod = tenant_core.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns").items[0]
        assert dns_pod.spec.node_name == worker.name
        assert "CoreDNS-" in tenant_core.read_namespaced_pod_log(dns_pod.metadata.name, "kube-system")

        # The host's images went with the host: the private one is gone. A root process of the tenant puts an
        # image under a name the host uses; it must not be there when the node is the host's again.
        images = _images(sb, worker.name)
        assert HOST_PRIVATE not in images and HOST_IMAGE_FROM not in images, images
        tenant_ref = next(ref for ref in images if ref.startswith(TENANT_IMAGE + ":"))
        poison = _digest(sb, worker.name, tenant_ref)
        on_node(sb, worker.name, f"ctr -n k8s.io images tag --force {tenant_ref} {HOST_IMAGE_FROM}")
        assert _digest(sb, worker.name, HOST_IMAGE_FROM) == poison

        # Only those pairs: the same port at the holder's own address (the host's API server there) stays shut.
        probe = "timeout 5 bash -c '</dev/tcp/{}/6443' 2>/dev/null && echo open || echo shut"
        holder_ip = next(n.ip for n in sb.nodes if n.name == holder)
        assert on_node(sb, worker.name, probe.format(vip)).strip() == "open"
        assert on_node(sb, worker.name, probe.format(holder_ip)).strip() == "shut"
    finally:
        registration = FirstRegistration(api, worker.name)
        delete_vc(api, NS, "pool-vip", timeout=600)
        balancer.terminate()
        balancer.wait(30)
    # Back in the host: registered cordoned and tainted before its kubelet started, released once Ready.
    assert_registered_cordoned_and_tainted(registration.seen())
    assert_back_in_host_clean(sb, api, worker.name)
    # What the tenant put under the host's name is gone: the host's image is back from the controller's archives
    # (node_promote_host_images), the one the host put there by hand is not.
    assert _digest(sb, worker.name, HOST_IMAGE_FROM) == genuine != poison
    assert HOST_PRIVATE not in _images(sb, worker.name)
    assert "kosmos.io/tenant-api-endpoints" not in (globalnode(api, worker.name)["metadata"].get("annotations") or {})
    assert not _holders(sb, vip, besides=""), "the stand-in left its address on a node"
