"""A virtual cluster's Kubernetes upgraded one minor up by its spec, on the previous minor's build.

The previous minor (versions.env KUBERNETES_PREVIOUS_VERSION) is built here the same way as the pin
(`sandbox/k8s/build.sh previous`, `build_images.py --release previous`) and its images imported into the host's
machines, as a site whose registry holds both would have them; the operator is told both versions exist
(`kubenest_kubernetes_versions`). Two virtual clusters start on the previous minor, one with two API servers and
one with one, and are moved to the pin by `spec.kubernetesVersion`, one after the other. Throughout, a client polls
the tenant's API every 100 ms (a connection per request, no retries) and a watcher checks the version-skew policy
at every moment: no controller-manager or scheduler pod newer than an API server pod. Printed: failed requests and
the longest stretch without an answer, for each; asserted: none failed with two API servers, the skew policy held,
the tenant answers with the new version and its objects are kept.

A third starts on the previous minor with two promoted nodes, whose kubelets are the previous minor's too (the
site gives it, `kubenest_kubelet_binaries`: the host's kubelet is newer than that tenant's API servers may be).
Its upgrade moves the control plane first, then each node in turn (drained, its kubelet restarted as the pin's,
cordoned no longer), while a Service with a pod on each node and a PodDisruptionBudget is polled through its
NodePort on both nodes every 100 ms: no request fails, and no kubelet is ever newer than an API server. It runs
with two API servers and with one: the Service answers throughout either way, and the tenant's API too with two
(with one, the count of failed API requests is printed).

A fourth is asked for a version whose images do not exist: its API server goes back to the version that ran, the
tenant answering throughout, and its status names what went back; the spec set back makes it Ready again.

A fifth, with one node, moves to a kubelet that cannot start (a stand-in put in place of the host's kubelet on
that machine): the node goes back to the kubelet it ran, Ready and taking pods, the control plane stays on the new
version, and the status names the node and both versions. A sixth does the same with the operator killed once the
new kubelet unit is on the node: the run started again still puts back the unit that ran before the upgrade.

Long (`make test-long`): the previous minor's build takes minutes on a fresh machine.
"""

from __future__ import annotations

import contextlib
import http.client
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client as k8s

from sandbox.images.build_images import read_versions
from sandbox.machines.machine import Machine
from tests.support import k8sbin
from tests.support import virtualclusters as vcs
from tests.support.background import Repeating, Requests
from tests.support.kills import kill_at
from tests.support.nodes import on_node
from tests.support.tenant_poller import TenantPoller

pytestmark = pytest.mark.long

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS = read_versions(REPO_ROOT / "versions.env")
PREVIOUS, PINNED = VERSIONS["KUBERNETES_PREVIOUS_VERSION"], VERSIONS["KUBERNETES_VERSION"]
# Listed as available to the operator, with no images anywhere: its pods cannot start.
UNRUNNABLE = PINNED.rsplit(".", 1)[0] + ".99"
NS = "kubenest-e2e-upgrade"
WORKERS = ("kn-w1", "kn-w2", "kn-w3")
STEP_TIMEOUT = 900
COMPONENT = "app.kubernetes.io/component"


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.lstrip("v").split(".")[:2]
    return int(major), int(minor)


@pytest.fixture(scope="module")
def previous_images(host_cluster):
    """The previous minor's control-plane images, built (or cached) and imported into every host machine."""
    sb, _api = host_cluster
    subprocess.run(["bash", str(REPO_ROOT / "sandbox/k8s/build.sh"), "previous"], check=True, timeout=3600)
    built = subprocess.run([sys.executable, str(REPO_ROOT / "sandbox/images/build_images.py"), "--release",
                            "previous"], check=True, timeout=1800, capture_output=True, text=True)
    images_dir = Path(built.stdout.strip().splitlines()[-1])
    archives = sorted(images_dir.glob("*.oci.tar"))
    assert {a.name.removesuffix(".oci.tar") for a in archives} >= {"kube-apiserver", "kube-controller-manager",
                                                                   "kube-scheduler"}
    for node in sb.nodes:
        machine = Machine(sb, node)
        for archive in archives:
            # On the machine's disk (its /tmp is a file system of its own).
            dest = machine.root / "var/lib" / f"kubenest-previous-{archive.name}"
            dest.write_bytes(archive.read_bytes())
            try:
                machine.nsenter(["ctr", "-n", "k8s.io", "images", "import", f"/var/lib/{dest.name}"], timeout=300)
            finally:
                dest.unlink(missing_ok=True)
    return images_dir


@pytest.fixture(scope="module")
def operator(host_cluster, previous_images, tmp_path_factory):
    sb, api = host_cluster
    # The previous minor's kubelet, where sandbox/k8s/build.sh puts it.
    bin_dir = k8sbin.cache_dir() / "k8s" / f"{PREVIOUS}-etcd-{VERSIONS['ETCD_VERSION']}" / "bin"
    site = {"kubenest_kubernetes_versions": [PREVIOUS, PINNED, UNRUNNABLE],
            "kubenest_kubelet_binaries": {PREVIOUS: str(bin_dir / "kubelet")},
            # Stand-in for a registry that serves both releases' images: promoted nodes keep the previous minor's
            # kube-proxy imported above instead of having every image but the pin's catalog wiped.
            "node_promote_wipe_images": False}
    with vcs.own_operator(sb, api, NS, tmp_path_factory.mktemp("operator"), site=site,
                          leftovers_timeout=600) as proc:
        yield sb, api, proc


class SkewWatcher(Repeating):
    """Lists the control plane's pods every 0.5 s; notes each moment a controller-manager or scheduler pod runs a
    newer minor than an API server pod of the same virtual cluster (the version-skew policy forbids it). A pod
    being deleted is left out: it has left its Service, through which the controllers reach their API server."""

    def __init__(self, api, name: str, tenant=None):
        super().__init__(0.5)
        self._core, self._name = k8s.CoreV1Api(api), name
        self._tenant = k8s.CoreV1Api(tenant) if tenant is not None else None
        self.looks, self.violations, self.seen = 0, [], set()

    def _look(self) -> None:
        pods = self._core.list_namespaced_pod(NS, label_selector=f"kosmos.io/virtualcluster={self._name}").items
        versions: dict[str, set] = {}
        for pod in pods:
            component = (pod.metadata.labels or {}).get(COMPONENT)
            if pod.metadata.deletion_timestamp or pod.status.phase not in ("Pending", "Running") or component not in (
                    "apiserver", "controller-manager", "scheduler"):
                continue
            tag = pod.spec.containers[0].image.rpartition(":")[2]
            self.seen.add((component, tag))
            versions.setdefault(component, set()).add(_minor(tag))
        oldest_apiserver = min(versions.get("apiserver", {(999, 0)}))
        if self._tenant is not None:  # the kubelets, as the tenant's Nodes report them
            for node in self._tenant.list_node().items:
                tag = node.status.node_info.kubelet_version
                self.seen.add((f"kubelet {node.metadata.name}", tag))
                versions.setdefault("kubelet", set()).add(_minor(tag))
        for component in ("controller-manager", "scheduler", "kubelet"):
            if versions.get(component) and max(versions[component]) > oldest_apiserver:
                self.violations.append((component, max(versions[component]), oldest_apiserver))

    def step(self) -> None:
        try:
            self._look()
            self.looks += 1
        except Exception:  # a failed list is not a finding; the next look counts
            pass


def _upgraded(api, name: str):
    def done():
        vc = vcs.get_vc(api, NS, name)
        status = (vc or {}).get("status") or {}
        ok = status.get("kubernetesVersion") == PINNED and vcs.condition(vc, "Ready").get("status") == "True"
        return vc if ok else None
    return done


def _move_to_pin(api, name: str) -> None:
    """Asks for the pinned version and waits until the virtual cluster runs it and is Ready; what measures meanwhile
    gets two seconds before and after."""
    time.sleep(2)
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        vcs.GROUP, vcs.VERSION, NS, vcs.PLURAL, name, {"spec": {"kubernetesVersion": PINNED}})
    vcs.wait_for(_upgraded(api, name), STEP_TIMEOUT, f"{name} upgraded to {PINNED}", interval=2)
    time.sleep(2)


def _upgrade(api, name: str) -> tuple[float, TenantPoller, SkewWatcher, str]:
    vc = vcs.get_vc(api, NS, name)
    tenant, kubeconfig = vcs.tenant_client(vc, api)
    before = k8s.VersionApi(tenant).get_code().git_version
    k8s.CoreV1Api(tenant).create_namespaced_config_map(
        "default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="kept"), data={"written": before}))
    started = time.monotonic()
    with TenantPoller(kubeconfig) as poll, SkewWatcher(api, name) as skew:
        _move_to_pin(api, name)
    took = time.monotonic() - started
    after = k8s.VersionApi(tenant).get_code().git_version
    kept = k8s.CoreV1Api(tenant).read_namespaced_config_map("kept", "default").data
    assert (before, after) == (PREVIOUS, PINNED), (before, after)
    assert kept == {"written": PREVIOUS}, "the tenant's objects are kept across the upgrade"
    return took, poll, skew, before


def test_a_tenant_moves_one_minor_up_without_a_failed_request(operator):
    _sb, api, _proc = operator
    assert _minor(PINNED)[1] - _minor(PREVIOUS)[1] == 1, "versions.env names the previous minor"
    tenants = {"ha": 2, "single": 1}
    for name, replicas in tenants.items():
        vcs.create_vc(api, NS, name, {"kubernetesVersion": PREVIOUS, "apiServerReplicas": replicas})
    for name in tenants:
        vc = vcs.wait_ready(api, NS, name, timeout=STEP_TIMEOUT)
        assert vc["status"]["kubernetesVersion"] == PREVIOUS

    results = {name: _upgrade(api, name) for name in tenants}
    print(f"\nUpgrade of a virtual cluster {PREVIOUS} -> {PINNED} (control plane), a request every 100 ms:")
    for name, (took, poll, skew, _before) in results.items():
        print(f"  {tenants[name]} API server(s): {took:.0f}s; {poll.summary()}; skew policy checked {skew.looks}"
              f" times, {len(skew.violations)} violations; pods seen {sorted(skew.seen)}")
    for name, (_took, poll, skew, _before) in results.items():
        assert poll.ok > 20 and skew.looks > 10, f"{name}: the poll or the watcher did not run"
        assert not skew.violations, (name, skew.violations[:5])
        assert {tag for _c, tag in skew.seen} == {PREVIOUS, PINNED}, (name, skew.seen)
    ha_poll = results["ha"][1]
    assert ha_poll.failed == 0, ha_poll.summary()

    # The admission refuses the way back.
    with pytest.raises(k8s.rest.ApiException) as refused:
        k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
            vcs.GROUP, vcs.VERSION, NS, vcs.PLURAL, "ha", {"spec": {"kubernetesVersion": PREVIOUS}})
    assert refused.value.status == 422 and PREVIOUS in refused.value.body
    for name in tenants:
        vcs.delete_vc(api, NS, name, timeout=600)


class ServicePoller(Requests):
    """GET / of a tenant Service through its NodePort every 100 ms, on each node in turn (a connection per request,
    no retries); counts what failed."""

    kept_reasons = 12

    def __init__(self, addresses: list[str], port: int, interval: float = 0.1, timeout: float = 2.0):
        super().__init__(interval)
        self._addresses, self._port, self._timeout = addresses, port, timeout
        self._turn = 0

    def attempt(self) -> None:
        address = self._addresses[self._turn % len(self._addresses)]
        self._turn += 1
        connection = http.client.HTTPConnection(address, self._port, timeout=self._timeout)
        try:
            connection.request("GET", "/", headers={"Connection": "close"})
            status = connection.getresponse().status
            if status != 200:
                raise RuntimeError(f"HTTP {status}")
        except Exception as exc:
            raise RuntimeError(f"{time.strftime('%H:%M:%S')} {address}: {type(exc).__name__}: {exc}") from exc
        finally:
            connection.close()

    def note_failure(self, exc: Exception) -> None:
        if len(self.reasons) < self.kept_reasons:
            self.reasons.append(str(exc)[:200])


def _web(tenant, name: str) -> int:
    """A Deployment of two echo pods on two different nodes, each waiting a moment before it stops, a
    PodDisruptionBudget that keeps one, and a NodePort Service; returns the node port once both pods are
    available."""
    labels = {"app": name}
    apart = {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}
    container = {"name": "echo", "image": "kubenest.local/echo:1.0", "ports": [{"containerPort": 8080}],
                 # As a workload that means to lose no request does: an evicted pod serves until its endpoint has
                 # left every node's Service rules.
                 "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                 "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}}
    k8s.AppsV1Api(tenant).create_namespaced_deployment("default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"affinity": {"podAntiAffinity": apart}, "containers": [container]}}}})
    k8s.PolicyV1Api(tenant).create_namespaced_pod_disruption_budget("default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}})
    service = k8s.CoreV1Api(tenant).create_namespaced_service("default", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}})
    vcs.wait_for(lambda: (k8s.AppsV1Api(tenant).read_namespaced_deployment(name, "default").status.available_replicas
                          or 0) >= 2, 300, f"tenant Deployment {name} available on both nodes")
    return service.spec.ports[0].node_port


def _answers(address: str, port: int) -> bool:
    connection = http.client.HTTPConnection(address, port, timeout=2)
    try:
        connection.request("GET", "/", headers={"Connection": "close"})
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _kubelets(tenant) -> dict[str, tuple[str, bool]]:
    return {node.metadata.name: (node.status.node_info.kubelet_version, bool(node.spec.unschedulable))
            for node in k8s.CoreV1Api(tenant).list_node().items}


@pytest.mark.parametrize("replicas", [2, 1])
def test_nodes_move_to_the_new_kubelet_one_at_a_time_and_a_service_keeps_answering(operator, replicas):
    _sb, api, _proc = operator
    name = f"nodes-{replicas}"
    workers = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(WORKERS)}]}
    vcs.create_vc(api, NS, name, {"kubernetesVersion": PREVIOUS, "apiServerReplicas": replicas,
                                  "promotePolicies": [{"labelSelector": workers, "nodeCount": 2}]})
    # The workers go back whatever the outcome: the next test needs two of them.
    try:
        vc = vcs.wait_ready(api, NS, name, timeout=STEP_TIMEOUT)
        tenant, kubeconfig = vcs.tenant_client(vc, api)
        before = _kubelets(tenant)
        assert len(before) == 2 and {version for version, _cordoned in before.values()} == {PREVIOUS}, before
        port = _web(tenant, "web")
        addresses = [address.address for node in k8s.CoreV1Api(tenant).list_node().items
                     for address in node.status.addresses if address.type == "InternalIP"]
        # As a user would before counting on it: the new Service answers at its NodePort on every node (each node's
        # kube-proxy writes its rules in its own time).
        vcs.wait_for(lambda: all(_answers(address, port) for address in addresses), 60,
                     f"Service web at port {port} on {addresses}", interval=0.5)

        started = time.monotonic()
        with TenantPoller(kubeconfig) as poll, ServicePoller(addresses, port) as web, \
                SkewWatcher(api, name, tenant) as skew:
            _move_to_pin(api, name)
        took = time.monotonic() - started
        after = _kubelets(tenant)
        available = k8s.AppsV1Api(tenant).read_namespaced_deployment("web", "default").status.available_replicas
        print(f"\nUpgrade {PREVIOUS} -> {PINNED} of a virtual cluster with {replicas} API server(s) and nodes"
              f" {sorted(before)}:"
              f" {took:.0f}s; API: {poll.summary()}; Service through its NodePort: {web.summary()}; skew policy checked"
              f" {skew.looks} times, {len(skew.violations)} violations; kubelets {before} -> {after}")
        assert web.ok > 20 and poll.ok > 20 and skew.looks > 10, "the polls or the watcher did not run"
        assert after == {node: (PINNED, False) for node in before}, after
        assert available == 2
        assert not skew.violations, skew.violations[:5]
        # The Service's path does not go through the API server; with one API server, the tenant's API is away while
        # its pod is replaced, and that count is printed.
        assert web.failed == 0, web.summary()
        if replicas > 1:
            assert poll.failed == 0, poll.summary()
    finally:
        vcs.delete_vc(api, NS, name, timeout=600)


def _ask_and_see_it_go_back(api, name: str, kubeconfig: dict, version: str, what: str, during=None):
    """Asks for `version` while the tenant's API is polled, calls `during` if given, and waits until the run says
    it went back (UpgradeRolledBack); returns the VirtualCluster, the seconds it took and the poll."""
    def rolled_back():
        vc = vcs.get_vc(api, NS, name)
        return vc if vcs.condition(vc, "Ready").get("reason") == "UpgradeRolledBack" else None

    started = time.monotonic()
    with TenantPoller(kubeconfig) as poll:
        time.sleep(2)
        k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
            vcs.GROUP, vcs.VERSION, NS, vcs.PLURAL, name, {"spec": {"kubernetesVersion": version}})
        if during is not None:
            during()
        vc = vcs.wait_for(rolled_back, STEP_TIMEOUT, what, interval=2)
        time.sleep(2)
    return vc, time.monotonic() - started, poll


def test_a_version_that_cannot_run_goes_back_and_the_status_says_which(operator):
    _sb, api, _proc = operator
    name = "back"
    vcs.create_vc(api, NS, name, {"kubernetesVersion": PREVIOUS})
    vc = vcs.wait_ready(api, NS, name, timeout=STEP_TIMEOUT)
    tenant, kubeconfig = vcs.tenant_client(vc, api)

    vc, took, poll = _ask_and_see_it_go_back(api, name, kubeconfig, UNRUNNABLE, f"{name} back on {PREVIOUS}")
    ready = vcs.condition(vc, "Ready")
    images = sorted({container.image for deployment in k8s.AppsV1Api(api).list_namespaced_deployment(
        NS, label_selector=f"kosmos.io/virtualcluster={name}").items
        for container in deployment.spec.template.spec.containers if "kube-" in container.image})
    answers = k8s.VersionApi(tenant).get_code().git_version
    print(f"\nAsked for {UNRUNNABLE} (no images), one API server: back in {took:.0f}s; API: {poll.summary()};"
          f" Ready={ready.get('status')} {ready.get('reason')}: {ready.get('message')}; images {images}")
    assert ready.get("status") == "False" and "apiserver" in ready.get("message", "")
    assert UNRUNNABLE in ready["message"] and PREVIOUS in ready["message"], ready
    assert images and all(image.endswith(":" + PREVIOUS) for image in images), images
    assert answers == PREVIOUS and vc["status"]["kubernetesVersion"] == PREVIOUS
    assert poll.ok > 20 and poll.failed == 0, poll.summary()

    # Asked back, it is Ready again.
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        vcs.GROUP, vcs.VERSION, NS, vcs.PLURAL, name, {"spec": {"kubernetesVersion": PREVIOUS}})
    vcs.wait_ready(api, NS, name, timeout=STEP_TIMEOUT)
    vcs.delete_vc(api, NS, name, timeout=600)


# Stand-in for a kubelet of the new version that cannot start (a fault, as a broken binary or a configuration it
# refuses would be): it answers `--version` as that kubelet does and exits at once otherwise.
BROKEN_KUBELET = f"""#!/bin/sh
case "$1" in --version) echo "Kubernetes {PINNED}"; exit 0 ;; esac
echo "stand-in kubelet of {PINNED}: cannot start" >&2
exit 1
"""


@contextlib.contextmanager
def _one_node_and_a_broken_new_kubelet(sb, api, name: str):
    """A virtual cluster on the previous minor with one node, whose kubelet of the pin is BROKEN_KUBELET; yields
    (tenant client, kubeconfig, node); the node's kubelet is put back, and the virtual cluster deleted, after."""
    workers = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(WORKERS)}]}
    vcs.create_vc(api, NS, name, {"kubernetesVersion": PREVIOUS,
                                  "promotePolicies": [{"labelSelector": workers, "nodeCount": 1}]})
    vc = vcs.wait_ready(api, NS, name, timeout=STEP_TIMEOUT)
    tenant, kubeconfig = vcs.tenant_client(vc, api)
    [node] = _kubelets(tenant)
    # The tenant's version has no kubelet from the site: its nodes move to the host's, replaced here.
    [machine] = [Machine(sb, n) for n in sb.nodes if n.name == node]
    host_kubelet = machine.root / "usr/local/bin/kubelet"
    kept = host_kubelet.with_name("kubelet.kept-by-test")
    host_kubelet.rename(kept)
    try:
        host_kubelet.write_text(BROKEN_KUBELET)
        host_kubelet.chmod(0o755)
        yield tenant, kubeconfig, node
    finally:
        host_kubelet.unlink(missing_ok=True)
        kept.rename(host_kubelet)
    # The node goes back to the host with the host's own kubelet.
    vcs.delete_vc(api, NS, name, timeout=600)


def test_a_kubelet_that_cannot_start_at_the_new_version_goes_back_and_the_status_says_which(operator):
    sb, api, _proc = operator
    name = "kubelet-back"
    with _one_node_and_a_broken_new_kubelet(sb, api, name) as (tenant, kubeconfig, node):
        vc, took, poll = _ask_and_see_it_go_back(api, name, kubeconfig, PINNED,
                                                 f"the kubelet of {node} back on {PREVIOUS}")
        ready = vcs.condition(vc, "Ready")
        after = _kubelets(tenant)
        answers = k8s.VersionApi(tenant).get_code().git_version
        print(f"\nA kubelet of {PINNED} that cannot start on {node}: back in {took:.0f}s; API: {poll.summary()};"
              f" Ready={ready.get('status')} {ready.get('reason')}: {ready.get('message')}; kubelets {after};"
              f" control plane {answers}")
        assert ready.get("status") == "False"
        assert node in ready["message"] and PINNED in ready["message"] and PREVIOUS in ready["message"], ready
        assert "its Node reports kubelet" in ready["message"], "the message says what the Node reported"
        assert after == {node: (PREVIOUS, False)}, "the node runs the kubelet that ran, and takes pods"
        [tenant_node] = k8s.CoreV1Api(tenant).list_node().items
        assert [c.status for c in tenant_node.status.conditions if c.type == "Ready"] == ["True"]
        assert answers == PINNED, "the control plane stays on the new version, which the kubelet may serve"
        assert poll.ok > 20 and poll.failed == 0, poll.summary()


# The task of kubelet_upgrade.yml that restarts the kubelet with the new unit, which is on the node by then.
KILLED_AT = "Switch to the new kubelet"


# Run alone, the module's fixtures (the previous minor's images imported into every machine) come first.
@pytest.mark.timeout(2 * 900)
def test_a_run_killed_after_the_new_kubelet_unit_is_written_still_goes_back_to_the_one_that_ran(operator):
    sb, api, proc = operator
    name = "kubelet-killed"
    killed = []
    with _one_node_and_a_broken_new_kubelet(sb, api, name) as (tenant, kubeconfig, node):
        # Killed once the unit naming the new kubelet is on the node: its restart and the way back are not done.
        vc, took, poll = _ask_and_see_it_go_back(
            api, name, kubeconfig, PINNED, f"the kubelet of {node} back on {PREVIOUS} after the kill",
            during=lambda: killed.append(kill_at(proc, proc.runs_dir, NS, name, KILLED_AT, timeout=STEP_TIMEOUT)))
        ready = vcs.condition(vc, "Ready")
        after = _kubelets(tenant)
        unit = on_node(sb, node, "cat /etc/systemd/system/kubelet.service")
        leftover = on_node(sb, node, "ls /var/lib/kubelet")
        print(f"\nThe operator killed at {killed} on {node}: back in {took:.0f}s; API: {poll.summary()};"
              f" Ready={ready.get('status')} {ready.get('reason')}: {ready.get('message')}; kubelets {after}")
        assert len(killed) == 1 and killed[0].endswith(KILLED_AT), killed
        assert after == {node: (PREVIOUS, False)}, "the node runs the kubelet that ran, and takes pods"
        [tenant_node] = k8s.CoreV1Api(tenant).list_node().items
        assert [c.status for c in tenant_node.status.conditions if c.type == "Ready"] == ["True"]
        assert f"/{PREVIOUS}/kubelet " in unit and "/usr/local/bin/kubelet" not in unit, unit
        assert "kubenest-unit-before-upgrade" not in leftover, "the kept unit is dropped once the node went back"
