"""``make bench-scale``: what each idle tenant costs the operator, and the host API server, by simulation.

The API server and etcd are real (on loopback); the operator is the real one, with its default intervals. The
tenants' control planes are stand-ins, used only here and in the operator's integration tests: the stand-in
playbook (tests/integration/operator/playbooks/virtualcluster.yml) writes the objects the real roles write, with
no process behind them, and an admin kubeconfig that reaches this same API server, so each tenant's "API"
answers. One stand-in tenant is made by the operator's own run; the others are copies of what that run left (its
objects, its VirtualCluster's annotations, finalizers and status, the inventory recomputed as the operator
records it), because a run per tenant costs about 3 s of CPU here and a thousand of them would take most of an
hour. For each count of tenants (KUBENEST_SCALE_TENANTS, default 1,100,1000), in one run:

- resume: seconds from the operator's start until it has looked at every tenant and found nothing to run, and
  the runs it started anyway (should be 0: each one means a copy is not what a run leaves);
- idle, for KUBENEST_SCALE_WINDOW seconds (default 120): the operator's memory (resident set of its one
  process, the working set a cgroup would count; its peak), its CPU seconds per minute, and the requests per
  minute the API server served (apiserver_request_total; at idle they are the operator's, its looks and watches);
- a spec change of one tenant among all: seconds until its run starts (its phase turns Updating).

The per-tenant figures are slopes between the smallest and the largest count of the same run; the baseline is the
smallest count (the operator with one tenant), measured in the same run.

With KUBENEST_SCALE_SHARDS=N (N > 1), the largest count is also spread over KUBENEST_SCALE_NAMESPACES namespaces
(default 30) and measured twice in the same run: served by one replica (the baseline), then by N replicas that
share the work by namespace (operator/README.md, Shards), each shard with its own peering, shard 0 doing the
cluster-scoped work. Both sides watch the same namespaces the same way (kopf's namespaced mode). Printed for each:
the resume, each replica's memory and CPU, the API requests, a spec change's latency.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import ClientPool, KubeApi, connect  # noqa: E402

from bench.record import record  # noqa: E402
from kubenest_operator import health  # noqa: E402
from kubenest_operator.clients import Lender  # noqa: E402
from tests.support.apiserver import ApiServer  # noqa: E402
from tests.support.procs import ManagedProcess, wait_until  # noqa: E402
from tests.support.virtualclusters import install_crds  # noqa: E402

NS = "scale"
FIRST = "t0000"
VC = ("kosmos.io/v1alpha1", "VirtualCluster")
KINDS = (("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"), ("apps/v1", "Deployment"),
         ("apps/v1", "StatefulSet"), ("networking.k8s.io/v1", "NetworkPolicy"), ("policy/v1", "PodDisruptionBudget"))
STAND_IN = REPO / "tests" / "integration" / "operator" / "playbooks"
VENV_BIN = Path(sys.executable).parent
NO_RUN = "nothing drifted since the last run for this spec: no run"


class OperatorUnderTest:
    """kubenest-operator with its default intervals, standalone, over all namespaces."""

    def __init__(self, kubeconfig: Path, workdir: Path, label: str, *args: str):
        self.log_path = workdir / f"operator-{label}.log"
        tmp = workdir / f"tmp-{label}"
        tmp.mkdir()
        argv = [str(VENV_BIN / "kubenest-operator"), "--kubeconfig", str(kubeconfig), "--playbook-dir",
                str(STAND_IN), "--runs-dir", str(workdir / f"runs-{label}"), *(args or ("--standalone",))]
        self.process = ManagedProcess(f"operator-{label}", argv, self.log_path, env={**os.environ, "TMPDIR": str(tmp)})

    def start(self) -> OperatorUnderTest:
        self.process.start()
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def stop(self) -> None:
        self.process.stop(grace=40)


def requests_total(metrics_text: str) -> float:
    """apiserver_request_total summed over every verb, resource and code."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
               if line.startswith("apiserver_request_total{"))


def requests_served(server: ApiServer) -> float:
    context = server.ssl_context(server.admin)
    with urllib.request.urlopen(f"{server.url}/metrics", context=context, timeout=30) as answer:
        return requests_total(answer.read().decode())


def renamed(value, old: str, new: str):
    """`value` with every string naming `old` naming `new` (names, labels, selectors, references)."""
    return json.loads(json.dumps(value).replace(old, new))


def first_tenant(api: KubeApi, kubeconfig: Path, workdir: Path) -> dict:
    """FIRST, made by the operator's own run of the stand-in playbook, Ready."""
    stand_in_namespace(api, NS)
    operator = OperatorUnderTest(kubeconfig, workdir, "first").start()
    try:
        api.create({"apiVersion": VC[0], "kind": VC[1], "metadata": {"name": FIRST, "namespace": NS}, "spec": {}})
        wait_until(lambda: ready(api.get(*VC, FIRST, NS)), 300, f"{FIRST} Ready", operator.process)
    finally:
        operator.stop()
    return api.get(*VC, FIRST, NS)


def ready(vc: dict | None) -> bool:
    status = (vc or {}).get("status") or {}
    return status.get("phase") == "Completed" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def settled(vc: dict | None) -> bool:
    """Ready for the spec it has now."""
    return ready(vc) and vc["status"].get("observedGeneration") == vc["metadata"]["generation"]


def copy_tenant(api: KubeApi, host: Lender, source: dict, objects: list[dict], name: str, namespace: str = NS) -> None:
    """A tenant `name` as FIRST's run left FIRST: its objects, then its VirtualCluster with the same annotations
    (the operator's revision, kopf's record of the handled spec), finalizers and status."""
    meta = source["metadata"]
    vc = {"apiVersion": VC[0], "kind": VC[1], "spec": source.get("spec") or {},
          "metadata": {"name": name, "namespace": namespace, "labels": meta.get("labels") or {},
                       "annotations": meta.get("annotations") or {}, "finalizers": meta.get("finalizers") or []}}
    uid = api.create(vc)["metadata"]["uid"]
    for obj in objects:
        clone = renamed(obj, FIRST, name)
        clone["metadata"]["namespace"] = namespace
        for ref in clone["metadata"].get("ownerReferences") or []:
            if ref.get("uid") == meta["uid"]:
                ref["uid"] = uid
        api.apply(clone)
    status = renamed(source["status"], FIRST, name)
    status["controlPlaneObjects"] = health.inventory(health.list_objects(host, namespace, name))
    api.request("PATCH", api.path(*VC, namespace, name) + "/status", body={"status": status},
                content_type="application/merge-patch+json")


def writable(obj: dict) -> dict:
    """What FIRST's run wrote of `obj`: no status, no server-set metadata."""
    meta = obj["metadata"]
    kept = {key: meta[key] for key in ("name", "namespace", "labels", "annotations", "ownerReferences") if key in meta}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": kept}


def source_objects(api: KubeApi) -> list[dict]:
    return [writable(obj) for version, kind in KINDS
            for obj in api.list(version, kind, NS, label_selector=f"kosmos.io/virtualcluster={FIRST}")]


def tenants_up_to(api: KubeApi, host: Lender, source: dict, count: int) -> None:
    have = {vc["metadata"]["name"] for vc in api.list(*VC, NS)}
    objects = source_objects(api)
    wanted = [f"t{i:04d}" for i in range(count) if f"t{i:04d}" not in have]
    with ClientPool(api, 4) as clients:
        clients.map(lambda client, name: copy_tenant(client, host, source, objects, name), wanted)


def stand_in_namespace(api: KubeApi, name: str) -> None:
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    api.apply({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "kubenest-test-control", "namespace": name},
               "data": {"sleep": "0", "realApi": "true", "replicas": "0"}})


def spread_tenants(api: KubeApi, host: Lender, source: dict, count: int, shards: int, spread: int) -> list[tuple]:
    """`count` tenants round-robin over `spread` namespaces named scale-<shard>-<j>, the shard by the namespace's
    position, so that pattern scale-<k>-* is shard k's and scale-?-* every shard's; their (namespace, name)."""
    namespaces = [f"scale-{j % shards}-{j:03d}" for j in range(spread)]
    for namespace in namespaces:
        stand_in_namespace(api, namespace)
    tenants = [(namespaces[i % spread], f"s{i:04d}") for i in range(count)]
    objects = source_objects(api)
    with ClientPool(api, 4) as clients:
        clients.map(lambda client, tenant: copy_tenant(client, host, source, objects, tenant[1], tenant[0]), tenants)
    return tenants


def measure(server: ApiServer, api: KubeApi, workdir: Path, count: int, window: float) -> dict:
    operator = OperatorUnderTest(server.kubeconfig, workdir, f"n{count}")
    found = measure_replicas(server, api, [operator], count, window, (NS, f"t{count // 2:04d}"))
    return {"tenants": count, "resume_s": found["resume_s"], "runs_at_resume": found["runs_at_resume"],
            "memory_mib": found["memory_mib"][0], "memory_peak_mib": found["memory_peak_mib"][0],
            "cpu_s_per_min": found["cpu_s_per_min"][0], "api_requests_per_min": found["api_requests_per_min"],
            "spec_change_to_run_s": found["spec_change_to_run_s"], "broken_noticed_s": found["broken_noticed_s"],
            "broken_repaired_s": found["broken_repaired_s"]}


def measure_replicas(server: ApiServer, api: KubeApi, operators: list[OperatorUnderTest], count: int,
                     window: float, middle: tuple[str, str]) -> dict:
    """Replicas that together serve `count` tenants: started together, measured while idle, then one spec
    change of `middle` (namespace, name). Memory and CPU are each replica's, in the order given."""
    namespace, name = middle
    started = time.monotonic()
    for operator in operators:
        operator.start()

    def logs() -> str:
        return "".join(operator.log() for operator in operators)

    def resumed_all() -> bool:
        return logs().count(NO_RUN) + logs().count("running again") >= count

    try:
        deadline = time.monotonic() + max(300, count * 2)
        while not resumed_all():
            for operator in operators:  # one that exits ends the wait with its log
                if not operator.process.running():
                    raise RuntimeError(f"{operator.process.name} exited while resuming:\n{operator.process.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the operators did not resume {count} tenants")
            time.sleep(1)
        resumed = time.monotonic() - started
        runs = logs().count("running again")
        cpu0 = [operator.cpu_seconds() for operator in operators]
        served0, t0, rss = requests_served(server), time.monotonic(), [[] for _operator in operators]
        while time.monotonic() - t0 < window:
            for found, operator in zip(rss, operators, strict=True):
                found.append(operator.rss_mib())
            time.sleep(5)
        minutes = (time.monotonic() - t0) / 60
        cpu = [(operator.cpu_seconds() - before) / minutes for operator, before in zip(operators, cpu0, strict=True)]
        served = (requests_served(server) - served0 - 1) / minutes  # less this reading's own request
        changed = time.monotonic()
        api.merge_patch(*VC, name, namespace, {"spec": {"externalIP": "192.0.2.10"}})
        wait_until(lambda: ((api.get(*VC, name, namespace) or {}).get("status") or {}).get("phase") == "Updating",
                   120, f"{name}'s run starting", None, interval=0.1)
        latency = time.monotonic() - changed
        wait_until(lambda: ready(api.get(*VC, name, namespace)), 300, f"{name} Ready again", None)
        api.merge_patch(*VC, name, namespace, {"spec": {"externalIP": None}})
        wait_until(lambda: settled(api.get(*VC, name, namespace)), 300, f"{name} Ready after the change is undone",
                   None)
        noticed, repaired = break_and_repair(api, namespace, name)
    finally:
        for operator in operators:
            operator.stop()
    return {"tenants": count, "replicas": len(operators), "resume_s": round(resumed, 1), "runs_at_resume": runs,
            "memory_mib": [round(statistics.median(found), 1) for found in rss],
            "memory_peak_mib": [round(max(found), 1) for found in rss],
            "cpu_s_per_min": [round(value, 3) for value in cpu], "api_requests_per_min": round(served),
            "spec_change_to_run_s": round(latency, 2), "broken_noticed_s": round(noticed, 1),
            "broken_repaired_s": round(repaired, 1)}


def break_and_repair(api: KubeApi, namespace: str, name: str) -> tuple[float, float]:
    """One tenant broken as a user might break it (its scheduler's Deployment deleted, with no spec change):
    seconds until the operator's look notices (the tenant no longer Ready), and until its run has put the
    Deployment back and the tenant is Ready again."""
    deployment = ("apps/v1", "Deployment", f"{name}-scheduler", namespace)
    broken = time.monotonic()
    api.delete(*deployment[:3], namespace=namespace)
    wait_until(lambda: not ready(api.get(*VC, name, namespace)), 300, f"{name}'s breakage noticed", None,
               interval=0.2)
    noticed = time.monotonic() - broken
    wait_until(lambda: ready(api.get(*VC, name, namespace)) and api.get(*deployment) is not None, 300,
               f"{name} repaired", None, interval=0.2)
    return noticed, time.monotonic() - broken


def peering(api: KubeApi, name: str) -> str:
    api.apply({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "metadata": {"name": name}})
    return name


def compare_shards(server: ApiServer, api: KubeApi, host: Lender, source: dict, workdir: Path, count: int,
                   shards: int, spread: int, window: float) -> list[dict]:
    """The same `count` tenants over `spread` namespaces, served by one replica and then by `shards`."""
    made = time.monotonic()
    tenants = spread_tenants(api, host, source, count, shards, spread)
    print(f"{count} tenants over {spread} namespaces ({time.monotonic() - made:.0f} s to copy them)", flush=True)
    middle = tenants[len(tenants) // 2]
    one = OperatorUnderTest(server.kubeconfig, workdir, f"shards-1-of-{count}", "--namespace", "scale-?-*",
                            "--peering", peering(api, "kubenest-bench"))
    rows = [measure_replicas(server, api, [one], count, window, middle)]
    print(json.dumps(rows[-1]), flush=True)
    replicas = [OperatorUnderTest(server.kubeconfig, workdir, f"shard-{k}-of-{shards}", "--namespace", f"scale-{k}-*",
                                  "--peering", peering(api, f"kubenest-bench-shard-{k}"),
                                  *(() if k == 0 else ("--no-cluster-scoped",)))
                for k in range(shards)]
    rows.append(measure_replicas(server, api, replicas, count, window, middle))
    print(json.dumps(rows[-1]), flush=True)
    return rows


def slope(rows: list[dict], key: str) -> float:
    low, high = rows[0], rows[-1]
    return (high[key] - low[key]) / max(1, high["tenants"] - low["tenants"])


def main() -> int:
    counts = sorted({int(c) for c in os.environ.get("KUBENEST_SCALE_TENANTS", "1,100,1000").split(",")})
    if counts[0] < 1:
        raise SystemExit("KUBENEST_SCALE_TENANTS: every count is at least 1 (the first tenant is the operator's)")
    window = float(os.environ.get("KUBENEST_SCALE_WINDOW", "120"))
    shards = int(os.environ.get("KUBENEST_SCALE_SHARDS", "1"))
    spread = int(os.environ.get("KUBENEST_SCALE_NAMESPACES", "30"))
    if shards > 1 and spread < shards:
        raise SystemExit("KUBENEST_SCALE_NAMESPACES: at least one namespace per shard")
    workdir = Path(tempfile.mkdtemp(prefix="kubenest-scale-"))
    with ApiServer() as server:
        install_crds(server.kubeconfig)
        api = connect(str(server.kubeconfig))
        host = Lender(api.connection, 30, keep=4)
        source = first_tenant(api, server.kubeconfig, workdir)
        rows = []
        for count in counts:
            made = time.monotonic()
            tenants_up_to(api, host, source, count)
            print(f"{count} tenants in place ({time.monotonic() - made:.0f} s to copy them)", flush=True)
            rows.append(measure(server, api, workdir, count, window))
            print(json.dumps(rows[-1]), flush=True)
        sharded = []
        if shards > 1:
            for doc in yaml.safe_load((REPO / "deploy" / "operator" / "peering-crds.yaml").read_text())["items"]:
                api.apply(doc)
            wait_until(lambda: api.request("GET", "/apis/kopf.dev/v1/clusterkopfpeerings", ok_missing=True)
                       is not None, 60, "kopf's peering CRDs served")
            sharded = compare_shards(server, api, host, source, workdir, counts[-1], shards, spread, window)
    print("\noperator scale, stand-in tenants on a real API server (bench/operator_scale.py)")
    print(f"{'tenants':>8} {'resume s':>9} {'runs':>5} {'RSS MiB':>8} {'peak':>6} {'CPU s/min':>10} "
          f"{'API req/min':>12} {'change->run s':>14} {'broken->noticed/repaired s':>27}")
    for row in rows:
        print(f"{row['tenants']:>8} {row['resume_s']:>9} {row['runs_at_resume']:>5} {row['memory_mib']:>8} "
              f"{row['memory_peak_mib']:>6} {row['cpu_s_per_min']:>10} {row['api_requests_per_min']:>12} "
              f"{row['spec_change_to_run_s']:>14} {row['broken_noticed_s']:>15} / {row['broken_repaired_s']:<9}")
    per_tenant = {key: round(slope(rows, key), 4) for key in ("memory_mib", "cpu_s_per_min", "api_requests_per_min")}
    if len(rows) > 1:
        print(f"per idle tenant ({rows[0]['tenants']} -> {rows[-1]['tenants']}): "
              f"{per_tenant['memory_mib'] * 1024:.0f} KiB, {per_tenant['cpu_s_per_min']:.4f} CPU s/min, "
              f"{per_tenant['api_requests_per_min']:.2f} API requests/min (goal: <= 6 MiB memory each)")
    if sharded:
        one, many = sharded
        print(f"\n{one['tenants']} tenants over {spread} namespaces: one replica, then {many['replicas']} shards "
              "(each with its own peering)")
        print(f"{'replicas':>8} {'resume s':>9} {'runs':>5} {'RSS MiB each':>22} {'CPU s/min each':>22} "
              f"{'API req/min':>12} {'change->run s':>14} {'broken->noticed/repaired s':>27}")
        for row in sharded:
            print(f"{row['replicas']:>8} {row['resume_s']:>9} {row['runs_at_resume']:>5} "
                  f"{' '.join(str(v) for v in row['memory_mib']):>22} "
                  f"{' '.join(str(v) for v in row['cpu_s_per_min']):>22} {row['api_requests_per_min']:>12} "
                  f"{row['spec_change_to_run_s']:>14} {row['broken_noticed_s']:>15} / {row['broken_repaired_s']:<9}")
        print(f"largest replica, {many['replicas']} shards against one: memory "
              f"{max(many['memory_mib']) / one['memory_mib'][0]:.2f}x, CPU "
              f"{max(many['cpu_s_per_min']) / max(one['cpu_s_per_min'][0], 1e-9):.2f}x, resume "
              f"{many['resume_s'] / max(one['resume_s'], 1e-9):.2f}x")
    kept = {"rows": rows, "per_tenant": per_tenant, "window_s": window, "shards": sharded}
    print(f"recorded in {record('operator_scale', kept)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
