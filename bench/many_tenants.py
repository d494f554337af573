"""``make bench-tenants``: many control-plane-only VirtualClusters hosted at once on the sandbox, by the real operator.

KUBENEST_BENCH_TENANTS (50) virtual clusters, spread over KUBENEST_BENCH_TENANT_NAMESPACES (10) namespaces as a
platform team gives them, each a real etcd, API server, controller-manager and scheduler in pods on the sandbox's
control-plane machine. The first is created alone and measured idle; then the rest are created at once and the
same is measured with all of them idle. Printed, and kept in build/bench/<date>.json:

- time until all are Ready, how many are not, and restarts of their containers meanwhile;
- per idle tenant, as the slope between one tenant and all of them, in the same run: the operator's memory (RSS
  of its process tree) and CPU seconds per minute, the host API server's requests per minute (every client: what
  the tenants add to the host, the operator's looks included), and the tenant control plane's own working set
  and CPU (kubelets' summary API);
- one tenant broken without a spec change (its API server scaled to 0): seconds until the operator's look turns
  Ready False and until its run has it Ready again, among all of them against the same alone;
- all deleted at once: seconds until gone, and what is left in the host.

The operator runs with its defaults (four runs at once, two per namespace, a look every 30 s). Only the
components' requests are lowered, through the site variables every run gets (SMALL_REQUESTS): with the roles'
defaults (110m CPU each, sized so that ten fit beside the host's own pods on a 2-core control-plane node) 50 would
not schedule on the sandbox's one control-plane machine. Limits stay as they are; what an idle tenant really uses
is printed next to what it requests.
"""

from __future__ import annotations

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

from bench.operator_scale import requests_total, slope  # noqa: E402
from bench.process_memory import tree_rss_bytes  # noqa: E402
from bench.record import record  # noqa: E402
from bench.settle import settle  # noqa: E402
from bench.virtualclusters import (  # noqa: E402
    break_and_repair,
    delete_namespaces,
    print_repair,
    ready_now,
    settled_usage,
)
from bench.virtualclusters import leftovers as namespace_leftovers  # noqa: E402
from sandbox.machines.config import from_env  # noqa: E402
from tests.support.virtualclusters import create_vc, delete_vc, get_vc, own_operator, wait_ready  # noqa: E402

COUNT = int(os.environ.get("KUBENEST_BENCH_TENANTS", "50"))
NAMESPACES = int(os.environ.get("KUBENEST_BENCH_TENANT_NAMESPACES", "10"))
WINDOW_S = float(os.environ.get("KUBENEST_BENCH_TENANT_WINDOW", "60"))
PREFIX = "kubenest-tenants"
READY_TIMEOUT_S = float(os.environ.get("KUBENEST_BENCH_TENANT_TIMEOUT", "3600"))
MiB = 1024 * 1024
# 27m of CPU and 206 MiB of memory per tenant with the Konnectivity server's own 5m and 30Mi: 50 ask for 1.35
# cores and 10 GiB, against 110m and 526 MiB with the roles' defaults.
SMALL_REQUESTS = {
    "control_plane_hosted_resources": {
        "apiserver": {"requests": {"cpu": "10m", "memory": "96Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
        "controller-manager": {"requests": {"cpu": "5m", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
        "scheduler": {"requests": {"cpu": "2m", "memory": "16Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
    },
    "etcd_hosted_resources": {"requests": {"cpu": "5m", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
}


# What the idle windows measure: (label, key).
FIGURES = (("operator memory (MiB)", "operator_MiB"), ("operator CPU (s/min)", "operator_cpu_s_per_min"),
           ("host API server requests/min, all clients", "host_requests_per_min"),
           ("tenants' control planes, working set (MiB)", "tenants_MiB"),
           ("tenants' control planes, CPU (millicores)", "tenants_mcpu"))


def tenants(count: int = COUNT, namespaces: int = NAMESPACES) -> list[tuple[str, str]]:
    """(namespace, name) of each tenant, dealt round the namespaces."""
    return [(f"{PREFIX}-{i % namespaces}", f"t{i:03d}") for i in range(count)]


def per_tenant(one: dict, many: dict, count: int) -> dict[str, float]:
    """Each figure's cost per tenant: the slope from one tenant to `count` (bench/operator_scale.py)."""
    return {key: slope([{"tenants": 1, key: one[key]}, {"tenants": count, key: many[key]}], key)
            for _label, key in FIGURES}


def host_requests(api) -> float:
    return requests_total(api.call_api("GET", f"{api.configuration.host}/metrics").read().decode())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def runs_started(log: Path) -> int:
    return log.read_text(errors="replace").count("with state present")


def idle_window(api, pid: int, log: Path, names: list[str], namespaces: tuple[str, ...]) -> dict:
    """The operator's and the host API server's cost over WINDOW_S with every tenant idle, then the tenants'
    own usage (read after the window: the summary reads are host API requests too)."""
    runs, cpu, served, started = runs_started(log), cpu_seconds(pid), host_requests(api), time.monotonic()
    rss = []
    while time.monotonic() - started < WINDOW_S:
        rss.append(tree_rss_bytes(pid))
        time.sleep(5)
    minutes = (time.monotonic() - started) / 60
    figures = {"operator_MiB": statistics.median(rss) / MiB,
               "operator_cpu_s_per_min": (cpu_seconds(pid) - cpu) / minutes,
               "host_requests_per_min": (host_requests(api) - served - 1) / minutes,  # less this reading's own
               "runs_meanwhile": runs_started(log) - runs}
    memory, mcpu = settled_usage(api, names, namespaces=namespaces)
    figures.update(tenants_MiB=memory / MiB, tenants_mcpu=mcpu)
    return figures


def restarts(api, namespaces: tuple[str, ...]) -> int:
    """Container restarts of every virtual control-plane pod in the bench's namespaces."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(api)
    return sum(c.restart_count for namespace in namespaces
               for pod in core.list_namespaced_pod(namespace, label_selector="kosmos.io/virtualcluster").items
               for c in pod.status.container_statuses or [])


def await_all(api, wanted: list[tuple[str, str]], started: float) -> tuple[dict[str, float], float]:
    """Seconds from `started` until each is first seen Ready, printing the count as it grows with the machine's
    load; and the highest 1-minute load average seen meanwhile."""
    ready: dict[str, float] = {}
    deadline, shown, load_peak = started + READY_TIMEOUT_S, -1, 0.0
    while len(ready) < len(wanted) and time.monotonic() < deadline:
        for namespace, name in wanted:
            if name not in ready and ready_now(api, namespace, name):
                ready[name] = time.monotonic() - started
        load_peak = max(load_peak, os.getloadavg()[0])
        if len(ready) != shown:
            shown = len(ready)
            print(f"  {time.monotonic() - started:6.0f} s: {shown} of {len(wanted)} Ready, load average "
                  f"{os.getloadavg()[0]:.0f}", flush=True)
        time.sleep(5)
    return ready, load_peak


def stage(results: dict, what: str, *keys: str) -> None:
    """Each stage's figures kept and printed as soon as they are known: a run stopped later still has them."""
    record("many_tenants", results)
    print(f"{what}: " + ", ".join(f"{key} {results[key]}" for key in keys), flush=True)


def leftovers(api, namespaces: tuple[str, ...]) -> list[str]:
    return [f"{namespace}: {found}" for namespace in namespaces for found in namespace_leftovers(api, namespace)]


def main() -> int:
    subprocess.run([sys.executable, "-m", "sandbox.machines", "up"], cwd=REPO, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "sandbox.cluster", "up"], cwd=REPO, check=True, capture_output=True)
    sb = from_env()
    from kubernetes import config as k8s_config

    api = k8s_config.new_client_from_config(str(sb.state_dir / "kubeconfig"))
    everyone = tenants()
    namespaces = tuple(sorted({namespace for namespace, _name in everyone}))
    names = [name for _namespace, name in everyone]
    (first_ns, first), rest = everyone[0], everyone[1:]
    results: dict = {"tenants": COUNT, "namespaces": len(namespaces), "window_s": WINDOW_S,
                     "requests": SMALL_REQUESTS}
    with tempfile.TemporaryDirectory() as logs, \
            own_operator(sb, api, namespaces, Path(logs), site=SMALL_REQUESTS, leftovers_timeout=900) as operator:
        for namespace, name in everyone:  # an interrupted earlier run
            if get_vc(api, namespace, name) is not None:
                delete_vc(api, namespace, name, timeout=900)
        log = Path(logs) / f"operator-{operator.starts}.log"
        settle()
        started = time.monotonic()
        create_vc(api, first_ns, first)
        wait_ready(api, first_ns, first, timeout=900, interval=0.5)
        results["one_ready_s"] = time.monotonic() - started
        time.sleep(30)  # past the first look and the run's aftermath
        results["one"] = idle_window(api, operator.proc.pid, log, [first], (first_ns,))
        results["repair_alone_s"] = break_and_repair(api, first, first_ns)
        stage(results, "one tenant", "one_ready_s", "one", "repair_alone_s")

        restarts_before = restarts(api, namespaces)
        settle()
        started = time.monotonic()
        for namespace, name in rest:
            create_vc(api, namespace, name)
        ready, results["load_peak"] = await_all(api, rest, started)
        results["all_ready_s"] = max(ready.values()) if len(ready) == len(rest) else None
        results["ready_median_s"] = statistics.median(ready.values()) if ready else None
        results["not_ready"] = [name for _namespace, name in rest if name not in ready]
        results["restarts_meanwhile"] = restarts(api, namespaces) - restarts_before
        stage(results, "created", "all_ready_s", "ready_median_s", "not_ready", "restarts_meanwhile", "load_peak")
        time.sleep(30)
        results["all"] = idle_window(api, operator.proc.pid, log, names, namespaces)
        results["not_ready_after_window"] = sum(int(not ready_now(api, *vc)) for vc in everyone)
        results["per_tenant"] = per_tenant(results["one"], results["all"], COUNT)
        stage(results, "idle", "all", "not_ready_after_window", "per_tenant")
        middle_ns, middle = everyone[COUNT // 2]
        results["repair_among_s"] = break_and_repair(api, middle, middle_ns)
        results["restarts_total"] = restarts(api, namespaces)
        stage(results, "repaired", "repair_among_s", "restarts_total")

        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda vc: delete_vc(api, *vc, timeout=1800), everyone))
        results["delete_all_s"] = time.monotonic() - started
        results["leftovers"] = leftovers(api, namespaces)
    delete_namespaces(api, namespaces)
    record("many_tenants", results)
    report(results)
    return 0


def report(r: dict) -> None:
    one, many, n = r["one"], r["all"], r["tenants"]
    print(f"\n{n} control-plane-only VirtualClusters hosted at once on the sandbox ({r['namespaces']} namespaces), "
          "2 cores")
    print(f"{'metric':52} {'value':>10} {'baseline':>12} {'ratio':>7}")
    if r["all_ready_s"] is not None:
        print(f"{f'{n - 1} created at once after the first -> all Ready (s)':52} {r['all_ready_s']:10.1f} "
              f"{r['one_ready_s']:10.1f}s1 {r['all_ready_s'] / r['one_ready_s']:7.2f}")
    print(f"{'  median of their times to Ready (s)':52} {r['ready_median_s'] or 0:10.1f}")
    print(f"{f'not Ready within {READY_TIMEOUT_S:.0f} s':52} {len(r['not_ready']):10d}")
    print(f"{'not Ready after the idle window':52} {r['not_ready_after_window']:10d}")
    print(f"{'container restarts while they were created':52} {r['restarts_meanwhile']:10d}")
    print(f"{'highest 1-minute load average meanwhile':52} {r['load_peak']:10.0f}")
    print(f"{'container restarts in all, at the end':52} {r['restarts_total']:10d}")
    for label, key in FIGURES:
        print(f"{f'{label}, {n} idle':52} {many[key]:10.1f} {one[key]:10.1f}s1 "
              f"{many[key] / one[key] if one[key] else 0:7.2f}")
    print(f"{'playbook runs during the idle windows':52} {many['runs_meanwhile']:10d} {one['runs_meanwhile']:10d}s1")
    print("per idle tenant (the slope from one to all):")
    for label, key in FIGURES:
        print(f"  {label:50} {r['per_tenant'][key]:10.3f}")
    print_repair(r, n, 52)
    print(f"{f'{n} deleted at once -> all gone (s)':52} {r['delete_all_s']:10.1f}")
    print(f"{'objects left in the host':52} {len(r['leftovers']):10d}")
    print("baseline: s1 = the first tenant alone, in the same run, with the same operator. The look comes every 30 s,"
          " so noticing takes anything from 0 to 30 s wherever the tenant is.")


if __name__ == "__main__":
    sys.exit(main())
