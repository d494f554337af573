"""A rotation of every CA of a virtual cluster with two API servers, three etcd members and a promoted node,
asked for in its spec (spec.caRotation) and carried out by the operator: prepared (new CAs trusted everywhere,
then signing every certificate but the API server's serving one), then, once the kubeconfig is fetched again,
completed (the old CAs and service-account key gone).

Throughout, a client polls the tenant's API every 100 ms (a connection per request, no retries): with the
kubeconfig taken before the rotation while it is prepared, then with the one fetched again while it completes, as
docs/ca-rotation.md tells users to: none fails. Each request waits up to USER_TIMEOUT for its answer (kubectl and
client-go wait without a limit): an etcd member that stops may hold the API server's requests on it for a
moment. The slowest answer is printed. Every second, in turn,
`kubectl exec` or `kubectl logs` reaches a pod on the promoted node (through the Konnectivity tunnel and the node's
kubelet, both moved over to the new CA meanwhile): none is refused for trust; the moments in which nothing answers
are counted. The figures are printed; the pod on the node is the same pod, never restarted.
"""

from __future__ import annotations

import base64
import itertools
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from tests.support import k8sbin, rotation
from tests.support import virtualclusters as vcs
from tests.support.background import Requests
from tests.support.nodes import echo_on_node, kubelet_cert_issuer
from tests.support.tenant_poller import USER_TIMEOUT, TenantPoller

NS, NAME = "kubenest-e2e-rotation", "rot"
WORKERS = ("kn-w1", "kn-w2", "kn-w3")
STEP_TIMEOUT = 900


@pytest.fixture(scope="module")
def operator(host_cluster, tmp_path_factory):
    sb, api = host_cluster
    with vcs.own_operator(sb, api, NS, tmp_path_factory.mktemp("operator"), leftovers_timeout=600) as proc:
        yield sb, api, proc


# A call refused because a certificate was not trusted, as opposed to a moment in which nothing answered (a kubelet
# restarting, a Konnectivity agent replaced).
TRUST_FAILURES = ("Unauthorized", "logged in", "unknown authority", "x509", "certificate verify")


class Tools(Requests):
    """`kubectl exec` and `kubectl logs` on one pod in turn, one every `interval` seconds until stopped; counts what
    failed, and separately what failed for trust."""

    def __init__(self, kubeconfig: dict, pod: str, interval: float = 1.0):
        super().__init__(interval)
        self._file = Path(tempfile.mkstemp(suffix=".kubeconfig")[1])
        self._file.write_text(yaml.safe_dump(kubeconfig))
        self._calls = itertools.cycle([("exec", pod, "--", "/usr/local/bin/echo", "resolve", "localhost"),
                                       ("logs", pod, "--tail=1")])
        self.untrusted = 0

    def attempt(self) -> None:
        args = next(self._calls)
        proc = subprocess.run([str(k8sbin.binary("kubectl")), "--kubeconfig", str(self._file), "--request-timeout=20s",
                               *args], capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl {args[0]}: {proc.stderr.strip()[:200]}")

    def note_failure(self, exc: Exception) -> None:
        self.untrusted += any(word in str(exc) for word in TRUST_FAILURES)
        super().note_failure(exc)

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self._file.unlink(missing_ok=True)

    def summary(self) -> str:
        return (f"{self.ok} ok, {self.failed} failed, {self.untrusted} of them for trust"
                + (f" ({'; '.join(self.reasons)})" if self.reasons else ""))


def _phase(api, phase: str):
    def reached():
        vc = vcs.get_vc(api, NS, NAME)
        rotated = (vc.get("status") or {}).get("caRotation") or {}
        done = rotated.get("phase") == phase and vcs.condition(vc, "Ready").get("status") == "True"
        return vc if done else None
    return reached


def _ask(api, rotation_spec: dict) -> None:
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        "kosmos.io", "v1alpha1", NS, "virtualclusters", NAME, {"spec": {"caRotation": rotation_spec}})


def _cas(api) -> list[str]:
    secret = k8s.CoreV1Api(api).read_namespaced_secret(f"{NAME}-pki", NS)
    pem = base64.b64decode(secret.data["ca.crt"]).decode()
    return [block for block in pem.split("-----END CERTIFICATE-----") if "BEGIN" in block]


@rotation.turn("ca-rotation")
def test_every_ca_rotates_without_a_failed_request_and_the_node_and_its_pods_stay(operator):
    sb, api, _proc = operator
    workers = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(WORKERS)}]}
    spec = {"apiServerReplicas": 2, "etcdMembers": 3, "promotePolicies": [{"labelSelector": workers, "nodeCount": 1}]}
    vcs.create_vc(api, NS, NAME, spec)
    vc = vcs.wait_ready(api, NS, NAME, timeout=STEP_TIMEOUT)
    [node] = [entry["name"] for entry in vc["status"]["nodes"]]
    tenant, before = vcs.tenant_client(vc, api)
    echo_on_node(tenant, "steady", node)
    core = k8s.CoreV1Api(tenant)
    [pod] = core.list_namespaced_pod("default", label_selector="app=steady").items
    old_issuer = kubelet_cert_issuer(sb, node)
    assert len(_cas(api)) == 1

    started = time.monotonic()
    with TenantPoller(before, timeout=USER_TIMEOUT) as prepared_poll, \
            Tools(before, pod.metadata.name) as prepared_tools:
        time.sleep(2)
        _ask(api, {"id": "r1"})
        vc = vcs.wait_for(_phase(api, "Prepared"), STEP_TIMEOUT, "the rotation prepared", interval=2)
        time.sleep(2)
    prepared_s = time.monotonic() - started
    assert len(_cas(api)) == 2, "both CAs are trusted while the rotation is prepared"
    new_issuer = kubelet_cert_issuer(sb, node)
    assert new_issuer != old_issuer, "the kubelet holds a certificate of the new CA"

    # As users are told: fetch the kubeconfig again, then complete.
    tenant, after = vcs.tenant_client(vc, api)
    started = time.monotonic()
    with TenantPoller(after, timeout=USER_TIMEOUT) as completed_poll, \
            Tools(after, pod.metadata.name) as completed_tools:
        time.sleep(2)
        _ask(api, {"id": "r1", "complete": True})
        vc = vcs.wait_for(_phase(api, "Completed"), STEP_TIMEOUT, "the rotation completed", interval=2)
        time.sleep(2)
    completed_s = time.monotonic() - started

    with TenantPoller(before) as stale:
        time.sleep(1)
    assert len(_cas(api)) == 1 and stale.ok == 0 and stale.failed > 0, "the kubeconfig from before is refused"
    assert vc["status"]["caRotation"]["step"] == "finish"
    [same] = k8s.CoreV1Api(tenant).list_namespaced_pod("default", label_selector="app=steady").items
    restarts = sum(c.restart_count for c in same.status.container_statuses or [])
    print(f"\nCA rotation of a virtual cluster with two API servers, three etcd members and node {node}:")
    print(f"  prepared in {prepared_s:.0f}s: API polls with the kubeconfig from before: {prepared_poll.summary()};"
          f" exec/logs: {prepared_tools.summary()}")
    print(f"  completed in {completed_s:.0f}s: API polls with the kubeconfig fetched again:"
          f" {completed_poll.summary()}; exec/logs: {completed_tools.summary()}")
    print(f"  afterwards the kubeconfig from before: {stale.summary()}; the pod on {node}: same pod,"
          f" {restarts} restarts; kubelet certificate issuer {old_issuer} -> {new_issuer}")
    assert same.metadata.uid == pod.metadata.uid and restarts == 0
    assert prepared_poll.ok > 20 and completed_poll.ok > 20, "the polls did not run"
    assert (prepared_poll.failed, completed_poll.failed) == (0, 0), (prepared_poll.summary(), completed_poll.summary())
    assert prepared_tools.ok > 4 and completed_tools.ok > 4, "exec and logs did not run"
    # Trust holds throughout. Moments without an answer remain where a kubelet restarts (once, at sign) and where a
    # node's only Konnectivity agent is replaced (sign) or an API server starts before an agent reached it.
    tools = (prepared_tools.summary(), completed_tools.summary())
    assert (prepared_tools.untrusted, completed_tools.untrusted) == (0, 0), tools
    vcs.delete_vc(api, NS, NAME, timeout=600)
