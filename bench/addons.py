"""``make bench`` part 4: a virtual cluster's add-ons on its promoted node, driven by the real operator.

For each of several VirtualClusters asking for one node, polled every 0.2 s from outside:
  created -> condition Ready True (control plane, the promoted node and its add-ons: target 35 s);
  control plane Ready (its apiserver Deployment available in the host) -> condition AddonsReady True;
  the node Ready in the tenant (its Ready condition's transition time, to the second) -> AddonsReady True;
and the memory (working set) of the add-on pods on the tenant node once AddonsReady (Cilium agent and operator,
CoreDNS, Konnectivity agent: every kube-system pod there).
Baselines, measured in the same run on the same machines: the host cluster's own CoreDNS, restarted
(rollout restart until every replica is new and available), and its memory per replica; the host's own add-ons
per node (its kube-system pods: Cilium and CoreDNS).
Each create starts once the machine has settled from the run before (bench/settle.py); the first may also copy
images the node lacks.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import phases  # noqa: E402
from bench.record import record  # noqa: E402
from bench.settle import settle  # noqa: E402
from sandbox.machines.config import from_env  # noqa: E402
from sandbox.operator import write_site_vars  # noqa: E402
from tests.support.virtualclusters import (  # noqa: E402
    OperatorProcess,
    condition,
    create_vc,
    delete_vc,
    ensure_namespace,
    get_vc,
    install_crds,
    sandbox_operator_paused,
    tenant_client,
    wait_for,
)

NS, NODE = "kubenest-bench-addons", "kn-w3"
RUNS = int(os.environ.get("KUBENEST_BENCH_ADDONS", "5"))
POLL_S = 0.2
MiB = 1024 * 1024


def _available(api, namespace: str, name: str) -> bool:
    from kubernetes import client as k8s
    from kubernetes.client.rest import ApiException

    try:
        dep = k8s.AppsV1Api(api).read_namespaced_deployment(name, namespace, _request_timeout=5)
    except ApiException:
        return False
    return (dep.status.available_replicas or 0) >= 1


def _node_ready(api, name: str) -> bool:
    from kubernetes import client as k8s

    try:
        node = k8s.CoreV1Api(api).read_node(name, _request_timeout=5)
    except Exception:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def _node_ready_since(api, name: str) -> dt.datetime:
    """When the tenant's Node turned Ready, from its condition (to the second: the kubeconfig that would let a
    poller watch it live is published only with the virtual cluster's status, at the end of the run)."""
    from kubernetes import client as k8s

    node = k8s.CoreV1Api(api).read_node(name, _request_timeout=5)
    ready = next(c for c in node.status.conditions or [] if c.type == "Ready" and c.status == "True")
    return ready.last_transition_time


class TenantApi:
    """A client of the virtual cluster's API once its kubeconfig Secret exists."""

    def __init__(self, api, name: str):
        self.api, self.name, self.client = api, name, None

    def __call__(self):
        if self.client is None:
            vc = get_vc(self.api, NS, self.name)
            if vc and (vc.get("status") or {}).get("kubeconfigSecretRef"):
                self.client = tenant_client(vc, self.api)[0]
        return self.client


class Moments:
    """The first moment each named predicate held, polled in a thread."""

    def __init__(self, **predicates):
        self.predicates, self.seen = predicates, {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set() and len(self.seen) < len(self.predicates):
            now = time.monotonic()
            for name, check in self.predicates.items():
                if name not in self.seen:
                    try:
                        if check():
                            self.seen[name] = now
                    except Exception:
                        pass
            time.sleep(POLL_S)

    def result(self, timeout: float = 900) -> dict[str, float]:
        self.thread.join(timeout)
        self.stop.set()
        missing = set(self.predicates) - set(self.seen)
        if missing:
            raise RuntimeError(f"never seen: {', '.join(sorted(missing))}")
        return self.seen


def kube_system_pods(api, node: str) -> list[dict]:
    """The kubelet summary of `node`'s kube-system pods (through `api`)."""
    from kubernetes import client as k8s

    raw = k8s.CoreV1Api(api).connect_get_node_proxy_with_path(node, "stats/summary", _preload_content=False).data
    return [p for p in json.loads(raw).get("pods", []) if p["podRef"]["namespace"] == "kube-system"]


def addons_memory(api, node: str) -> float:
    """Working set of every add-on pod on `node`."""
    return sum((p.get("memory") or {}).get("workingSetBytes", 0) for p in kube_system_pods(api, node))


def host_addons_memory(api) -> float:
    """The host's own add-ons per node: its kube-system pods' working sets, median over its nodes."""
    from kubernetes import client as k8s

    return statistics.median(addons_memory(api, n.metadata.name) for n in k8s.CoreV1Api(api).list_node().items)


def dns_memory(api, node: str) -> float:
    """Working set of the CoreDNS pods on `node`, from its kubelet's summary API (through `api`)."""
    pods = [p for p in kube_system_pods(api, node) if p["podRef"]["name"].startswith("coredns-")]
    if not pods:
        raise RuntimeError(f"no CoreDNS pod on {node}")
    return sum((p.get("memory") or {}).get("workingSetBytes", 0) for p in pods) / len(pods)


def host_dns_restart(api) -> tuple[float, float]:
    """Seconds for the host's CoreDNS to be restarted and available again, and its memory per replica."""
    from kubernetes import client as k8s

    apps = k8s.AppsV1Api(api)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    started = time.monotonic()
    apps.patch_namespaced_deployment("coredns", "kube-system", {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}})

    def rolled():
        dep = apps.read_namespaced_deployment("coredns", "kube-system")
        s = dep.status
        return (s.observed_generation == dep.metadata.generation
                and s.updated_replicas == s.replicas == s.available_replicas == dep.spec.replicas)
    while not rolled():
        time.sleep(POLL_S)
    seconds = time.monotonic() - started
    time.sleep(15)  # the kubelet's summary lags a new pod
    pods = k8s.CoreV1Api(api).list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns").items
    memory = statistics.median(dns_memory(api, pod.spec.node_name) for pod in pods if pod.spec.node_name)
    return seconds, memory


def row(name: str, values: list[float], base: float, unit: str = "s", scale: float = 1.0) -> str:
    median = statistics.median(values)
    return (f"| {name} | {median / scale:.1f} {unit} | {max(values) / scale:.1f} {unit} | "
            f"{base / scale:.1f} {unit} | {median / base:.1f} |")


def main() -> int:
    subprocess.run([sys.executable, "-m", "sandbox.machines", "up"], cwd=REPO, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "sandbox.cluster", "up"], cwd=REPO, check=True, capture_output=True)
    sb = from_env()
    from kubernetes import config as k8s_config

    kubeconfig = sb.state_dir / "kubeconfig"
    api = k8s_config.new_client_from_config(str(kubeconfig))
    install_crds(kubeconfig)
    ensure_namespace(api, NS)
    from_cp, from_node, memory, baselines, base_memory = [], [], [], [], []
    to_ready, all_memory, host_all_memory, steps = [], [], [], []
    with sandbox_operator_paused(), tempfile.TemporaryDirectory() as tmp:
        # KUBENEST_BENCH_RUNS_DIR keeps the runs' Ansible events for a closer look.
        runs_dir = Path(os.environ.get("KUBENEST_BENCH_RUNS_DIR") or Path(tmp) / "runs")
        operator = OperatorProcess(kubeconfig, Path(tmp), "--site-vars", str(write_site_vars(sb.state_dir)),
                                   "--node-wait-interval", "5", "--progress-interval", "1",
                                   "--runs-dir", str(runs_dir)).start()
        try:
            for i in range(RUNS):
                name = f"addons-{i}"
                tenant_api = TenantApi(api, name)
                moments = Moments(
                    control_plane=lambda name=name: _available(api, NS, f"{name}-apiserver"),
                    addons=lambda name=name: condition(get_vc(api, NS, name), "AddonsReady").get("status")
                    == "True",
                    ready=lambda name=name: condition(get_vc(api, NS, name), "Ready").get("status") == "True")
                # The node returned by the run before rebuilds its pod network meanwhile; the host's DNS restarts.
                settled = settle(floor_s=20)
                created, created_at = time.monotonic(), dt.datetime.now(dt.UTC)
                create_vc(api, NS, name, {"promoteResources": {"nodes": [NODE]}})
                seen = moments.result()
                to_ready.append(seen["ready"] - created)
                run = phases.find_run(runs_dir, NS, name)
                if i == 0:  # where the first create with a node went
                    breakdown = phases.table(run, created_at, created_at + dt.timedelta(seconds=to_ready[-1]))
                steps.append(dict(phases.node_steps(run)))
                from_cp.append(seen["addons"] - seen["control_plane"])
                addons_at = created_at + dt.timedelta(seconds=seen["addons"] - created)
                from_node.append((addons_at - _node_ready_since(tenant_api(), NODE)).total_seconds())
                time.sleep(15)  # the kubelet's summary lags a new pod
                memory.append(dns_memory(tenant_api(), NODE))
                all_memory.append(addons_memory(tenant_api(), NODE))
                delete_vc(api, NS, name, timeout=600)
                wait_for(lambda: _node_ready(api, NODE), 300, f"{NODE} Ready in the host again")
                seconds, host_memory = host_dns_restart(api)
                baselines.append(seconds)
                base_memory.append(host_memory)
                host_all_memory.append(host_addons_memory(api))
                print(f"run {i + 1} (after {settled:.0f} s to settle): created -> Ready {to_ready[-1]:.1f} s, "
                      "control plane Ready -> AddonsReady "
                      f"{from_cp[-1]:.1f} s, node Ready -> AddonsReady {from_node[-1]:.1f} s, add-ons "
                      f"{all_memory[-1] / MiB:.1f} MiB (CoreDNS {memory[-1] / MiB:.1f}); host CoreDNS restart "
                      f"{seconds:.1f} s, {host_memory / MiB:.1f} MiB; host add-ons per node "
                      f"{host_all_memory[-1] / MiB:.1f} MiB", flush=True)
        finally:
            operator.stop()
    base, mem_base = statistics.median(baselines), statistics.median(base_memory)
    record("addons", {"node": NODE, "created_to_ready_s": to_ready, "control_plane_to_addons_s": from_cp,
                      "node_to_addons_s": from_node, "dns_memory_bytes": memory, "addons_memory_bytes": all_memory,
                      "baseline_dns_restart_s": baselines, "baseline_dns_memory_bytes": base_memory,
                      "baseline_host_addons_memory_bytes": host_all_memory, "first_create_phases_s": breakdown,
                      "promotion_steps_s": steps})
    print(f"\nTenant add-ons on the sandbox ({RUNS} virtual clusters, one promoted node each: {NODE}); baseline: "
          "the host cluster's own CoreDNS, restarted until every replica is available, and its memory per replica")
    print("| metric | median | max | baseline (median) | ratio |")
    print("|---|---|---|---|---|")
    print(row("control plane Ready -> AddonsReady", from_cp, base))
    print(row("tenant node Ready -> AddonsReady", from_node, base))
    print(row("add-on memory per tenant node (CoreDNS)", memory, mem_base, "MiB", MiB))
    print(row("add-on memory per tenant node (all)", all_memory, statistics.median(host_all_memory), "MiB", MiB))
    print(f"| created -> Ready with one promoted node | {statistics.median(to_ready):.1f} s | {max(to_ready):.1f} s "
          f"| target 35 s | {statistics.median(to_ready) / 35:.2f} |")
    print("baselines: the host's CoreDNS restarted (times) and per replica (CoreDNS memory); the host's own add-ons "
          "per node, median over its nodes (all add-ons)")
    print("\nwhere the first create with a node went (s), from its run's Ansible events:")
    for phase, seconds in breakdown:
        print(f"  {phase:46} {seconds:10.1f}")
    print("node promotion, by step and run (the steps up to Images run while the control plane starts; the nodes "
          "phase above is only the time the controller waited for them; the first run may copy images the node "
          "lacks):")
    print(f"  {'step':30}" + "".join(f"{f'run {i + 1}':>8}" for i in range(len(steps))))
    for step in dict.fromkeys(name for run_steps in steps for name in run_steps):
        print(f"  {step:30}" + "".join(f"{run_steps.get(step, 0.0):8.1f}" for run_steps in steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
