"""python -m sandbox.sample: the sample VirtualCluster of `make up`, and how to use its kubeconfig."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from pathlib import Path

import yaml

from sandbox.machines.config import REPO_ROOT, from_env

SAMPLE = REPO_ROOT / "deploy" / "samples" / "virtualcluster.yaml"
TIMEOUT_S = 900


def kubectl_path() -> str:
    """The kubectl built with the other Kubernetes binaries (make k8s): nothing else installs one."""
    built = subprocess.run(["bash", str(REPO_ROOT / "sandbox/k8s/build.sh")], capture_output=True, text=True,
                           check=True).stdout
    return str(Path(built.strip().splitlines()[-1]) / "kubectl")


KUBECTL = "kubectl"


def kubectl(kubeconfig, *args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          check=False, **kwargs)


def main() -> int:
    global KUBECTL
    KUBECTL = kubectl_path()
    sb = from_env()
    kubeconfig = sb.state_dir / "kubeconfig"
    sample = yaml.safe_load(SAMPLE.read_text())
    ns, name = sample["metadata"]["namespace"], sample["metadata"]["name"]
    playbook = [str(Path(sys.executable).parent / "ansible-playbook"), str(REPO_ROOT / "playbooks/install_crds.yml"),
                "-e", f"kubenest_admin_kubeconfig={kubeconfig}"]
    if subprocess.run(playbook, capture_output=True, check=False).returncode != 0:
        print("error: installing the CRDs failed", file=sys.stderr)
        return 2
    kubectl(kubeconfig, "create", "namespace", ns)
    # Tenant control planes run at Pod Security level baseline (docs/virtual-clusters.md, "Pod Security").
    kubectl(kubeconfig, "label", "--overwrite", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline",
            "pod-security.kubernetes.io/enforce-version=latest")
    applied = kubectl(kubeconfig, "apply", "-f", str(SAMPLE))
    if applied.returncode != 0:
        print(f"error: {applied.stderr.strip()}", file=sys.stderr)
        return 2
    print(f"waiting for VirtualCluster {ns}/{name} ({KUBECTL} --kubeconfig {kubeconfig} -n {ns} get vc -w)")
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        got = kubectl(kubeconfig, "-n", ns, "get", "vc", name, "-o", "yaml")
        vc = yaml.safe_load(got.stdout) if got.returncode == 0 else {}
        ready = [c for c in (vc.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"]
        ref = (vc.get("status") or {}).get("kubeconfigSecretRef")
        if ready and ready[0]["status"] == "True" and ref:
            secret = kubectl(kubeconfig, "-n", ns, "get", "secret", ref["name"], "-o",
                             f"jsonpath={{.data.{ref['key']}}}")
            if secret.returncode != 0 or not secret.stdout.strip():
                time.sleep(2)
                continue
            out = sb.state_dir / "sample.kubeconfig"
            out.touch(mode=0o600)
            out.write_bytes(base64.b64decode(secret.stdout.strip()))
            out.chmod(0o600)
            print(f"VirtualCluster {ns}/{name} is Ready at {vc['status'].get('endpoint')}")
            print(f"  its kubeconfig: {out}")
            print(f"  try:            {KUBECTL} --kubeconfig {out} get namespaces")
            print(f"  or fetch it:    {KUBECTL} --kubeconfig {kubeconfig} -n {ns} get secret "
                  f"{vc['status']['kubeconfigSecretRef']['name']} -o jsonpath='{{.data.kubeconfig}}' | base64 -d")
            return 0
        if ready and ready[0].get("reason") in ("InvalidSpec", "Unsatisfiable", "InvalidRequest"):
            print(f"error: {ready[0].get('message')}", file=sys.stderr)
            return 2
        time.sleep(3)
    print(f"error: {ns}/{name} not Ready after {TIMEOUT_S}s; see .sandbox/operator.log", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
