"""``make bench``: the cost of one Kubernetes API task, the collection's actions against kubernetes.core.

Baseline: ``kubernetes.core.k8s_info`` and ``kubernetes.core.k8s`` (a module process per task that imports the
Kubernetes client), the modules the roles used before. Measured: ``kosmos.kubenest.kube_info`` and
``kube_apply`` (the request made from the controller's process). Both read the same object and apply the same
ConfigMaps to a real etcd + kube-apiserver on loopback. A task's cost is (playbook with N tasks - empty
playbook) / N; medians over several runs. Results also go to bench/results/api-tasks.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from bench.record import record  # noqa: E402
from tests.support.apiserver import ApiServer  # noqa: E402

VENV_BIN = Path(sys.executable).parent
NAMESPACE = "default"


def playbook(path: Path, tasks: list) -> Path:
    path.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                     "tasks": tasks}], sort_keys=False))
    return path


def timed(path: Path, env: dict) -> float:
    start = time.perf_counter()
    # the module processes of the baseline run in this interpreter, which has the Kubernetes client
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-e",
                           f"ansible_python_interpreter={sys.executable}", str(path)],
                          capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{path.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed


def configmap(client: str, i: int, run: int) -> dict:
    # a new value every run: each apply writes, as a converge that changes something does; each client its own
    # objects, since two field managers of one field conflict
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"bench-{client}-{i}", "namespace": NAMESPACE}, "data": {"run": str(run)}}


def plays(root: Path, tasks: int, run: int) -> dict[str, dict[str, Path]]:
    read = {"kind": "Namespace", "name": NAMESPACE}
    return {
        "kubernetes.core": {
            "read": playbook(root / f"core-read-{run}.yml", [
                {"name": f"r{i}", "kubernetes.core.k8s_info": read} for i in range(tasks)]),
            "apply": playbook(root / f"core-apply-{run}.yml", [
                {"name": f"a{i}", "kubernetes.core.k8s": {"definition": configmap("core", i, run), "apply": True,
                                                          "server_side_apply": {"field_manager": "bench"}}}
                for i in range(tasks)]),
        },
        "kosmos.kubenest": {
            "read": playbook(root / f"kube-read-{run}.yml", [
                {"name": f"r{i}", "kosmos.kubenest.kube_info": read} for i in range(tasks)]),
            "apply": playbook(root / f"kube-apply-{run}.yml", [
                {"name": f"a{i}", "kosmos.kubenest.kube_apply": {"definition": configmap("kube", i, run)}}
                for i in range(tasks)]),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    results: dict[str, dict[str, list[float]]] = {"kubernetes.core": {}, "kosmos.kubenest": {}}
    with tempfile.TemporaryDirectory(prefix="kubenest-bench-api-") as tmp, ApiServer() as api:
        root = Path(tmp)
        env = {**os.environ, "K8S_AUTH_KUBECONFIG": str(api.kubeconfig), "ANSIBLE_NOCOLOR": "1",
               "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}
        empty = playbook(root / "empty.yml", [])
        timed(empty, env)  # warm the controller's caches once
        for run in range(args.runs):
            base = timed(empty, env)
            for client, books in plays(root, args.tasks, run).items():
                for kind, path in books.items():
                    per_task_ms = (timed(path, env) - base) / args.tasks * 1000
                    results[client].setdefault(f"{kind}_task_ms", []).append(per_task_ms)

    med = {c: {k: statistics.median(v) for k, v in m.items()} for c, m in results.items()}
    print(f"\nKubernetes API task cost (baseline: kubernetes.core), median of {args.runs} runs, {args.tasks} tasks,"
          " one real kube-apiserver on loopback")
    print(f"{'task':30} {'kosmos.kubenest':>16} {'kubernetes.core':>16} {'ratio':>7}")
    summary = {}
    for label, key in (("read one object (kube_info)", "read_task_ms"),
                       ("apply one ConfigMap (kube_apply)", "apply_task_ms")):
        ours, base = med["kosmos.kubenest"][key], med["kubernetes.core"][key]
        summary[key] = {"kosmos.kubenest": ours, "kubernetes.core": base, "ratio": ours / base}
        print(f"{label:30} {ours:13.0f} ms {base:13.0f} ms {ours / base:7.2f}")
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "api-tasks.json").write_text(json.dumps({"median": summary, "runs": results}, indent=2))
    record("api-tasks", {"median": summary, "runs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
