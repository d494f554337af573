"""``make bench`` part 3: promotion of a host worker into a virtual cluster and its return, on the sandbox.

Runs playbooks/virtualcluster.yml with ansible-playbook (nodes listed by the kosmos.kubenest.globalnodes
inventory) and watches from outside, every 0.2 s:
  promotion: GlobalNode reserved -> the node Ready in the tenant;
  return:    GlobalNode returning -> the node Ready in the host cluster.
Baseline, measured in the same run on the same machine: a plain kubelet join of that machine into the host
cluster with a bootstrap token (TLS bootstrap, client certificate approved by the controller-manager), from the
token's creation until the Node is Ready again.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import connect_direct  # noqa: E402

from bench.record import record  # noqa: E402
from sandbox.machines.config import NETWORK_VARS, RETURN_VARS, from_env  # noqa: E402
from tests.support.virtualclusters import (  # noqa: E402
    OperatorProcess,
    ensure_namespace,
    install_crds,
    tenant_client,
    wait_for,
)

NS, NAME, NODE = "kubenest-bench-promote", "bench", "kn-w3"
RUNS = int(os.environ.get("KUBENEST_BENCH_PROMOTIONS", "3"))
POLL_S = 0.2


def node_ready(api, name: str) -> bool:
    from kubernetes import client as k8s
    from kubernetes.client.rest import ApiException

    try:
        node = k8s.CoreV1Api(api).read_node(name, _request_timeout=5)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def globalnode_state(api, name: str) -> str | None:
    from kubernetes import client as k8s

    body = k8s.CustomObjectsApi(api).get_cluster_custom_object("kosmos.io", "v1alpha1", "globalnodes", name)
    return (body.get("status") or {}).get("state")


def _has_globalnode(api, name: str) -> bool:
    try:
        return globalnode_state(api, name) == "free"
    except Exception:
        return False


class Watch:
    """Times from the first moment `start()` holds to the first moment `end()` holds, polled in a thread."""

    def __init__(self, start, end):
        self.start, self.end, self.seconds = start, end, None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.stop = threading.Event()
        self.thread.start()

    def _run(self):
        began = None
        while not self.stop.is_set():
            now = time.monotonic()
            try:
                if began is None and self.start():
                    began = now
                if began is not None and self.end():
                    self.seconds = time.monotonic() - began
                    return
            except Exception:
                pass
            time.sleep(POLL_S)

    def result(self, timeout=600):
        self.thread.join(timeout)
        self.stop.set()
        if self.seconds is None:
            raise RuntimeError("the watched transition did not complete")
        return self.seconds


def playbook(sb, inventory: Path, request: dict, state: str, nodes: list[str]) -> None:
    request["virtualcluster"]["state"] = state
    request["virtualcluster"]["spec"] = {"promoteResources": {"nodes": nodes}} if nodes else {}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(request, fh)
    try:
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                               str(REPO / "playbooks" / "virtualcluster.yml"), "-e", f"@{fh.name}"],
                              cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    finally:
        os.unlink(fh.name)
    if proc.returncode != 0:
        raise RuntimeError(f"virtualcluster.yml ({state}, nodes {nodes}) failed:\n{proc.stdout[-3000:]}")


def baseline(sb, api) -> float:
    """A bootstrap-token join of the same machine into the host cluster: from the token's creation (host Node
    deleted, kubelet stopped, its client credentials removed) until the Node is Ready again."""
    import secrets
    from datetime import UTC, datetime, timedelta

    from kubernetes import client as k8s

    node = next(n for n in sb.nodes if n.name == NODE)
    pki = sb.state_dir / "pki"
    core = k8s.CoreV1Api(api)
    token_id, token_secret = secrets.token_hex(3), secrets.token_hex(8)
    with connect_direct(node.ip, 7443, ca_file=str(pki / "ca.crt"), cert_file=str(pki / "client.crt"),
                        key_file=str(pki / "client.key"), server_name=node.ip) as agent:
        def run(script: str, stdin: bytes | None = None) -> bytes:
            result = agent.exec(argv=["sh", "-c", script], stdin=stdin, timeout=60)
            if result.code != 0:
                raise RuntimeError(f"{script!r} on {NODE}: exit {result.code}: {result.stderr.decode()[-500:]}")
            return result.stdout

        server = yaml.safe_load(run("cat /etc/kubernetes/kubelet.conf"))["clusters"][0]["cluster"]["server"]
        run("systemctl stop kubelet && rm -f /etc/kubernetes/kubelet.conf /var/lib/kubelet/pki/kubelet-client-*")
        core.delete_node(NODE)
        bootstrap = yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "host", "cluster": {"server": server,
                                                      "certificate-authority": "/etc/kubernetes/pki/ca.crt"}}],
            "users": [{"name": "kubelet-bootstrap", "user": {"token": f"{token_id}.{token_secret}"}}],
            "contexts": [{"name": "host", "context": {"cluster": "host", "user": "kubelet-bootstrap"}}],
            "current-context": "host"})
        started = time.monotonic()
        expires = (datetime.now(UTC) + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
        core.create_namespaced_secret("kube-system", {
            "metadata": {"name": f"bootstrap-token-{token_id}"}, "type": "bootstrap.kubernetes.io/token",
            "stringData": {"token-id": token_id, "token-secret": token_secret, "expiration": expires,
                           "usage-bootstrap-authentication": "true",
                           "auth-extra-groups": "system:bootstrappers:kubenest"}})
        try:
            run("umask 077 && cat > /etc/kubernetes/bootstrap-kubelet.conf && systemctl start kubelet",
                bootstrap.encode())
            while not node_ready(api, NODE):
                time.sleep(POLL_S)
            seconds = time.monotonic() - started
        finally:
            run("rm -f /etc/kubernetes/bootstrap-kubelet.conf")
            core.delete_namespaced_secret(f"bootstrap-token-{token_id}", "kube-system")
    return seconds


def row(name: str, values: list[float], base: float) -> str:
    median = statistics.median(values)
    return (f"| {name} | {median:.1f} s | {max(values):.1f} s | {base:.1f} s | {median / base:.1f} |")


def main() -> int:
    subprocess.run([sys.executable, "-m", "sandbox.machines", "up"], cwd=REPO, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "sandbox.cluster", "up"], cwd=REPO, check=True, capture_output=True)
    sb = from_env()
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    kubeconfig = sb.state_dir / "kubeconfig"
    api = k8s_config.new_client_from_config(str(kubeconfig))
    install_crds(kubeconfig)
    ensure_namespace(api, NS)
    pki = sb.state_dir / "pki"

    images = yaml.safe_load((sb.state_dir / "group_vars" / "all.yml").read_text())["kubenest_images_dir"]
    with tempfile.TemporaryDirectory() as tmp:
        # The operator keeps the GlobalNodes; the playbook runs without a VirtualCluster object.
        operator = OperatorProcess(kubeconfig, Path(tmp)).start()
        wait_for(lambda: _has_globalnode(api, NODE), 120, f"GlobalNode {NODE}")
        inventory = Path(tmp) / "bench.globalnodes.yml"
        inventory.write_text(yaml.safe_dump({
            "plugin": "kosmos.kubenest.globalnodes", "kubeconfig": str(kubeconfig),
            "agent_ca_file": str(pki / "ca.crt"), "agent_cert_file": str(pki / "client.crt"),
            "agent_key_file": str(pki / "client.key")}))
        request = {"kubenest_host_kubeconfig": str(kubeconfig), "kubenest_images_dir": images,
                   "kubenest_agent_ca_path": str(sb.pki_dir / "ca"), **NETWORK_VARS, **RETURN_VARS,
                   "virtualcluster": {"namespace": NS, "name": NAME, "uid": ""}}
        playbook(sb, inventory, request, "present", [])  # the control plane first: not part of the figures
        secret = k8s.CoreV1Api(api).read_namespaced_secret(f"{NAME}-admin-kubeconfig", NS)
        tenant, _cfg = tenant_client({"spec": {"kubeconfig": secret.data["kubeconfig"]}})
        promotions, returns, baselines = [], [], []
        try:
            for i in range(RUNS):
                watch = Watch(lambda: globalnode_state(api, NODE) == "reserved", lambda: node_ready(tenant, NODE))
                playbook(sb, inventory, request, "present", [NODE])
                promotions.append(watch.result())
                watch = Watch(lambda: globalnode_state(api, NODE) == "returning", lambda: node_ready(api, NODE))
                playbook(sb, inventory, request, "present", [])
                returns.append(watch.result())
                baselines.append(baseline(sb, api))
                print(f"run {i + 1}: promotion {promotions[-1]:.1f} s, return {returns[-1]:.1f} s, "
                      f"baseline {baselines[-1]:.1f} s", flush=True)
        finally:
            playbook(sb, inventory, request, "absent", [])
            operator.stop()
    base = statistics.median(baselines)
    record("promotion", {"node": NODE, "promotion_s": promotions, "return_s": returns, "baseline_s": baselines})
    print(f"\nNode promotion and return on the sandbox ({RUNS} runs, node {NODE}); baseline: the same machine "
          "joined into the host cluster by its kubelet with a bootstrap token, until Ready")
    print("| metric | median | max | baseline (median) | ratio |")
    print("|---|---|---|---|---|")
    print(row("promotion: reserved -> Ready in the tenant", promotions, base))
    print(row("return: returning -> Ready in the host", returns, base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
