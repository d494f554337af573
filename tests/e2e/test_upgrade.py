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

Long (`make test-long`): the previous minor's build takes minutes on a fresh machine.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client as k8s

from sandbox.images.build_images import read_versions
from sandbox.machines.machine import Machine
from tests.support import virtualclusters as vcs
from tests.support.tenant_poller import TenantPoller

pytestmark = pytest.mark.long

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS = read_versions(REPO_ROOT / "versions.env")
PREVIOUS, PINNED = VERSIONS["KUBERNETES_PREVIOUS_VERSION"], VERSIONS["KUBERNETES_VERSION"]
NS = "kubenest-e2e-upgrade"
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
    site = {"kubenest_kubernetes_versions": [PREVIOUS, PINNED]}
    with vcs.own_operator(sb, api, NS, tmp_path_factory.mktemp("operator"), site=site,
                          leftovers_timeout=600) as proc:
        yield sb, api, proc


class SkewWatcher:
    """Lists the control plane's pods every 0.5 s; notes each moment a controller-manager or scheduler pod runs a
    newer minor than an API server pod of the same virtual cluster (the version-skew policy forbids it). A pod
    being deleted is left out: it has left its Service, through which the controllers reach their API server."""

    def __init__(self, api, name: str):
        self._core, self._name = k8s.CoreV1Api(api), name
        self.looks, self.violations, self.seen = 0, [], set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

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
        for component in ("controller-manager", "scheduler"):
            if versions.get(component) and max(versions[component]) > oldest_apiserver:
                self.violations.append((component, max(versions[component]), oldest_apiserver))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._look()
                self.looks += 1
            except Exception:  # a failed list is not a finding; the next look counts
                pass
            self._stop.wait(0.5)

    def __enter__(self) -> SkewWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)


def _upgraded(api, name: str):
    def done():
        vc = vcs.get_vc(api, NS, name)
        status = (vc or {}).get("status") or {}
        ok = status.get("kubernetesVersion") == PINNED and vcs.condition(vc, "Ready").get("status") == "True"
        return vc if ok else None
    return done


def _upgrade(api, name: str) -> tuple[float, TenantPoller, SkewWatcher, str]:
    vc = vcs.get_vc(api, NS, name)
    tenant, kubeconfig = vcs.tenant_client(vc, api)
    before = k8s.VersionApi(tenant).get_code().git_version
    k8s.CoreV1Api(tenant).create_namespaced_config_map(
        "default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="kept"), data={"written": before}))
    started = time.monotonic()
    with TenantPoller(kubeconfig) as poll, SkewWatcher(api, name) as skew:
        time.sleep(2)
        k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
            vcs.GROUP, vcs.VERSION, NS, vcs.PLURAL, name, {"spec": {"kubernetesVersion": PINNED}})
        vcs.wait_for(_upgraded(api, name), STEP_TIMEOUT, f"{name} upgraded to {PINNED}", interval=2)
        time.sleep(2)
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
