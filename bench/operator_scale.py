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

    def __init__(self, kubeconfig: Path, workdir: Path, label: str):
        self.log_path = workdir / f"operator-{label}.log"
        tmp = workdir / f"tmp-{label}"
        tmp.mkdir()
        argv = [str(VENV_BIN / "kubenest-operator"), "--kubeconfig", str(kubeconfig), "--playbook-dir",
                str(STAND_IN), "--runs-dir", str(workdir / f"runs-{label}"), "--standalone"]
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


def requests_served(server: ApiServer) -> float:
    """apiserver_request_total summed over every verb, resource and code."""
    context = server.ssl_context(server.admin)
    with urllib.request.urlopen(f"{server.url}/metrics", context=context, timeout=30) as answer:
        text = answer.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_request_total{"))


def renamed(value, old: str, new: str):
    """`value` with every string naming `old` naming `new` (names, labels, selectors, references)."""
    return json.loads(json.dumps(value).replace(old, new))


def first_tenant(api: KubeApi, kubeconfig: Path, workdir: Path) -> dict:
    """FIRST, made by the operator's own run of the stand-in playbook, Ready."""
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    api.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kubenest-test-control", "namespace": NS},
               "data": {"sleep": "0", "realApi": "true", "replicas": "0"}})
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


def copy_tenant(api: KubeApi, host: Lender, source: dict, objects: list[dict], name: str) -> None:
    """A tenant `name` as FIRST's run left FIRST: its objects, then its VirtualCluster with the same annotations
    (the operator's revision, kopf's record of the handled spec), finalizers and status."""
    meta = source["metadata"]
    vc = {"apiVersion": VC[0], "kind": VC[1], "spec": source.get("spec") or {},
          "metadata": {"name": name, "namespace": NS, "labels": meta.get("labels") or {},
                       "annotations": meta.get("annotations") or {}, "finalizers": meta.get("finalizers") or []}}
    uid = api.create(vc)["metadata"]["uid"]
    for obj in objects:
        clone = renamed(obj, FIRST, name)
        for ref in clone["metadata"].get("ownerReferences") or []:
            if ref.get("uid") == meta["uid"]:
                ref["uid"] = uid
        api.apply(clone)
    status = renamed(source["status"], FIRST, name)
    status["controlPlaneObjects"] = health.inventory(health.list_objects(host, NS, name))
    api.request("PATCH", api.path(*VC, NS, name) + "/status", body={"status": status},
                content_type="application/merge-patch+json")


def writable(obj: dict) -> dict:
    """What FIRST's run wrote of `obj`: no status, no server-set metadata."""
    meta = obj["metadata"]
    kept = {key: meta[key] for key in ("name", "namespace", "labels", "annotations", "ownerReferences") if key in meta}
    return {**{k: v for k, v in obj.items() if k not in ("status", "metadata")}, "metadata": kept}


def tenants_up_to(api: KubeApi, host: Lender, source: dict, count: int) -> None:
    have = {vc["metadata"]["name"] for vc in api.list(*VC, NS)}
    objects = [writable(obj) for version, kind in KINDS
               for obj in api.list(version, kind, NS, label_selector=f"kosmos.io/virtualcluster={FIRST}")]
    wanted = [f"t{i:04d}" for i in range(count) if f"t{i:04d}" not in have]
    with ClientPool(api, 4) as clients:
        clients.map(lambda client, name: copy_tenant(client, host, source, objects, name), wanted)


def measure(server: ApiServer, api: KubeApi, workdir: Path, count: int, window: float) -> dict:
    operator = OperatorUnderTest(server.kubeconfig, workdir, f"n{count}")
    started = time.monotonic()
    operator.start()
    try:
        wait_until(lambda: operator.log().count(NO_RUN) + operator.log().count("running again") >= count,
                   max(300, count * 2), f"the operator resuming {count} tenants", operator.process, interval=1)
        resumed = time.monotonic() - started
        runs = operator.log().count("running again")
        cpu0, served0, t0, rss = operator.cpu_seconds(), requests_served(server), time.monotonic(), []
        while time.monotonic() - t0 < window:
            rss.append(operator.rss_mib())
            time.sleep(5)
        minutes = (time.monotonic() - t0) / 60
        cpu = (operator.cpu_seconds() - cpu0) / minutes
        served = (requests_served(server) - served0 - 1) / minutes  # less this reading's own request
        middle = f"t{count // 2:04d}"
        changed = time.monotonic()
        api.merge_patch(*VC, middle, NS, {"spec": {"externalIP": "192.0.2.10"}})
        wait_until(lambda: ((api.get(*VC, middle, NS) or {}).get("status") or {}).get("phase") == "Updating",
                   120, f"{middle}'s run starting", operator.process, interval=0.1)
        latency = time.monotonic() - changed
        wait_until(lambda: ready(api.get(*VC, middle, NS)), 300, f"{middle} Ready again", operator.process)
        api.merge_patch(*VC, middle, NS, {"spec": {"externalIP": None}})
        wait_until(lambda: settled(api.get(*VC, middle, NS)), 300, f"{middle} Ready after the change is undone",
                   operator.process)
    finally:
        operator.stop()
    return {"tenants": count, "resume_s": round(resumed, 1), "runs_at_resume": runs,
            "memory_mib": round(statistics.median(rss), 1), "memory_peak_mib": round(max(rss), 1),
            "cpu_s_per_min": round(cpu, 3), "api_requests_per_min": round(served),
            "spec_change_to_run_s": round(latency, 2)}


def slope(rows: list[dict], key: str) -> float:
    low, high = rows[0], rows[-1]
    return (high[key] - low[key]) / max(1, high["tenants"] - low["tenants"])


def main() -> int:
    counts = sorted({int(c) for c in os.environ.get("KUBENEST_SCALE_TENANTS", "1,100,1000").split(",")})
    if counts[0] < 1:
        raise SystemExit("KUBENEST_SCALE_TENANTS: every count is at least 1 (the first tenant is the operator's)")
    window = float(os.environ.get("KUBENEST_SCALE_WINDOW", "120"))
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
    print("\noperator scale, stand-in tenants on a real API server (bench/operator_scale.py)")
    print(f"{'tenants':>8} {'resume s':>9} {'runs':>5} {'RSS MiB':>8} {'peak':>6} {'CPU s/min':>10} "
          f"{'API req/min':>12} {'change->run s':>14}")
    for row in rows:
        print(f"{row['tenants']:>8} {row['resume_s']:>9} {row['runs_at_resume']:>5} {row['memory_mib']:>8} "
              f"{row['memory_peak_mib']:>6} {row['cpu_s_per_min']:>10} {row['api_requests_per_min']:>12} "
              f"{row['spec_change_to_run_s']:>14}")
    per_tenant = {key: round(slope(rows, key), 4) for key in ("memory_mib", "cpu_s_per_min", "api_requests_per_min")}
    if len(rows) > 1:
        print(f"per idle tenant ({rows[0]['tenants']} -> {rows[-1]['tenants']}): "
              f"{per_tenant['memory_mib'] * 1024:.0f} KiB, {per_tenant['cpu_s_per_min']:.4f} CPU s/min, "
              f"{per_tenant['api_requests_per_min']:.2f} API requests/min (goal: <= 6 MiB memory each)")
    print(f"recorded in {record('operator_scale', {'rows': rows, 'per_tenant': per_tenant, 'window_s': window})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
