"""python -m sandbox.conformance (`make conformance`): the upstream conformance suite judges a virtual cluster.

On the sandbox of `make up`: the suite and its images are built (sandbox/conformance/build.sh, images.py) and
pushed to the sandbox's registry, from which the nodes pull them, then the [Conformance] specs run
against the host cluster (the baseline) and against a VirtualCluster with two promoted workers: the parallel
specs first (the [Slow] ones among them), then the [Serial] ones one at a time. JUnit reports, ginkgo's logs
and a summary (summary.md, summary.json: counts per side, each spec not passing on the tenant with its first
error line and whether the host fails it too) land in build/conformance/<version>-<date>/.

--smoke takes the smoke subset of sandbox/conformance/specs.py, --focus any other (a regular expression on the
specs' names).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from sandbox.conformance import report, specs
from sandbox.images.build_images import read_versions
from sandbox.machines.config import REPO_ROOT, from_env
from sandbox.registry import of as registry_of
from sandbox.registry.push import archives_of, push
from sandbox.registry.server import RegistryError, start
from tests.support.virtualclusters import (
    condition,
    create_vc,
    delete_vc,
    ensure_namespace,
    get_vc,
    install_crds,
    wait_for,
)

NAMESPACE, NAME = "kubenest-conformance", "conformance"
PROGRESS_EVERY_S = 60
READY_TIMEOUT_S = 1200


LOG: list[Path] = []  # the run's own log in its report directory, once that exists


def log(message: str) -> None:
    line = f"[conformance] {message}"
    print(line, file=sys.stderr, flush=True)
    for path in LOG:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"{datetime.datetime.now(datetime.UTC):%H:%M:%S} {line}\n")


def last_line(argv: list[str]) -> Path:
    proc = subprocess.run(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(argv)} failed (status {proc.returncode})")
    return Path(proc.stdout.strip().splitlines()[-1])


def push_images(sb, images_dir: Path) -> None:
    """Every conformance image the sandbox's registry lacks; the nodes pull them from there as the specs start
    them (the specs that pull with policy Always need a registry)."""
    registry = registry_of(sb)
    try:
        start(registry)
        pushed = push(registry, archives_of(images_dir))
    except RegistryError as exc:
        sys.exit(f"error: {exc}")
    log(f"registry {registry.endpoint}: {len(pushed)} image reference(s) pushed")


def tenant(api, sb, workers: list[str], out: Path) -> Path:
    """The judged VirtualCluster, Ready with its two promoted workers; returns its admin kubeconfig."""
    ensure_namespace(api, NAMESPACE)
    if get_vc(api, NAMESPACE, NAME) is None:
        log(f"creating VirtualCluster {NAMESPACE}/{NAME} with {', '.join(workers)}")
        create_vc(api, NAMESPACE, NAME, {"promotePolicies": [{"labelSelector": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": workers}]}, "nodeCount": len(workers)}]})

    def ready():
        vc = get_vc(api, NAMESPACE, NAME)
        wanted = f"{len(workers)}/{len(workers)}"
        done = condition(vc, "Ready").get("status") == "True" and vc["status"].get("nodesReady") == wanted
        return vc if done else None
    started = time.monotonic()
    vc = wait_for(ready, READY_TIMEOUT_S, f"{NAMESPACE}/{NAME} Ready with {len(workers)} nodes", 5)
    log(f"{NAMESPACE}/{NAME} Ready with {len(workers)} nodes after {time.monotonic() - started:.0f} s")
    ref = vc["status"]["kubeconfigSecretRef"]
    secret = k8s.CoreV1Api(api).read_namespaced_secret(ref["name"], NAMESPACE)
    path = out / "tenant.kubeconfig"
    path.touch(mode=0o600)
    path.write_bytes(base64.b64decode(secret.data[ref["key"]]))
    return path


def _progress(logfile: Path, what: str, stop: threading.Event, started: float) -> None:
    while not stop.wait(PROGRESS_EVERY_S):
        text = logfile.read_text(errors="replace") if logfile.is_file() else ""
        total = re.search(r"Will run (\d+) of", re.sub(r"\x1b\[[0-9;]*m", "", text))
        failed = text.count("[FAILED]")
        log(f"{what}: {text.count('•')} of {total.group(1) if total else '?'} specs done, "
            f"{failed} failure line(s), {(time.monotonic() - started) / 60:.0f} min")


def run_specs(bins: Path, images_dir: Path, kubectl: Path, kubeconfig: Path, out: Path, side: str, phase: str,
              labels: str, focus: str | None, procs: int) -> Path:
    junit = f"junit-{side}-{phase}.xml"
    logfile = out / f"ginkgo-{side}-{phase}.log"
    argv = [str(bins / "ginkgo"), f"--procs={procs}", f"--label-filter={labels}", "--no-color", "--timeout=6h",
            f"--output-dir={out}", f"--junit-report={junit}", "--poll-progress-after=10m"]
    if focus:
        argv.append(f"--focus={focus}")
    argv += [str(bins / "e2e.test"), "--", f"--kubeconfig={kubeconfig}", "--provider=skeleton",
             f"--kubectl-path={kubectl}", "--disable-log-dump"]
    env = dict(os.environ, KUBE_TEST_REPO_LIST=str(images_dir / "repo-list.yaml"))
    shown = f" --focus='{focus}'" if focus and len(focus) <= 200 else " --focus=(see run.json)" if focus else ""
    log(f"{side} {phase}: ginkgo --procs={procs} --label-filter='{labels}'{shown} (log: {logfile})")
    started, stop = time.monotonic(), threading.Event()
    watcher = threading.Thread(target=_progress, args=(logfile, f"{side} {phase}", stop, started), daemon=True)
    watcher.start()
    with logfile.open("wb") as fh:
        status = subprocess.run(argv, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
    stop.set()
    log(f"{side} {phase}: ginkgo exited {status} after {(time.monotonic() - started) / 60:.1f} min")
    if not (out / junit).is_file():
        tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-20:])
        sys.exit(f"error: ginkgo wrote no report for {side} {phase}:\n{tail}")
    return out / junit


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--focus", help="only specs whose names match this regular expression")
    parser.add_argument("--smoke", action="store_true", help="only the smoke subset (sandbox/conformance/specs.py)")
    parser.add_argument("--sides", default="host,tenant", help="which clusters to judge (default: %(default)s)")
    parser.add_argument("--procs", type=int, default=4, help="parallel ginkgo processes (default: %(default)s)")
    parser.add_argument("--no-serial", action="store_true", help="leave out the [Serial] specs")
    parser.add_argument("--baseline", choices=("all", "failures"), default="all",
                        help="the host runs every spec (all, first), or after the tenant only those the tenant "
                             "failed (failures)")
    parser.add_argument("--keep", action="store_true", help="keep the VirtualCluster afterwards")
    parser.add_argument("--out", type=Path, help="report directory (default: build/conformance/<version>-<date>)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        if args.focus:
            sys.exit("error: --smoke and --focus each choose the specs; give one of them")
        args.focus = specs.focus(specs.SMOKE)
    sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    unknown = set(sides) - {"host", "tenant"}
    if unknown or not sides:
        sys.exit(f"error: --sides takes host and/or tenant, not {sorted(unknown) or args.sides!r}")
    sb = from_env()
    host_kubeconfig = sb.state_dir / "kubeconfig"
    if not host_kubeconfig.is_file():
        sys.exit(f"error: no sandbox at {sb.state_dir} (no kubeconfig); run `make up` first")
    versions = read_versions(REPO_ROOT / "versions.env")
    started = datetime.datetime.now(datetime.UTC)
    suffix = "-smoke" if args.smoke else ""
    out = args.out or (REPO_ROOT / "build/conformance"
                       / f"{versions['KUBERNETES_VERSION']}-{started:%Y%m%d-%H%M}{suffix}")
    out.mkdir(parents=True, exist_ok=True)
    LOG[:] = [out / "conformance.log"]
    log(f"reports in {out}")
    bins = last_line(["bash", "sandbox/conformance/build.sh"])
    images_dir = last_line([sys.executable, "sandbox/conformance/images.py", "--bin-dir", str(bins)])
    log(f"suite and images ready: {bins}, {images_dir}")
    push_images(sb, images_dir)
    kubectl = last_line(["bash", "sandbox/k8s/build.sh"]) / "kubectl"

    api = k8s_config.new_client_from_config(str(host_kubeconfig))
    workers = [node.name for node in sb.nodes if node.role == "workers"][-2:]
    phases = [("parallel", specs.PARALLEL, args.procs)] + ([] if args.no_serial else [("serial", specs.SERIAL, 1)])
    reports: dict[str, list[Path]] = {}
    timings: dict[str, float] = {}
    if args.baseline == "failures":
        sides.sort(key=lambda side: side != "tenant")
    try:
        for side in sides:
            focus = args.focus
            if side == "tenant":
                install_crds(host_kubeconfig)
                kubeconfig = tenant(api, sb, workers, out)
            else:
                kubeconfig = host_kubeconfig
                if get_vc(api, NAMESPACE, NAME) is not None:
                    # the suite waits for every Node of the host to be schedulable
                    log(f"deleting {NAMESPACE}/{NAME} first: its nodes return to the host")
                    delete_vc(api, NAMESPACE, NAME, timeout=900)
                if args.baseline == "failures" and "tenant" in reports:
                    failed = [name for name, spec in report.read_side(reports["tenant"]).items()
                              if spec.state == "failed"]
                    if not failed:
                        log("the tenant failed no spec: no baseline to take")
                        continue
                    focus = specs.focus([specs.spec_text(name) for name in failed])
            side_started = time.monotonic()
            reports[side] = [run_specs(bins, images_dir, kubectl, kubeconfig, out, side, phase, labels, focus,
                                       procs)
                             for phase, labels, procs in phases]
            timings[side] = time.monotonic() - side_started
    finally:
        if "tenant" in sides and not args.keep and get_vc(api, NAMESPACE, NAME) is not None:
            log(f"deleting {NAMESPACE}/{NAME} (its nodes return to the host)")
            delete_vc(api, NAMESPACE, NAME, timeout=900)
            log(f"deleted {NAMESPACE}/{NAME}")
    title = f"Conformance {versions['KUBERNETES_VERSION']}, {started:%Y-%m-%d}"
    summary = report.write(out, reports, title)
    (out / "run.json").write_text(json.dumps({
        "kubernetes": versions["KUBERNETES_VERSION"], "started": started.isoformat(timespec="seconds"),
        "smoke": args.smoke, "focus": args.focus, "procs": args.procs, "serial": not args.no_serial,
        "baseline": args.baseline,
        "minutes": {side: round(seconds / 60, 1) for side, seconds in timings.items()},
    }, indent=2) + "\n")
    print((out / "summary.md").read_text())
    print(f"reports: {out}")
    failing = summary["counts"].get("tenant", {}).get("failed", 0)
    return 1 if failing else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
