"""``make bench`` part 2: VirtualCluster lifecycle on the sandbox host cluster, driven by the real operator.

Prints seconds from create to Ready (median of CREATES, each after the last was deleted and the machine settled,
bench/settle.py), where the first
create's time went (per phase, from its run's Ansible events), seconds to deletion, the memory and CPU of one idle
virtual control plane (30 s after Ready, the median of six readings 5 s apart; the median of that over the first
IDLE_SAMPLES creates, since one control plane's heap after start-up varies by tens of MiB), and a batch
(KUBENEST_BENCH_BATCH, 10) created at once: time until the last is Ready, how many are not, the operator's
peak memory meanwhile (its runners included), then deleted at once with what is left behind.

Baselines, measured in the same run: the same four binaries started directly as processes, making their PKI
on the clock as a create does (bench/raw_control_plane.py), for create time: with their own defaults (Go's GOGC,
etcd syncing to disk: the headline ratio, what a user starting them by hand gets), with the settings the hosted
roles give them (GOGC 25: the cost of orchestration alone) and with Go's defaults and etcd without fsync (a lower
bound); the host cluster's own control plane (etcd,
kube-apiserver, controller-manager, scheduler as systemd units on the control-plane machine) for memory, and
one virtual cluster alone for the batch timing, and as many raw control planes started at the same moment (`rb`,
the batch's floor: the same binaries competing for the same cores and disk).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ansible_collections.kosmos.kubenest.plugins.plugin_utils.agent.client import connect_direct  # noqa: E402

from bench import phases  # noqa: E402
from bench.process_memory import PeakSampler  # noqa: E402
from bench.raw_control_plane import batch_startup_seconds as raw_batch_startup_seconds  # noqa: E402
from bench.raw_control_plane import startup_seconds as raw_startup_seconds  # noqa: E402
from bench.record import record  # noqa: E402
from bench.settle import settle  # noqa: E402
from sandbox.machines.config import from_env  # noqa: E402
from sandbox.operator import write_site_vars  # noqa: E402
from tests.support.virtualclusters import (  # noqa: E402
    OperatorProcess,
    create_vc,
    delete_vc,
    ensure_namespace,
    get_vc,
    install_crds,
    sandbox_operator_paused,
    wait_ready,
)

NS = "kubenest-bench"
IDLE_S = 30
# Creates one after another, and how many of them are also measured idle. The ratio against the raw baseline is
# near its target: fewer samples leave it to chance which side of it a run lands on.
CREATES = 5
IDLE_SAMPLES = 3
# The single creates are timed to the first read that sees Ready: a coarse poll would add up to its interval.
READY_POLL_S = 0.2
BATCH = int(os.environ.get("KUBENEST_BENCH_BATCH", "10"))
MiB = 1024 * 1024


def settled(measure, *args):
    """`measure(*args)` once the machine has settled (bench/settle.py)."""
    settle()
    return measure(*args)


def vc_usage(api, names: list[str], namespaces: tuple[str, ...] = (NS,)) -> tuple[float, float]:
    """Working-set bytes and CPU millicores of the virtual control-plane pods, from the kubelets' summary API."""
    from kubernetes import client as k8s

    total, cpu = 0, 0.0
    for node in k8s.CoreV1Api(api).list_node().items:
        core = k8s.CoreV1Api(api)
        raw = core.connect_get_node_proxy_with_path(node.metadata.name, "stats/summary", _preload_content=False).data
        for pod in json.loads(raw).get("pods", []):
            ref = pod["podRef"]
            if ref["namespace"] in namespaces and any(ref["name"].startswith(f"{n}-") for n in names):
                total += (pod.get("memory") or {}).get("workingSetBytes", 0)
                cpu += (pod.get("cpu") or {}).get("usageNanoCores", 0) / 1e6
    return total, cpu


def host_control_plane_memory(sb) -> float:
    """RSS of the host's own control-plane processes on its control-plane machine."""
    node = next(n for n in sb.nodes if n.role == "control_plane")
    pki = sb.state_dir / "pki"
    with connect_direct(node.ip, 7443, ca_file=str(pki / "ca.crt"), cert_file=str(pki / "client.crt"),
                        key_file=str(pki / "client.key"), server_name=node.ip) as agent:
        out = agent.exec(argv=["ps", "-o", "rss=", "-C", "etcd,kube-apiserver,kube-controller-manager,kube-scheduler"])
    return sum(int(v) for v in out.stdout.split()) * 1024


def control_plane_pods(api, name: str) -> dict[str, int]:
    from kubernetes import client as k8s

    pods = k8s.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"kosmos.io/virtualcluster={name}").items
    return {p.metadata.uid: sum(c.restart_count for c in p.status.container_statuses or []) for p in pods}


def settled_usage(api, names: list[str], samples: int = 6, every_s: float = 5,
                  namespaces: tuple[str, ...] = (NS,)) -> tuple[float, float]:
    """Median memory and CPU of `samples` summary readings `every_s` apart: one reading catches a collection
    or a burst of probes and can be off by tens of MiB."""
    readings = []
    for i in range(samples):
        if i:
            time.sleep(every_s)
        readings.append(vc_usage(api, names, namespaces))
    return statistics.median(r[0] for r in readings), statistics.median(r[1] for r in readings)


def requested_mcpu(api, name: str) -> float:
    """CPU the virtual control plane's containers request: what the scheduler sets aside for it."""
    from kubernetes import client as k8s
    from kubernetes.utils import parse_quantity

    pods = k8s.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"kosmos.io/virtualcluster={name}").items
    return sum(float(parse_quantity((c.resources.requests or {}).get("cpu", "0"))) * 1000
               for p in pods for c in p.spec.containers)


def label_edit(api, log: Path, name: str) -> tuple[int, int]:
    """Runs started, and pods replaced or restarted, in the 15 s after a label edit of a Ready virtual cluster."""
    from kubernetes import client as k8s

    runs, pods = log.read_text(errors="replace").count("with state present"), control_plane_pods(api, name)
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object("kosmos.io", "v1alpha1", NS, "virtualclusters", name,
                                                             {"metadata": {"labels": {"bench": "edited"}}})
    time.sleep(15)
    after = control_plane_pods(api, name)
    changed = sum(1 for uid, restarts in pods.items() if after.get(uid) != restarts)
    return log.read_text(errors="replace").count("with state present") - runs, changed


def ready_now(api, namespace: str, name: str) -> bool:
    vc = get_vc(api, namespace, name) or {}
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (vc.get("status") or {}).get("conditions") or [])


def leftovers(api, namespace: str = NS) -> list[str]:
    """What any virtual cluster still owns in a bench namespace (its objects carry the label)."""
    from kubernetes import client as k8s

    core, apps, net = k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.NetworkingV1Api(api)
    selector = "kosmos.io/virtualcluster"
    found = []
    for kind, lister in (("Pod", core.list_namespaced_pod), ("Secret", core.list_namespaced_secret),
                         ("Service", core.list_namespaced_service), ("ConfigMap", core.list_namespaced_config_map),
                         ("PersistentVolumeClaim", core.list_namespaced_persistent_volume_claim),
                         ("Deployment", apps.list_namespaced_deployment),
                         ("StatefulSet", apps.list_namespaced_stateful_set),
                         ("NetworkPolicy", net.list_namespaced_network_policy)):
        found += [f"{kind}/{o.metadata.name}" for o in lister(namespace, label_selector=selector).items]
    return found


def delete_namespaces(api, namespaces: tuple[str, ...]) -> None:
    """Namespaces a bench made, empty of virtual clusters by now."""
    from kubernetes import client as k8s
    from kubernetes.client.rest import ApiException

    for namespace in namespaces:
        try:
            k8s.CoreV1Api(api).delete_namespace(namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise


def break_and_repair(api, name: str, namespace: str = NS) -> tuple[float, float]:
    """Its API server scaled to 0 as `kubectl scale` would, no spec change: seconds until the operator's look
    turns Ready False, and until its repair run has the tenant Ready again."""
    from kubernetes import client as k8s

    started = time.monotonic()
    k8s.AppsV1Api(api).patch_namespaced_deployment_scale(f"{name}-apiserver", namespace, {"spec": {"replicas": 0}},
                                                         field_manager="kubectl")
    while ready_now(api, namespace, name):
        if time.monotonic() - started > 300:
            raise RuntimeError(f"{name}'s API server scaled to 0 and still Ready after 300 s")
        time.sleep(0.5)
    noticed = time.monotonic() - started
    wait_ready(api, namespace, name, timeout=600, interval=READY_POLL_S)
    return noticed, time.monotonic() - started


def print_repair(r: dict, n: int, width: int) -> None:
    """The rows of a tenant broken and repaired among `n`, against the same alone (break_and_repair)."""
    for what, key in (("noticed, Ready=False", 0), ("repaired, Ready again", 1)):
        among, alone = r["repair_among_s"][key], r["repair_alone_s"][key]
        label = f"API server scaled to 0 among {n}: {what} (s)"
        print(f"{label:{width}} {among:10.1f} {alone:10.1f}s1 {among / alone:7.2f}")


def restart(operator, logs: Path, count: int) -> tuple[float, int]:
    """Stop and start the operator; seconds until it resumed `count` VirtualClusters, and the runs it started."""
    operator.stop()
    started = time.monotonic()
    operator.start()
    log = logs / f"operator-{operator.starts}.log"
    deadline = started + 900
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if text.count("Resuming is processed") >= count:
            return time.monotonic() - started, text.count("with state present")
        time.sleep(0.2)
    raise RuntimeError(f"the operator did not resume {count} virtual clusters; see {log}")


def main() -> int:
    subprocess.run([sys.executable, "-m", "sandbox.machines", "up"], cwd=REPO, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "sandbox.cluster", "up"], cwd=REPO, check=True, capture_output=True)
    sb = from_env()
    from kubernetes import config as k8s_config

    kubeconfig = sb.state_dir / "kubeconfig"
    api = k8s_config.new_client_from_config(str(kubeconfig))
    install_crds(kubeconfig)
    ensure_namespace(api, NS)
    # Each baseline start waits for the machine to settle, as each create does: right after `make up` the
    # sandbox is still busy, and unsettled starts made the floor 1.4 to 2.3 times slower in one run.
    # The state dir puts etcd's data on the disk the sandbox's volumes are on, as the hosted etcd's is.
    results = {"raw_upstream_s": statistics.median(settled(raw_startup_seconds, "upstream", sb.state_dir)
                                                   for _run in range(CREATES)),
               "raw_s": statistics.median(settled(raw_startup_seconds, "hosted", sb.state_dir)
                                          for _run in range(CREATES)),
               "raw_defaults_s": statistics.median(settled(raw_startup_seconds, "go-defaults")
                                                   for _run in range(CREATES)),
               # The batch's floor: as many raw control planes started at the same moment.
               "raw_batch_s": settled(raw_batch_startup_seconds, BATCH, "upstream", sb.state_dir)}
    with sandbox_operator_paused(), tempfile.TemporaryDirectory() as logs:
        runs_dir = Path(logs) / "runs"
        # With the agent credentials: each deletion wipes its etcd volume and gives it back to the pool.
        operator = OperatorProcess(kubeconfig, Path(logs), "--site-vars", str(write_site_vars(sb.state_dir)),
                                   "--runs-dir", str(runs_dir)).start()
        try:
            from kubernetes import client as k8s

            for vc in k8s.CustomObjectsApi(api).list_cluster_custom_object(
                    "kosmos.io", "v1alpha1", "virtualclusters")["items"]:  # an interrupted earlier run
                if vc["metadata"]["namespace"].startswith(NS):
                    delete_vc(api, vc["metadata"]["namespace"], vc["metadata"]["name"])
            ready_s, delete_s, idle = [], [], []
            for i in range(CREATES):
                name = f"single-{i}"
                settle()  # the one deleted before stops its pods and wipes its volume meanwhile
                started, created_at = time.monotonic(), dt.datetime.now(dt.UTC)
                create_vc(api, NS, name)
                wait_ready(api, NS, name, interval=READY_POLL_S)
                ready_s.append(time.monotonic() - started)
                if i == 0:
                    results["phases"] = phases.table(phases.find_run(runs_dir, NS, name), created_at,
                                                     dt.datetime.now(dt.UTC))
                if i < IDLE_SAMPLES:
                    time.sleep(IDLE_S)
                    idle.append(settled_usage(api, [name]))
                if i == 0:
                    results["requested_mcpu"] = requested_mcpu(api, name)
                    results["label_edit_runs"], results["label_edit_restarts"] = label_edit(
                        api, Path(logs) / f"operator-{operator.starts}.log", name)
                    results["repair_alone_s"] = break_and_repair(api, name)
                delete_s.append(delete_vc(api, NS, name))
            results["ready_s"] = statistics.median(ready_s)
            results["one_idle_MiB"] = statistics.median(memory for memory, _cpu in idle) / MiB
            results["one_idle_mcpu"] = statistics.median(cpu for _memory, cpu in idle)
            results["delete_s"] = statistics.median(delete_s)

            names = [f"batch-{i}" for i in range(BATCH)]
            started = time.monotonic()
            with PeakSampler(operator.proc.pid) as peak:
                for name in names:
                    create_vc(api, NS, name)
                with ThreadPoolExecutor(BATCH) as pool:
                    list(pool.map(lambda n: wait_ready(api, NS, n, timeout=900), names))
            results["batch_ready_s"] = time.monotonic() - started
            results["operator_peak_MiB"] = peak.bytes / MiB
            results["batch_failures"] = sum(int(not ready_now(api, NS, n)) for n in names)
            time.sleep(IDLE_S)
            memory, results["batch_idle_mcpu"] = settled_usage(api, names)
            results["batch_idle_MiB"] = memory / MiB
            results["repair_among_s"] = break_and_repair(api, names[BATCH // 2])
            results["restart_s"], results["restart_runs"] = restart(operator, Path(logs), len(names))
            # What every resumed virtual cluster cost before: one converge run (its revision annotation removed).
            k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
                "kosmos.io", "v1alpha1", NS, "virtualclusters", names[0],
                {"metadata": {"annotations": {"kubenest.kosmos.io/reconciled-revision": None}}})
            results["rerun_s"], rerun_runs = restart(operator, Path(logs), len(names))
            assert rerun_runs == 1, f"{rerun_runs} runs after removing one revision annotation"
            started = time.monotonic()
            with ThreadPoolExecutor(BATCH) as pool:
                list(pool.map(lambda n: delete_vc(api, NS, n, timeout=900), names))
            results["batch_delete_s"] = time.monotonic() - started
            results["batch_leftovers"] = leftovers(api)

            # The same batch with each tenant in a namespace of its own, as a platform team gives them: the
            # operator's limit per namespace (two runs at once) no longer binds, its overall limit (four) does.
            spread = [(f"{NS}-{i}", f"spread-{i}") for i in range(BATCH)]
            for namespace, _name in spread:
                ensure_namespace(api, namespace)
            settle()
            started = time.monotonic()
            for namespace, name in spread:
                create_vc(api, namespace, name)
            with ThreadPoolExecutor(BATCH) as pool:
                list(pool.map(lambda vc: wait_ready(api, *vc, timeout=900), spread))
            results["spread_ready_s"] = time.monotonic() - started
            results["spread_failures"] = sum(int(not ready_now(api, *vc)) for vc in spread)
            started = time.monotonic()
            with ThreadPoolExecutor(BATCH) as pool:
                list(pool.map(lambda vc: delete_vc(api, *vc, timeout=900), spread))
            results["spread_delete_s"] = time.monotonic() - started
            results["spread_leftovers"] = [f"{namespace}: {found}" for namespace, _name in spread
                                           for found in leftovers(api, namespace)]
            delete_namespaces(api, tuple(namespace for namespace, _name in spread))
        finally:
            operator.stop()
    results["host_cp_MiB"] = host_control_plane_memory(sb) / MiB

    r = results
    record("virtualclusters", results)
    print("\nVirtualCluster lifecycle on the sandbox (operator + hosted roles), 2 cores")
    print(f"{'metric':48} {'value':>10} {'baseline':>12} {'ratio':>7}")
    print(f"{f'create -> Ready, median of {CREATES} (s)':48} {r['ready_s']:10.1f} {r['raw_upstream_s']:10.1f}ru "
          f"{r['ready_s'] / r['raw_upstream_s']:7.2f}")
    print(f"{'  the same against the hosted settings (s)':48} {r['ready_s']:10.1f} {r['raw_s']:10.1f}rc "
          f"{r['ready_s'] / r['raw_s']:7.2f}")
    print(f"{'  the same against the lower bound (s)':48} {r['ready_s']:10.1f} {r['raw_defaults_s']:10.1f}r0 "
          f"{r['ready_s'] / r['raw_defaults_s']:7.2f}")
    print(f"{f'delete -> gone, median of {CREATES} (s)':48} {r['delete_s']:10.1f} {'':>12} {'':>7}")
    print(f"{f'idle memory of one control plane, median {IDLE_SAMPLES} (MiB)':48} {r['one_idle_MiB']:10.0f} "
          f"{r['host_cp_MiB']:10.0f}hc {r['one_idle_MiB'] / r['host_cp_MiB']:7.2f}")
    print(f"{f'idle CPU of one control plane, median {IDLE_SAMPLES} (mCPU)':48} {r['one_idle_mcpu']:10.0f} "
          f"{r['requested_mcpu']:10.0f}rq {r['one_idle_mcpu'] / r['requested_mcpu']:7.2f}")
    n = BATCH
    print(f"{f'{n} at once, one namespace -> all Ready (s)':48} {r['batch_ready_s']:10.1f} {r['ready_s']:10.1f}s1 "
          f"{r['batch_ready_s'] / r['ready_s']:7.2f}")
    print(f"{'  the same against as many raw at once (s)':48} {r['batch_ready_s']:10.1f} {r['raw_batch_s']:10.1f}rb "
          f"{r['batch_ready_s'] / r['raw_batch_s']:7.2f}")
    print(f"{f'{n} raw control planes at once -> all healthy (s)':48} {r['raw_batch_s']:10.1f} "
          f"{r['raw_upstream_s']:10.1f}ru {r['raw_batch_s'] / r['raw_upstream_s']:7.2f}")
    print(f"{f'{n} created at once: not Ready at the end':48} {r['batch_failures']:10d}")
    print(f"{'operator peak memory meanwhile, with runners (MiB)':48} {r['operator_peak_MiB']:10.0f}")
    print(f"{f'memory of {n} idle virtual control planes (MiB)':48} {r['batch_idle_MiB']:10.0f} "
          f"{r['one_idle_MiB']:10.0f}s1 {r['batch_idle_MiB'] / r['one_idle_MiB']:7.2f}")
    print(f"{f'CPU of {n} idle virtual control planes (millicores)':48} {r['batch_idle_mcpu']:10.0f} "
          f"{r['one_idle_mcpu']:10.0f}s1 {r['batch_idle_mcpu'] / r['one_idle_mcpu']:7.2f}")
    print(f"{f'{n} deleted at once -> all gone (s)':48} {r['batch_delete_s']:10.1f} {r['delete_s']:10.1f}s1 "
          f"{r['batch_delete_s'] / r['delete_s']:7.2f}")
    print(f"{f'{n} deleted at once: objects left in the host':48} {len(r['batch_leftovers']):10d}")
    print(f"{f'{n} at once, a namespace each -> all Ready (s)':48} {r['spread_ready_s']:10.1f} "
          f"{r['ready_s']:10.1f}s1 {r['spread_ready_s'] / r['ready_s']:7.2f}")
    print(f"{'  the same against as many raw at once (s)':48} {r['spread_ready_s']:10.1f} {r['raw_batch_s']:10.1f}rb "
          f"{r['spread_ready_s'] / r['raw_batch_s']:7.2f}")
    print(f"{f'{n} at once, a namespace each: not Ready at the end':48} {r['spread_failures']:10d}")
    print(f"{f'{n} at once, a namespace each, deleted -> all gone (s)':48} {r['spread_delete_s']:10.1f} "
          f"{r['delete_s']:10.1f}s1 {r['spread_delete_s'] / r['delete_s']:7.2f}")
    print(f"{f'{n} at once, a namespace each: objects left':48} {len(r['spread_leftovers']):10d}")
    print_repair(r, n, 48)
    print(f"{'label edit of a Ready one: playbook runs started':48} {r['label_edit_runs']:10d}")
    print(f"{'label edit of a Ready one: pods replaced/restarted':48} {r['label_edit_restarts']:10d}")
    print(f"{f'operator restart with {n} Ready -> all resumed (s)':48} {r['restart_s']:10.1f} "
          f"{r['rerun_s']:10.1f}r1 {r['restart_s'] / r['rerun_s']:7.2f}")
    print(f"{'playbook runs started by that restart':48} {r['restart_runs']:10d}")
    print(f"baselines: ru = the same four binaries started as processes with their own defaults (Go's GOGC, etcd"
          f" with fsync on disk; PKI made on the clock on both sides; median of {CREATES}); rc = the same with the"
          " hosted roles' settings (their GOGC); r0 = Go's defaults and etcd without fsync;"
          " hc = the host cluster's own control plane (systemd units, RSS);"
          f" rq = the CPU its pods request; s1 = one virtual cluster alone; rb = {n} ru started at once;"
          f" r1 = a restart in which one of the {n} is converged again (what each one cost before)")
    print("\nwhere the first create went (s), from its run's Ansible events:")
    for phase, seconds in r["phases"]:
        print(f"  {phase:46} {seconds:10.1f}")
    print(f"  {'total (create -> Ready as the bench saw it)':46} {sum(s for _p, s in r['phases']):10.1f}")
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "virtualclusters.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
