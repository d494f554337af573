"""Helpers for tests and benchmarks that drive VirtualClusters through a real operator."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "kosmos.io", "v1alpha1", "virtualclusters"
REPO_ROOT = Path(__file__).resolve().parents[2]


class OperatorProcess:
    """kubenest-operator as a child process with its own log, so tests can SIGKILL and restart it."""

    def __init__(self, kubeconfig: Path, log_dir: Path, *extra: str):
        self.kubeconfig, self.log_dir, self.extra = kubeconfig, log_dir, extra
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.runs_dir: Path | None = None  # where its runs are kept, when the caller chose (own_operator)

    def start(self) -> OperatorProcess:
        self.starts += 1
        log = open(self.log_dir / f"operator-{self.starts}.log", "wb")  # lives as long as the process
        exe = Path(sys.executable).parent / "kubenest-operator"
        argv = [str(exe), "--kubeconfig", str(self.kubeconfig), "--all-namespaces", "--standalone", *self.extra]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        time.sleep(1)
        assert self.proc.poll() is None, (self.log_dir / f"operator-{self.starts}.log").read_text()
        return self

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(60)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)


@contextlib.contextmanager
def sandbox_operator_paused():
    """One operator at a time: the sandbox's own is stopped while a test or benchmark runs its own, and started
    again afterwards if it ran before."""
    def sandbox_operator(*args: str, check: bool = True) -> int:
        proc = subprocess.run([sys.executable, "-m", "sandbox.operator", *args], cwd=REPO_ROOT,
                              capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"sandbox.operator {' '.join(args)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        return proc.returncode

    running = sandbox_operator("status", check=False) == 0
    if running:
        sandbox_operator("stop")
    try:
        yield
    finally:
        if running:
            sandbox_operator("start")


@contextlib.contextmanager
def own_operator(sb, api, namespaces: str | tuple[str, ...], log_dir: Path, *flags: str, site: dict | None = None,
                 leftovers_timeout: float | None = None):
    """An operator of the caller's own for the sandbox `sb` (the sandbox's paused meanwhile), with the CRDs
    installed, `namespaces` made, the site variables written (`site` added to them) and its runs kept in
    `log_dir`/runs (`proc.runs_dir`); yields the OperatorProcess, stopped afterwards. With `leftovers_timeout`,
    the VirtualClusters left in the namespaces are deleted first, each waited for that long."""
    from sandbox.operator import write_site_vars  # the sandbox package: e2e and benchmarks only

    kubeconfig = sb.state_dir / "kubeconfig"
    site_vars = write_site_vars(sb.state_dir)
    if site:
        site_vars = log_dir / "site-vars.yml"
        site_vars.write_text(yaml.safe_dump({**yaml.safe_load(write_site_vars(sb.state_dir).read_text()), **site}))
    namespaces = (namespaces,) if isinstance(namespaces, str) else namespaces
    install_crds(kubeconfig)
    with sandbox_operator_paused():
        for namespace in namespaces:
            ensure_namespace(api, namespace)
        proc = OperatorProcess(kubeconfig, log_dir, "--runs-dir", str(log_dir / "runs"), "--artifacts-keep", "1000",
                               "--site-vars", str(site_vars), *flags).start()
        proc.runs_dir = log_dir / "runs"
        try:
            yield proc
            if leftovers_timeout is not None:
                for namespace in namespaces:
                    delete_all_vcs(api, namespace, leftovers_timeout)
        finally:
            proc.stop()


def delete_all_vcs(api, namespace: str, timeout: float = 300) -> None:
    """Every VirtualCluster of the namespace deleted, one after the other, each waited for up to `timeout`."""
    for vc in k8s.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]:
        delete_vc(api, namespace, vc["metadata"]["name"], timeout=timeout)


def install_crds(kubeconfig: Path) -> None:
    playbook = str(REPO_ROOT / "playbooks" / "install_crds.yml")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), playbook,
                           "-e", f"kubenest_admin_kubeconfig={kubeconfig}"],
                          capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"install_crds.yml failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")


def ensure_namespace(api, name: str) -> None:
    """A namespace for virtual clusters, at Pod Security level baseline as the README asks of them."""
    labels = {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest"}
    try:
        k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name, labels=labels)))
    except ApiException as exc:
        if exc.status != 409:
            raise
        k8s.CoreV1Api(api).patch_namespace(name, {"metadata": {"labels": labels}})


def create_vc(api, namespace: str, name: str, spec: dict | None = None) -> dict:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "VirtualCluster",
            "metadata": {"namespace": namespace, "name": name}, "spec": spec or {}}
    return k8s.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


def get_vc(api, namespace: str, name: str) -> dict | None:
    try:
        return k8s.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def condition(vc: dict | None, kind: str) -> dict:
    for cond in ((vc or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return cond
    return {}


def wait_for(predicate, timeout: float, what: str, interval: float = 2.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def tenant_write(tenant_core, namespace: str, name: str, data: dict, timeout: float, what: str) -> float:
    """Creates a ConfigMap in the tenant, trying again until it is written (an earlier attempt that got through
    counts); the seconds it took. For writes while part of a control plane is gone."""
    started = time.monotonic()

    def written():
        try:
            return tenant_core.create_namespaced_config_map(namespace, {"metadata": {"name": name}, "data": data},
                                                            _request_timeout=5)
        except ApiException as exc:
            return exc.status == 409
        except Exception:  # refused, reset or timed out: urllib3's errors are no OSError
            return None

    wait_for(written, timeout, what, interval=1)
    return time.monotonic() - started


def wait_ready(api, namespace: str, name: str, timeout: float = 600, interval: float = 2.0) -> dict:
    def ready():
        vc = get_vc(api, namespace, name)
        if condition(vc, "Ready").get("status") == "True":
            return vc
        return None
    return wait_for(ready, timeout, f"VirtualCluster {namespace}/{name} to be Ready", interval)


def delete_vc(api, namespace: str, name: str, timeout: float = 300) -> float:
    started = time.monotonic()
    try:
        k8s.CustomObjectsApi(api).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except ApiException as exc:
        if exc.status != 404:
            raise
    wait_for(lambda: get_vc(api, namespace, name) is None, timeout, f"{namespace}/{name} to be deleted")
    return time.monotonic() - started


def labelled_objects(api, namespace: str, name: str) -> dict[str, list[str]]:
    """Every object of the kinds the playbooks create that carries this virtual cluster's label."""
    selector = f"kosmos.io/virtualcluster={name}"
    dyn = {
        "Deployment": lambda: k8s.AppsV1Api(api).list_namespaced_deployment(namespace, label_selector=selector),
        "StatefulSet": lambda: k8s.AppsV1Api(api).list_namespaced_stateful_set(namespace, label_selector=selector),
        "Service": lambda: k8s.CoreV1Api(api).list_namespaced_service(namespace, label_selector=selector),
        "Secret": lambda: k8s.CoreV1Api(api).list_namespaced_secret(namespace, label_selector=selector),
        "ConfigMap": lambda: k8s.CoreV1Api(api).list_namespaced_config_map(namespace, label_selector=selector),
        "NetworkPolicy": lambda: k8s.NetworkingV1Api(api).list_namespaced_network_policy(namespace,
                                                                                         label_selector=selector),
        "PodDisruptionBudget": lambda: k8s.PolicyV1Api(api).list_namespaced_pod_disruption_budget(
            namespace, label_selector=selector),
        "Pod": lambda: k8s.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector),
        "PersistentVolumeClaim": lambda: k8s.CoreV1Api(api).list_namespaced_persistent_volume_claim(
            namespace, label_selector=selector),
    }
    return {kind: sorted(o.metadata.name for o in lister().items) for kind, lister in dyn.items()}


def tenant_client(vc: dict, api=None):
    """An API client from the virtual cluster's admin kubeconfig: from the Secret its status names (read
    with the host client `api`), or from spec.kubeconfig where the operator writes it (--spec-kubeconfig)."""
    if api is not None:
        ref = vc["status"]["kubeconfigSecretRef"]
        secret = k8s.CoreV1Api(api).read_namespaced_secret(ref["name"], vc["metadata"]["namespace"])
        encoded = secret.data[ref["key"]]
    else:
        encoded = vc["spec"]["kubeconfig"]
    raw = base64.b64decode(encoded)
    with tempfile.NamedTemporaryFile("wb", suffix=".kubeconfig", delete=False) as fh:
        fh.write(raw)
    try:
        return k8s_config.new_client_from_config(fh.name), yaml.safe_load(raw)
    finally:
        os.unlink(fh.name)
