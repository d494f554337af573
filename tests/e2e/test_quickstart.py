"""README's "Use it on your own cluster", run as it is written against a host cluster built by upstream kubeadm.

The host is `python -m sandbox.kubeadm up --no-agents` on machines of its own: kubeadm's control plane and a
worker, sshd and no agent, the registry with its own CA. The test sets the site's variables for it (the README's
first block says which) and runs the steps in one shell, as a user would, then the undos in reverse order. The
registry is the sandbox's, under a path of the test's own (`quickstart/`): the controller pushes to its address,
the nodes pull by the name their containerd maps to it (`kubenest.local`), which is the README's REGISTRY and
IMAGE_REPOSITORY.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from sandbox.kubeadm.host import ssh_key, state_dir
from sandbox.machines.config import REPO_ROOT, from_env
from sandbox.registry import of as registry_of
from tests.support import bringup, quickstart
from tests.support.nodes import host_node_ready
from tests.support.virtualclusters import wait_for

BRIDGE, CIDR, PREFIX = "knquick0", "198.18.5.0/24", "qs"
UP_TIMEOUT = 2400  # a cold cache builds Kubernetes, the images and the bare image first
STEPS_TIMEOUT = 3600  # step 1 builds every image on a cold cache

pytestmark = [
    pytest.mark.machines,
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.skipif(os.geteuid() != 0, reason="node machines need root"),
    pytest.mark.skipif(not (shutil.which("systemd-nspawn") and shutil.which("debootstrap")),
                       reason="needs systemd-nspawn (systemd-container) and debootstrap"),
]


def _kubectl_dir() -> str:
    proc = subprocess.run(["bash", "sandbox/k8s/build.sh"], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True)
    return proc.stdout.strip().splitlines()[-1]


def _machines_inventory(sb, path: Path) -> Path:
    """What a site has: its machines over SSH as root, the control-plane ones in group control_plane."""
    key = ssh_key(sb)
    known_hosts = state_dir(sb) / "ssh" / "known_hosts"
    common = {"ansible_user": "root", "ansible_ssh_private_key_file": str(key),
              "ansible_python_interpreter": "/usr/bin/python3",
              "ansible_ssh_common_args": f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={known_hosts}"}
    groups = {}
    for node in sb.nodes:
        group = "control_plane" if node.role == "control_plane" else "workers"
        groups.setdefault(group, {"hosts": {}})["hosts"][node.name] = {"ansible_host": node.ip, **common}
    path.write_text(json.dumps({"all": {"children": groups}}))
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = tmp_path_factory.mktemp("quickstart")
    state = work / "state"
    env = {**os.environ, "KUBENEST_SANDBOX_DIR": str(state), "KUBENEST_BRIDGE": BRIDGE, "KUBENEST_NODE_CIDR": CIDR,
           "KUBENEST_NODE_PREFIX": PREFIX, "KUBENEST_CONTROL_PLANES": "1", "KUBENEST_WORKERS": "1"}
    sb = from_env(state_dir=state, bridge=BRIDGE, cidr=CIDR, prefix=PREFIX, control_planes=1, workers=1)
    try:
        with bringup.one_at_a_time("the quick start's kubeadm host"):
            proc = subprocess.run([sys.executable, "-m", "sandbox.kubeadm", "up", "--no-agents"], cwd=REPO_ROOT,
                                  env=env, capture_output=True, text=True, timeout=UP_TIMEOUT, check=False)
        assert proc.returncode == 0, f"sandbox.kubeadm up failed:\n{proc.stderr[-6000:]}"
        reg = registry_of(sb)
        worker = [n.name for n in sb.nodes if n.role != "control_plane"][0]
        variables = {
            "KUBECONFIG": str(state / "kubeconfig"),
            "MACHINES": str(_machines_inventory(sb, work / "machines.yml")),
            "WORKER": worker,
            "REGISTRY": f"{reg.host}/quickstart",
            "REGISTRY_CERT_DIR": str(reg.trust_dir),
            "IMAGE_REPOSITORY": "kubenest.local/quickstart",
            "PKI": str(work / "pki"),
            "PATH": f"{REPO_ROOT / '.venv' / 'bin'}:{_kubectl_dir()}:{os.environ['PATH']}",
        }
        assert list(variables) == quickstart.read().site_variables  # the README's first block, for this site
        shell_env = {key: value for key, value in os.environ.items() if not key.startswith("KUBENEST_")}
        shell_env.update(variables, ANSIBLE_FORCE_COLOR="0", ANSIBLE_HOST_KEY_CHECKING="False")
        shell_env["KUBENEST_CACHE"] = os.environ.get("KUBENEST_CACHE", str(Path.home() / ".cache" / "kubenest"))
        yield sb, variables, shell_env, reg
    finally:
        for argv in (["-m", "sandbox.registry", "down"], ["-m", "sandbox.machines", "down"]):
            subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, env=env, capture_output=True, timeout=300,
                           check=False)
        (REPO_ROOT / "first.kubeconfig").unlink(missing_ok=True)


def _run(script: str, env: dict, log: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=STEPS_TIMEOUT, check=False)
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return proc


def _agent_answers(ip: str) -> bool:
    try:
        with socket.create_connection((ip, 7443), timeout=3):
            return True
    except OSError:
        return False


def test_the_readme_quick_start_runs_as_written_and_its_undos_leave_the_cluster_as_it_was(site, tmp_path):
    sb, variables, env, reg = site
    quick = quickstart.read()
    api = k8s_config.new_client_from_config(variables["KUBECONFIG"])
    worker = variables["WORKER"]

    steps = _run(quick.script([quick.steps[n] for n in sorted(quick.steps)]), env, tmp_path / "steps.log")
    assert steps.returncode == 0, f"the steps failed:\n{steps.stdout[-5000:]}\n{steps.stderr[-5000:]}"
    # step 6's `kubectl get nodes` on the tenant: the worker, Ready there
    assert any(line.split()[:2] == [worker, "Ready"] for line in steps.stdout.splitlines()), steps.stdout[-3000:]
    assert "virtualcluster.kosmos.io/first condition met" in steps.stdout
    # the images came from the site's registry path: the operator's among them, pulled by the control plane
    pods = k8s.CoreV1Api(api).list_namespaced_pod("kubenest-system",
                                                  label_selector="app.kubernetes.io/name=kubenest-operator").items
    assert pods and {c.image for p in pods for c in p.spec.containers} == {
        "kubenest.local/quickstart/kubenest-operator:1.0.0"}
    log = (sb.state_dir / "registry" / "registry.log").read_text()
    for repository in ("kubenest-operator", "kube-apiserver", "etcd", "kube-proxy", "cilium"):
        assert f"/v2/quickstart/{repository}/manifests/" in log, repository
    assert worker not in {n.metadata.name for n in k8s.CoreV1Api(api).list_node().items}

    undos = _run(quick.script([quick.undos[n] for n in sorted(quick.undos, reverse=True)]), env,
                 tmp_path / "undos.log")
    assert undos.returncode == 0, f"the undos failed:\n{undos.stdout[-5000:]}\n{undos.stderr[-5000:]}"
    wait_for(lambda: host_node_ready(api, worker), 300, f"{worker} Ready in the host again")
    assert not (REPO_ROOT / "first.kubeconfig").exists()
    namespaces = {n.metadata.name for n in k8s.CoreV1Api(api).list_namespace().items}
    assert not {"kubenest-system", "tenant-a"} & namespaces
    crds = {c.metadata.name for c in k8s.ApiextensionsV1Api(api).list_custom_resource_definition().items}
    assert not {"virtualclusters.kosmos.io", "globalnodes.kosmos.io"} & crds
    assert not k8s.CoreV1Api(api).list_persistent_volume(label_selector="kosmos.io/local-volume").items
    for node in sb.nodes:
        assert not _agent_answers(node.ip), f"the agent still answers on {node.name}"

    def kube_proxy_runs() -> bool:
        pods = k8s.CoreV1Api(api).list_namespaced_pod(
            "kube-system", label_selector="k8s-app=kube-proxy", field_selector=f"spec.nodeName={worker}").items
        return bool(pods) and all(p.status.phase == "Running" for p in pods)

    wait_for(kube_proxy_runs, 120, f"kubeadm's kube-proxy running on {worker} again")
