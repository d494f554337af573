"""What the promotion tests look at on the sandbox: GlobalNodes, host Nodes, and files on the machines."""

from __future__ import annotations

import base64
import ipaddress
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import connect_direct
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.errors import AgentUnreachable
from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.tls import fingerprint
from cryptography import x509
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException

from sandbox.machines.config import NETWORK_VARS, RETURN_VARS
from tests.support.virtualclusters import REPO_ROOT, tenant_client, wait_for

# Files that hold a cluster's credentials on a node.
CREDENTIAL_FILES = ("/etc/kubernetes/kubelet.conf", "/etc/kubernetes/kube-proxy.conf",
                    "/etc/kubernetes/bootstrap-kubelet.conf", "/var/lib/kubelet/pki/kubelet-client-current.pem")


def globalnode(api, name: str) -> dict:
    return k8s.CustomObjectsApi(api).get_cluster_custom_object("kosmos.io", "v1alpha1", "globalnodes", name)


def host_node(api, name: str):
    try:
        return k8s.CoreV1Api(api).read_node(name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def host_node_ready(api, name: str) -> bool:
    node = host_node(api, name)
    return node is not None and any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def on_node(sb, name: str, command: str) -> str:
    """stdout of a shell command on a sandbox machine, through its agent."""
    node = next(n for n in sb.nodes if n.name == name)
    pki = sb.state_dir / "pki"
    with connect_direct(node.ip, 7443, ca_file=str(pki / "ca.crt"), cert_file=str(pki / "client.crt"),
                        key_file=str(pki / "client.key"), server_name=node.ip) as agent:
        result = agent.exec(shell=command, timeout=60)
    return result.stdout.decode()


def agent_cert_sha256(sb, name: str) -> str:
    """Fingerprint of the certificate the node's agent presents now."""
    node = next(n for n in sb.nodes if n.name == name)
    pki = sb.state_dir / "pki"
    with connect_direct(node.ip, 7443, ca_file=str(pki / "ca.crt"), cert_file=str(pki / "client.crt"),
                        key_file=str(pki / "client.key"), server_name=node.ip) as agent:
        return fingerprint(agent.transport.ws.socket.getpeercert(binary_form=True))


def agent_refuses_pin(sb, name: str, pin: str) -> str:
    """The error of a connection to the node's agent that accepts only `pin` ("" when it connects)."""
    node = next(n for n in sb.nodes if n.name == name)
    pki = sb.state_dir / "pki"
    try:
        with connect_direct(node.ip, 7443, ca_file=str(pki / "ca.crt"), cert_file=str(pki / "client.crt"),
                            key_file=str(pki / "client.key"), server_name=node.ip, pin=[pin]) as agent:
            agent.health()
    except AgentUnreachable as exc:
        return str(exc)
    return ""


def kubelet_cert_issuer(sb, name: str) -> str:
    pem = on_node(sb, name, "cat /var/lib/kubelet/pki/kubelet-client-current.pem")
    return x509.load_pem_x509_certificate(pem.encode()).issuer.rfc4514_string()


def host_ca_pem(sb) -> str:
    kubeconfig = yaml.safe_load((sb.state_dir / "kubeconfig").read_text())
    return base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]).decode()


def images_dir(sb) -> Path:
    return Path(yaml.safe_load((sb.state_dir / "group_vars" / "all.yml").read_text())["kubenest_images_dir"])


def globalnodes_inventory(sb, path: Path) -> Path:
    """An inventory file for the kosmos.kubenest.globalnodes plugin with the sandbox's agent credentials."""
    pki = sb.state_dir / "pki"
    path.write_text(yaml.safe_dump({
        "plugin": "kosmos.kubenest.globalnodes", "kubeconfig": str(sb.state_dir / "kubeconfig"),
        "agent_ca_file": str(pki / "ca.crt"), "agent_cert_file": str(pki / "client.crt"),
        "agent_key_file": str(pki / "client.key")}))
    return path


class PlainPlaybook:
    """playbooks/virtualcluster.yml run by ansible-playbook alone (no operator) for one virtual cluster."""

    def __init__(self, sb, namespace: str, name: str, workdir: Path):
        self.sb, self.namespace, self.name = sb, namespace, name
        self.inventory = globalnodes_inventory(sb, workdir / "host.globalnodes.yml")
        self.vars_file = workdir / f"{name}.json"

    def run(self, state: str, spec: dict, **extra) -> subprocess.CompletedProcess:
        request = {"kubenest_host_kubeconfig": str(self.sb.state_dir / "kubeconfig"),
                   "kubenest_images_dir": str(images_dir(self.sb)),
                   "kubenest_agent_ca_path": str(self.sb.state_dir / "pki" / "ca"),
                   **NETWORK_VARS, **RETURN_VARS, **extra,
                   "virtualcluster": {"namespace": self.namespace, "name": self.name, "uid": "", "state": state,
                                      "spec": spec}}
        self.vars_file.write_text(json.dumps(request))
        return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(self.inventory),
                               str(REPO_ROOT / "playbooks" / "virtualcluster.yml"), "-e", f"@{self.vars_file}"],
                              capture_output=True, text=True, timeout=1200, check=False)

    def clear(self, *nodes: str) -> None:
        """playbooks/node_clear.yml: held nodes back to the pool."""
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(self.inventory),
                               str(REPO_ROOT / "playbooks" / "node_clear.yml"),
                               "-e", f"kubenest_host_kubeconfig={self.sb.state_dir / 'kubeconfig'}",
                               "-e", f"kubenest_agent_ca_path={self.sb.state_dir / 'pki' / 'ca'}",
                               "-e", f"kubenest_clear_nodes={','.join(nodes)}",
                               "-e", json.dumps({"kubenest_images_dir": str(images_dir(self.sb)),
                                                 **NETWORK_VARS, **RETURN_VARS})],
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]

    def ok(self, state: str, spec: dict, **extra) -> None:
        proc = self.run(state, spec, **extra)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]

    def tenant(self, api):
        return tenant_api(api, self.namespace, self.name)


def tenant_api(api, namespace: str, name: str):
    """A client of the virtual cluster from its admin kubeconfig Secret (also before a run has succeeded)."""
    secret = k8s.CoreV1Api(api).read_namespaced_secret(f"{name}-admin-kubeconfig", namespace)
    return tenant_client({"spec": {"kubeconfig": secret.data["kubeconfig"]}})[0]


def globalnode_free(api, name: str) -> bool:
    try:
        status = globalnode(api, name).get("status") or {}
    except ApiException:
        return False
    return status.get("state") == "free" and not status.get("virtualCluster")


RETURNING_TAINT = "kosmos.io/returning"


class FirstRegistration:
    """Watches the host for the next Node of one name to appear and keeps that first version: what a returning
    node looks like before its kubelet could take anything. Start before the return; `seen()` after it."""

    def __init__(self, api, name: str, timeout: float = 900):
        import threading

        self.first = None
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, args=(api, name, timeout), daemon=True)
        self._thread.start()

    def _run(self, api, name, timeout):
        core = k8s.CoreV1Api(api)
        version = core.list_node(field_selector=f"metadata.name={name}").metadata.resource_version
        for event in self._watch.stream(core.list_node, field_selector=f"metadata.name={name}",
                                        resource_version=version, timeout_seconds=int(timeout)):
            if event["type"] == "ADDED":
                self.first = event["object"]
                self._watch.stop()
                return

    def seen(self, timeout: float = 30):
        self._thread.join(timeout)
        self._watch.stop()
        assert self.first is not None, "no host Node appeared for the returning node"
        return self.first


def assert_registered_cordoned_and_tainted(first) -> None:
    """A returning node's host Node existed cordoned and tainted before its kubelet took it over."""
    assert first.spec.unschedulable, f"{first.metadata.name} appeared schedulable"
    assert RETURNING_TAINT in {t.key for t in first.spec.taints or []}, (
        f"{first.metadata.name} appeared without the {RETURNING_TAINT} taint: {first.spec.taints}")


def assert_back_in_host_clean(sb, api, node_name: str, tenant=None) -> None:
    """The end state of every failed promotion and of every finished return."""
    node = host_node(api, node_name)
    assert node is not None and host_node_ready(api, node_name), f"{node_name} is not Ready in the host cluster"
    assert not node.spec.unschedulable, f"{node_name} is still cordoned"
    assert RETURNING_TAINT not in {t.key for t in node.spec.taints or []}, f"{node_name} is still tainted"
    assert node.metadata.labels.get("kubernetes.io/hostname") == node_name
    assert globalnode_free(api, node_name), f"GlobalNode {node_name}: {globalnode(api, node_name).get('status')}"
    stashes = k8s.CoreV1Api(api).list_namespaced_secret("kubenest-system").items
    assert f"kubenest-node-{node_name}" not in {s.metadata.name for s in stashes}
    # On the node: the host CA pinned, a host-issued kubelet certificate, no tenant network or join file.
    assert on_node(sb, node_name, "cat /etc/kubernetes/pki/ca.crt").strip() == host_ca_pem(sb).strip()
    assert "kubenest-vc-ca" not in kubelet_cert_issuer(sb, node_name)
    files = on_node(sb, node_name, "ls /etc/cni/net.d /etc/kubernetes")
    assert "10-kubenest-tenant.conflist" not in files and "bootstrap-kubelet.conf" not in files
    if tenant is not None:  # nothing about the node left in the tenant
        assert node_name not in {n.metadata.name for n in k8s.CoreV1Api(tenant).list_node().items}
        tokens = k8s.CoreV1Api(tenant).list_namespaced_secret(
            "kube-system", label_selector=f"kosmos.io/globalnode={node_name}").items
        assert not tokens, [t.metadata.name for t in tokens]


# The hosted tenants' pod and Service ranges (roles/control_plane defaults): no host rule points into them.
TENANT_RANGES = (ipaddress.ip_network("198.18.64.0/18"), ipaddress.ip_network("198.18.128.0/17"))


def tenant_traces(sb, api, node_name: str, tenant_namespace: str | None = None) -> list[str]:
    """What a virtual cluster could have left on a node back in the host: containers of pods the host does not
    know, iptables rules of the tenant's kube-proxy (its Services by name, its pod and Service addresses)."""
    traces = []
    # With Cilium as the host's own pod network, its devices, rules and files on a returned node are the host's.
    host_cilium = bool(k8s.AppsV1Api(api).list_namespaced_daemon_set(
        "kube-system", field_selector="metadata.name=cilium").items)
    tenant_only = ("cali-",) if host_cilium else ("CILIUM", "cali-")
    labels = on_node(sb, node_name, "for c in $(ctr -n k8s.io containers ls -q); do"
                     " ctr -n k8s.io containers info $c | grep -o '\"io.kubernetes.pod.uid\": \"[^\"]*\"';"
                     " done")
    # Pod log directories (<namespace>_<pod>_<uid>) with their change times. The kubelet removes those of deleted
    # pods only at its next garbage collection, so a directory counts only when it is older than the node's
    # return (its host Node registers anew after the wipe) and no host pod has its uid.
    pod_logs = on_node(sb, node_name, "find /var/log/pods -mindepth 1 -maxdepth 1 -printf '%T@ %f\\n'")
    # Listed after the containers and logs: a host pod is created before its containers.
    host_pods = {p.metadata.uid for p in k8s.CoreV1Api(api).list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={node_name}").items}
    returned = k8s.CoreV1Api(api).read_node(node_name).metadata.creation_timestamp.timestamp()
    for line in pod_logs.splitlines():
        changed, name = line.split(" ", 1)
        if float(changed) < returned - 1 and name.rsplit("_", 1)[-1] not in host_pods:
            traces.append(f"pod log {name}")
    traces += [f"container of pod {uid}" for uid in re.findall(r'"io.kubernetes.pod.uid": "([^"]*)"', labels)
               if uid not in host_pods]
    rules = on_node(sb, node_name, "iptables-save")
    if tenant_namespace:  # a namespace only the tenant has: the host's kube-proxy names its own Services too
        traces += [f"rule: {line}" for line in rules.splitlines() if f"{tenant_namespace}/" in line]
    for line in rules.splitlines():
        for word in re.findall(r"\d+\.\d+\.\d+\.\d+", line):
            if any(ipaddress.ip_address(word) in net for net in TENANT_RANGES):
                traces.append(f"rule into a tenant range: {line}")
        if any(mark in line for mark in tenant_only):
            traces.append(f"pod network rule: {line}")
    # The tenant's pod network (Cilium or Calico): its devices, its routes, its pinned maps and programs, its
    # plugins.
    links = on_node(sb, node_name, "ip -o link show")
    devices = ("cali", "vxlan.calico") + (() if host_cilium else ("cilium_", "lxc"))
    traces += [f"device {name}" for name in re.findall(r"^\d+: ([^:@]+)", links, re.M) if name.startswith(devices)]
    routes = on_node(sb, node_name, "ip route show table all")
    for line in routes.splitlines():
        for word in re.findall(r"\d+\.\d+\.\d+\.\d+", line):
            if any(ipaddress.ip_address(word) in net for net in TENANT_RANGES):
                traces.append(f"route into a tenant range: {line}")
    cilium_files = "" if host_cilium else "/sys/fs/bpf/cilium /sys/fs/bpf/tc /var/run/cilium /usr/lib/cni/cilium-cni "
    traces += [f"file {path}" for path in on_node(
        sb, node_name, f"ls -d {cilium_files}/var/lib/calico /var/run/calico /usr/lib/cni/calico"
                       " /usr/lib/cni/calico-ipam 2>/dev/null || true").split()]
    return traces


def echo_on_node(tenant, name: str, node: str) -> int:
    """An echo Deployment pinned to `node` behind a NodePort Service; returns the node port."""
    apps, core = k8s.AppsV1Api(tenant), k8s.CoreV1Api(tenant)
    labels = {"app": name}
    apps.create_namespaced_deployment("default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "echo", "image": "kubenest.local/echo:1.0",
                            "ports": [{"containerPort": 8080}]}]}}}})
    svc = core.create_namespaced_service("default", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}})
    wait_for(lambda: (apps.read_namespaced_deployment(name, "default").status.available_replicas or 0) >= 1, 180,
             f"tenant Deployment {name} available")
    return svc.spec.ports[0].node_port
