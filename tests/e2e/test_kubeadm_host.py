"""A host cluster the collection did not build: upstream kubeadm on bare machines, images from the registry.

`python -m sandbox.kubeadm up` (what `KUBENEST_HOST=kubeadm make up` runs) on machines of their own (state dir,
bridge, range, names), so the default sandbox keeps running beside them. Checked as an admin would: kubeadm's
static-pod control plane, its kube-proxy DaemonSet and CoreDNS, every image pulled from the registry, a Service
answering across machines through the bridge plugin's routes, the agent installed over SSH; a second `up`
changes nothing. Then the operator, logged in through an exec credential plugin, promotes kubeadm's workers
into a virtual cluster and gives them back.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from sandbox.machines.config import NETWORK_VARS, REPO_ROOT, from_env
from tests.support import bringup, rotation
from tests.support.exec_plugin import credential, in_minutes, plugin_dir, runs
from tests.support.http import get_text
from tests.support.nodes import globalnode, globalnode_free, host_node_ready, on_node, tenant_traces
from tests.support.playbook import run_playbook, write_play
from tests.support.virtualclusters import (
    OperatorProcess,
    create_vc,
    delete_vc,
    ensure_namespace,
    get_vc,
    install_crds,
    tenant_client,
    wait_for,
    wait_ready,
)

BRIDGE = "knkadm0"
CIDR = "198.18.4.0/24"
PREFIX = "ka"
UP_TIMEOUT = 2400  # a cold cache builds Kubernetes, the images and the bare image first

# On the worker of the machine modules (tests/e2e/conftest.py), never while the sandbox's host comes up
# (tests/support/bringup.py): two bootstraps at once on a cold 2-core run starved each other. Two cold runs that
# lost the sandbox's bootstrap beside it were short of disk (the kubelet's disk-pressure taint at 15 % free), not of
# this module. Its tests take one turn together in make test (tests/support/rotation.py): its machines loaded the
# 2 cores under the sandbox's tests for ten minutes of every run. make test-long and make e2e-kubeadm run it always.
pytestmark = [
    *rotation.marks("kubeadm-host"),
    pytest.mark.machines,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="node machines need root"),
    pytest.mark.skipif(not (shutil.which("systemd-nspawn") and shutil.which("debootstrap")),
                       reason="needs systemd-nspawn (systemd-container) and debootstrap"),
]


def _up(env) -> tuple[subprocess.CompletedProcess, float]:
    with bringup.one_at_a_time("the kubeadm host"):
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "sandbox.kubeadm", "up"], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=UP_TIMEOUT, check=False)
    assert proc.returncode == 0, f"sandbox.kubeadm up failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc, time.monotonic() - started


@pytest.fixture(scope="module")
def kubeadm_host(tmp_path_factory):
    state = tmp_path_factory.mktemp("kubeadm") / "state"
    env = {**os.environ, "KUBENEST_SANDBOX_DIR": str(state), "KUBENEST_BRIDGE": BRIDGE, "KUBENEST_NODE_CIDR": CIDR,
           "KUBENEST_NODE_PREFIX": PREFIX, "KUBENEST_CONTROL_PLANES": "1", "KUBENEST_WORKERS": "2"}
    sb = from_env(state_dir=state, bridge=BRIDGE, cidr=CIDR, prefix=PREFIX, control_planes=1, workers=2)
    try:
        proc, seconds = _up(env)
        print(f"\nkubeadm host up in {seconds:.0f}s")
        yield sb, env, proc
    finally:
        for argv in (["-m", "sandbox.registry", "down"], ["-m", "sandbox.machines", "down"]):
            subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, env=env, capture_output=True, timeout=300,
                           check=False)


def _kubectl(sb, *args) -> dict:
    bin_dir = subprocess.run(["bash", "sandbox/k8s/build.sh"], cwd=REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout.strip().splitlines()[-1]
    proc = subprocess.run([f"{bin_dir}/kubectl", "--kubeconfig", str(sb.state_dir / "kubeconfig"), *args,
                           "-o", "json"], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(proc.stdout)


def _in_machine(sb, name, *argv, timeout=60) -> subprocess.CompletedProcess:
    from sandbox.machines.machine import Machine

    node = next(n for n in sb.nodes if n.name == name)
    return Machine(sb, node).nsenter(list(argv), timeout=timeout)


def _dns_query(name: str) -> bytes:
    header = struct.pack(">HHHHHH", random.randrange(1 << 16), 0x0100, 1, 0, 0, 0)
    question = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    return header + question + struct.pack(">HH", 1, 1)


def test_kubeadm_built_the_control_plane_from_the_registrys_images(kubeadm_host):
    sb, _env, _proc = kubeadm_host
    nodes = _kubectl(sb, "get", "nodes")["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["ka-cp1", "ka-w1", "ka-w2"]
    for node in nodes:
        info = node["status"]["nodeInfo"]
        assert info["kubeletVersion"] == "v1.36.3" and info["containerRuntimeVersion"] == "containerd://2.4.2"
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    pods = {p["metadata"]["name"]: p for p in _kubectl(sb, "-n", "kube-system", "get", "pods")["items"]}
    static = {f"{c}-ka-cp1" for c in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")}
    assert static <= set(pods), sorted(pods)
    for name in static:  # kubeadm's static pods, mirrored by the kubelet
        assert pods[name]["metadata"]["annotations"]["kubernetes.io/config.source"] == "file"
    images = {c["image"] for p in pods.values() for c in p["spec"]["containers"]}
    assert images and all(i.startswith("kubenest.local/") for i in images), images
    proxy = _kubectl(sb, "-n", "kube-system", "get", "daemonset", "kube-proxy")
    assert proxy["status"]["numberReady"] == 3
    dns = _kubectl(sb, "-n", "kube-system", "get", "deployment", "coredns")
    assert dns["status"].get("readyReplicas") == dns["spec"]["replicas"]
    # the worker had no image before it joined: each came over the network from the registry
    listed = _in_machine(sb, "ka-w1", "ctr", "-n", "k8s.io", "images", "ls", "-q").stdout.split()
    assert "kubenest.local/kube-proxy:v1.36.3" in listed and "kubenest.local/pause:3.10.2" in listed
    log = (sb.state_dir / "registry" / "registry.log").read_text()
    assert '"GET /v2/kube-proxy/manifests/v1.36.3' in log or "/v2/kube-proxy/manifests/v1.36.3" in log


def _ask_dns(sb, machine: str, server: str, name: str) -> bytes:
    """One DNS query for `name` to `server`, sent from inside `machine` (its python3; no DNS tool is installed)."""
    script = ("import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.settimeout(5)\n"
              "s.sendto(bytes.fromhex(sys.argv[1]),(sys.argv[2],53))\nprint(s.recv(512).hex())\n")
    return bytes.fromhex(_in_machine(sb, machine, "python3", "-c", script, _dns_query(name).hex(), server).stdout)


def _a_record(answer: bytes) -> str:
    flags, _questions, answers = struct.unpack(">HHH", answer[2:8])
    assert flags & 0x000F == 0 and answers == 1, answer.hex()  # NOERROR, one A record
    return socket.inet_ntoa(answer[-4:])


def test_pods_and_services_answer_across_machines_through_the_bridge_routes_and_kube_proxy(kubeadm_host):
    """Each CoreDNS pod asked on its pod address from the other machine (the static route to that machine's
    range), then the cluster DNS Service from the worker (kube-proxy's rules)."""
    sb, _env, _proc = kubeadm_host
    api_ip = _kubectl(sb, "get", "service", "kubernetes")["spec"]["clusterIP"]
    name = "kubernetes.default.svc.cluster.local"
    dns_pods = _kubectl(sb, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-dns")["items"]
    assert dns_pods
    for pod in dns_pods:
        other = next(n.name for n in sb.nodes if n.name != pod["spec"]["nodeName"])
        assert _a_record(_ask_dns(sb, other, pod["status"]["podIP"], name)) == api_ip
    service_ip = _kubectl(sb, "-n", "kube-system", "get", "service", "kube-dns")["spec"]["clusterIP"]
    assert _a_record(_ask_dns(sb, "ka-w1", service_ip, name)) == api_ip


def test_the_agent_was_installed_over_ssh_and_answers(kubeadm_host, tmp_path):
    sb, _env, _proc = kubeadm_host
    inventory = sb.state_dir / "inventory.yml"
    assert "kosmos.kubenest.nodeagent" in inventory.read_text()
    tasks = [{"name": "read", "ansible.builtin.command": "cat /etc/hostname", "changed_when": False, "register": "out"},
             {"ansible.builtin.assert": {"that": ["out.stdout == inventory_hostname"]}}]
    play = write_play(tmp_path / "play.yml", tasks)
    result = run_playbook(play, inventory, tmp_path / "cp")
    assert result.rc == 0, result.stderr[-3000:]
    for host in ("ka-cp1", "ka-w1", "ka-w2"):
        assert result.host_stats(host)["failures"] == 0 and result.host_stats(host)["ok"] == 2


def test_a_second_up_changes_nothing(kubeadm_host):
    sb, env, _proc = kubeadm_host
    before = _in_machine(sb, "ka-w1", "systemctl", "show", "-p", "MainPID", "--value", "containerd").stdout
    proc, _seconds = _up(env)
    assert "kubeadm init" not in proc.stderr and "kubeadm join" not in proc.stderr
    assert _in_machine(sb, "ka-w1", "systemctl", "show", "-p", "MainPID", "--value", "containerd").stdout == before


def test_node_promotion_refuses_a_node_whose_credentials_a_reset_would_not_clear(kubeadm_host, tmp_path):
    """A site whose reset clears less than the kubelet reads (here not /etc/kubernetes, where kubeadm keeps the
    kubelet's kubeconfig): the layout check refuses the worker, naming the file, and the worker stays a
    schedulable, Ready node with the same kubelet process."""
    sb, _env, _proc = kubeadm_host
    pid = _in_machine(sb, "ka-w1", "systemctl", "show", "-p", "MainPID", "--value", "kubelet").stdout
    tasks = [{"name": "layout", "ansible.builtin.include_role": {
        "name": "kosmos.kubenest.node_promote", "tasks_from": "layout.yml", "rolespec_validate": False}}]
    play = write_play(tmp_path / "layout.yml", tasks, hosts="ka-w1")
    cleared = ["/var/lib/kubelet", "/etc/cni/net.d/*", "/etc/systemd/system/kubelet.service",
               "/etc/systemd/system/kubelet.service.d"]
    result = run_playbook(play, sb.state_dir / "inventory.yml", tmp_path / "cp", "-e", json.dumps(
        {"kubenest_host_kubeconfig": str(sb.state_dir / "kubeconfig"), "node_promote_cluster_paths": cleared}))
    assert result.rc != 0
    refusal = result.task("kosmos.kubenest.node_promote : Check that promotion can handle the node's layout", "ka-w1")
    assert refusal["msg"].startswith("ka-w1 is left in the host cluster untouched: ")
    assert "--kubeconfig=/etc/kubernetes/kubelet.conf lies outside the paths a reset clears" in refusal["msg"]
    layout = result.task("kosmos.kubenest.node_promote : Read how the node runs its kubelet and kube-proxy",
                         "ka-w1")["layout"]
    assert layout["kubelet"]["program"] == "/usr/bin/kubelet" and layout["kube_proxy"] is None
    assert layout["kubelet"]["masks"] == ["/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"]
    node = _kubectl(sb, "get", "node", "ka-w1")
    assert not node["spec"].get("unschedulable")
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    assert _in_machine(sb, "ka-w1", "systemctl", "show", "-p", "MainPID", "--value", "kubelet").stdout == pid


# The operator's login to the kubeadm host: a ServiceAccount token handed out by an exec credential plugin, as
# EKS, GKE, AKS and OIDC logins hand out theirs.
OPERATOR_SA = ("kube-system", "kubenest-e2e-operator")
NS = "kubenest-e2e-kubeadm"


def _exec_kubeconfig(sb, api, directory) -> tuple[object, object]:
    """(path, plugin bin dir): the admin kubeconfig's cluster, with a user whose token comes from the plugin."""
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    namespace, name = OPERATOR_SA
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})
    token = core.create_namespaced_service_account_token(name, namespace, {"spec": {"expirationSeconds": 7200}})
    bin_dir = plugin_dir(directory, credential({"token": token.status.token,
                                                "expirationTimestamp": in_minutes(110)}))
    admin = yaml.safe_load((sb.state_dir / "kubeconfig").read_text())
    path = directory / "operator.kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "operator", "clusters": admin["clusters"],
        "contexts": [{"name": "operator", "context": {"cluster": admin["clusters"][0]["name"], "user": "operator"}}],
        "users": [{"name": "operator", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": str(bin_dir / "get-token"),
            "interactiveMode": "Never"}}}]}))
    path.chmod(0o600)
    return path, bin_dir


@pytest.fixture(scope="module")
def kubeadm_operator(kubeadm_host, tmp_path_factory):
    """CRDs and a pool of local volumes for tenant etcd on the control-plane machine (the tenant control planes'
    default placement), then the operator as a process of the controller, logged in through the exec plugin."""
    sb, _env, _proc = kubeadm_host
    work = tmp_path_factory.mktemp("kubeadm-operator")
    admin = sb.state_dir / "kubeconfig"
    install_crds(admin)
    volumes = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i",
                              str(sb.state_dir / "inventory.yml"), str(REPO_ROOT / "playbooks" / "local_volumes.yml"),
                              "-e", json.dumps({"local_volumes_kubeconfig": str(admin), "local_volumes_count": 2})],
                             capture_output=True, text=True, timeout=300, check=False)
    assert volumes.returncode == 0, volumes.stdout[-4000:]
    api = k8s_config.new_client_from_config(str(admin))
    kubeconfig, bin_dir = _exec_kubeconfig(sb, api, work)
    pki = sb.state_dir / "pki"
    site = work / "site.yml"
    site.write_text(json.dumps({"kubenest_agent_ca_file": str(pki / "ca.crt"),
                                "kubenest_agent_cert_file": str(pki / "client.crt"),
                                "kubenest_agent_key_file": str(pki / "client.key"),
                                "kubenest_agent_ca_path": str(pki / "ca"), **NETWORK_VARS}))
    proc = OperatorProcess(kubeconfig, work, "--site-vars", str(site), "--node-wait-interval", "5",
                           "--resync-interval", "10", "--backoff-base", "20").start()
    ensure_namespace(api, NS)
    try:
        yield sb, api, bin_dir
    finally:
        leftovers = k8s.CustomObjectsApi(api).list_namespaced_custom_object("kosmos.io", "v1alpha1", NS,
                                                                            "virtualclusters")["items"]
        for vc in leftovers:
            delete_vc(api, NS, vc["metadata"]["name"], timeout=600)
        proc.stop()


def _tenant_nodes_ready(tenant) -> set[str]:
    return {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])}


def _echo_on(api, namespace: str, name: str, node: str) -> tuple[int, str]:
    """An echo Deployment pinned to `node` behind a NodePort Service: (node port, cluster IP)."""
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    labels = {"app": name}
    apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "echo", "image": "kubenest.local/echo:1.0",
                            "ports": [{"containerPort": 8080}]}]}}}})
    svc = core.create_namespaced_service(namespace, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}})
    wait_for(lambda: (apps.read_namespaced_deployment(name, namespace).status.available_replicas or 0) >= 1, 180,
             f"Deployment {namespace}/{name} available")
    return svc.spec.ports[0].node_port, svc.spec.cluster_ip


def _promoted(api, node: str) -> bool:
    status = globalnode(api, node).get("status") or {}
    return status.get("virtualCluster") == f"{NS}/seed" and status.get("state") == "occupied"


def _assert_back_with_kubeadms_credentials(sb, api, node: str, ca: x509.Certificate) -> None:
    """Ready in the kubeadm host with a client certificate its own signer issued through kubeadm's bootstrap
    group, kubeadm's kubelet unit and drop-in in force again, kube-proxy and the bridge network working for a
    host pod, and nothing of the tenant left."""
    wait_for(lambda: host_node_ready(api, node) and globalnode_free(api, node), 300, f"{node} back and free")
    pem = on_node(sb, node, "cat /var/lib/kubelet/pki/kubelet-client-current.pem")
    cert = x509.load_pem_x509_certificate(pem.encode())
    cert.verify_directly_issued_by(ca)
    assert cert.subject.rfc4514_string() == f"CN=system:node:{node},O=system:nodes"
    unit = on_node(sb, node, "systemctl show -p FragmentPath -p DropInPaths --value kubelet").split()
    assert unit == ["/lib/systemd/system/kubelet.service", "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"]
    assert on_node(sb, node, "cat /var/lib/kubelet/kubeadm-flags.env").startswith("KUBELET_KUBEADM_ARGS=")
    assert on_node(sb, node, "ls /etc/cni/net.d").split() == ["10-bridge.conflist"]
    assert on_node(sb, node, "ls /etc/kubernetes").split() == ["kubelet.conf", "pki"]  # no bootstrap kubeconfig
    # The host's kube-proxy comes back with the Node: its DaemonSet makes the pod once the Node is registered again,
    # and the kubelet starts it moments later (on a busy machine, after the GlobalNode is already free).
    started = time.monotonic()

    def proxy_phases() -> list[str]:
        return [p.status.phase for p in k8s.CoreV1Api(api).list_namespaced_pod(
            "kube-system", label_selector="k8s-app=kube-proxy", field_selector=f"spec.nodeName={node}").items]

    wait_for(lambda: proxy_phases() == ["Running"], 120, f"kube-proxy Running on {node}")
    print(f"\n{node}: kube-proxy Running {time.monotonic() - started:.1f}s after the node was back and free")
    name = f"back-on-{node}"
    port, cluster_ip = _echo_on(api, "default", name, node)
    pod = k8s.CoreV1Api(api).list_namespaced_pod("default", label_selector=f"app={name}").items[0]
    # the host pod answers across machines (the bridge plugin's routes), by NodePort and by its Service
    fetch = f"import urllib.request; print(urllib.request.urlopen('http://{pod.status.pod_ip}:8080/').read().decode())"
    assert f"host={pod.metadata.name}" in on_node(sb, "ka-cp1", f'python3 -c "{fetch}"')
    assert f"host={pod.metadata.name}" in get_text(f"http://{next(n.ip for n in sb.nodes if n.name == node)}:{port}/")
    assert cluster_ip
    assert tenant_traces(sb, api, node) == []


def test_the_operator_promotes_kubeadm_workers_scales_and_gives_them_back_with_kubeadms_own_credentials(
        kubeadm_operator):
    """The seed's VirtualCluster on a host built by kubeadm, the operator logged in by an exec plugin: a worker
    is promoted, a tenant Deployment pulls its image from the registry and answers by NodePort and ClusterIP, the
    tenant scales to two nodes and back, and on delete every node is kubeadm's again."""
    sb, api, bin_dir = kubeadm_operator
    admin = yaml.safe_load((sb.state_dir / "kubeconfig").read_text())
    ca = x509.load_pem_x509_certificate(base64.b64decode(admin["clusters"][0]["cluster"]["certificate-authority-data"]))
    create_vc(api, NS, "seed", {"podNetwork": "bridge", "promoteResources": {"nodes": ["ka-w1"]}})
    vc = wait_ready(api, NS, "seed", timeout=600)
    assert runs(bin_dir), "the operator never ran the exec plugin"
    tenant = tenant_client(vc, api)[0]
    assert _tenant_nodes_ready(tenant) == {"ka-w1"} and _promoted(api, "ka-w1")
    assert "ka-w1" not in {n.metadata.name for n in k8s.CoreV1Api(api).list_node().items}
    port, cluster_ip = _echo_on(tenant, "default", "web", "ka-w1")
    pod = k8s.CoreV1Api(tenant).list_namespaced_pod("default", label_selector="app=web").items[0]
    assert f"host={pod.metadata.name}" in get_text(f"http://198.18.4.12:{port}/")
    # the Service's ClusterIP from a tenant pod
    assert f"host={pod.metadata.name}" in get_text(f"http://198.18.4.12:{port}/fetch?url=http://{cluster_ip}/")
    listed = on_node(sb, "ka-w1", "ctr -n k8s.io images ls -q").split()
    assert "kubenest.local/echo:1.0" in listed
    assert "/v2/echo/manifests/1.0" in (sb.state_dir / "registry" / "registry.log").read_text()

    patch = {"spec": {"promoteResources": {"nodes": ["ka-w1", "ka-w2"]}}}
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "seed",
                                                             patch)
    wait_for(lambda: _tenant_nodes_ready(tenant) == {"ka-w1", "ka-w2"} and _promoted(api, "ka-w2"), 600,
             "the tenant on two nodes")
    patch = {"spec": {"promoteResources": {"nodes": ["ka-w1"]}}}
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", "seed",
                                                             patch)
    wait_for(lambda: {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items} == {"ka-w1"}, 600,
             "the tenant back on one node")
    _assert_back_with_kubeadms_credentials(sb, api, "ka-w2", ca)
    assert (get_vc(api, NS, "seed")["status"] or {}).get("phase") != "Failed"

    delete_vc(api, NS, "seed", timeout=600)
    _assert_back_with_kubeadms_credentials(sb, api, "ka-w1", ca)
    assert not k8s.CoreV1Api(api).list_namespaced_secret("kubenest-system").items  # no host record left
