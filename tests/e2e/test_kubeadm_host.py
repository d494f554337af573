"""A host cluster the collection did not build: upstream kubeadm on bare machines, images from the registry.

`python -m sandbox.kubeadm up` (what `KUBENEST_HOST=kubeadm make up` runs) on machines of their own (state dir,
bridge, range, names), so the default sandbox keeps running beside them. Checked as an admin would: kubeadm's
static-pod control plane, its kube-proxy DaemonSet and CoreDNS, every image pulled from the registry, a Service
answering across machines through the bridge plugin's routes, the agent installed over SSH; a second `up`
changes nothing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import time

import pytest

from sandbox.machines.config import REPO_ROOT, from_env
from tests.support.playbook import run_playbook, write_play

BRIDGE = "knkadm0"
CIDR = "198.18.4.0/24"
PREFIX = "ka"
UP_TIMEOUT = 2400  # a cold cache builds Kubernetes, the images and the bare image first

pytestmark = [
    pytest.mark.machines,
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.skipif(os.geteuid() != 0, reason="node machines need root"),
    pytest.mark.skipif(not (shutil.which("systemd-nspawn") and shutil.which("debootstrap")),
                       reason="needs systemd-nspawn (systemd-container) and debootstrap"),
]


def _up(env) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sandbox.kubeadm", "up"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=UP_TIMEOUT, check=False)
    assert proc.returncode == 0, f"sandbox.kubeadm up failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc, time.monotonic() - started


@pytest.fixture(scope="module")
def kubeadm_host(tmp_path_factory):
    state = tmp_path_factory.mktemp("kubeadm") / "state"
    env = {**os.environ, "KUBENEST_SANDBOX_DIR": str(state), "KUBENEST_BRIDGE": BRIDGE, "KUBENEST_NODE_CIDR": CIDR,
           "KUBENEST_NODE_PREFIX": PREFIX, "KUBENEST_CONTROL_PLANES": "1", "KUBENEST_WORKERS": "1"}
    sb = from_env(state_dir=state, bridge=BRIDGE, cidr=CIDR, prefix=PREFIX, control_planes=1, workers=1)
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
    assert sorted(n["metadata"]["name"] for n in nodes) == ["ka-cp1", "ka-w1"]
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
    assert proxy["status"]["numberReady"] == 2
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
    for host in ("ka-cp1", "ka-w1"):
        assert result.host_stats(host)["failures"] == 0 and result.host_stats(host)["ok"] == 2


def test_a_second_up_changes_nothing(kubeadm_host):
    sb, env, _proc = kubeadm_host
    before = _in_machine(sb, "ka-w1", "systemctl", "show", "-p", "MainPID", "--value", "containerd").stdout
    proc, _seconds = _up(env)
    assert "kubeadm init" not in proc.stderr and "kubeadm join" not in proc.stderr
    assert _in_machine(sb, "ka-w1", "systemctl", "show", "-p", "MainPID", "--value", "containerd").stdout == before


def test_node_promotion_refuses_a_kubeadm_node_before_touching_it_naming_what_it_found(kubeadm_host, tmp_path):
    """kubeadm's drop-in and flags file would apply to the tenant's kubelet unit too: promotion's layout check
    refuses the worker, which stays a schedulable, Ready node with the same kubelet process."""
    sb, _env, _proc = kubeadm_host
    pid = _in_machine(sb, "ka-w1", "systemctl", "show", "-p", "MainPID", "--value", "kubelet").stdout
    tasks = [{"name": "layout", "ansible.builtin.include_role": {
        "name": "kosmos.kubenest.node_promote", "tasks_from": "layout.yml", "rolespec_validate": False}}]
    play = write_play(tmp_path / "layout.yml", tasks, hosts="ka-w1")
    result = run_playbook(play, sb.state_dir / "inventory.yml", tmp_path / "cp", "-e",
                          f"kubenest_host_kubeconfig={sb.state_dir / 'kubeconfig'}")
    assert result.rc != 0
    refusal = result.task("kosmos.kubenest.node_promote : Check that promotion can handle the node's layout", "ka-w1")
    assert refusal["msg"].startswith("ka-w1 is left in the host cluster untouched: ")
    assert "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf" in refusal["msg"]
    assert "/var/lib/kubelet/kubeadm-flags.env" in refusal["msg"]
    layout = result.task("kosmos.kubenest.node_promote : Read how the node runs its kubelet and kube-proxy",
                         "ka-w1")["layout"]
    assert layout["kubelet"]["program"] == "/usr/bin/kubelet" and layout["kube_proxy"] is None
    node = _kubectl(sb, "get", "node", "ka-w1")
    assert not node["spec"].get("unschedulable")
    assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    assert _in_machine(sb, "ka-w1", "systemctl", "show", "-p", "MainPID", "--value", "kubelet").stdout == pid
