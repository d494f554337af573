"""playbooks/virtualcluster_apply.yml and virtualcluster_nodes.yml against a real API server: what a request leaves
of a VirtualCluster's nodes. The answers of the create template are the whole spec, so nodes not asked for go
back, unless it is told to keep them (as the AWX workflow's create step is); the nodes template sets the nodes
and leaves the rest.

No operator runs here: a stand-in, used only by this module, marks each spec Ready once it is written (the status
the operator writes after a run: phase, observedGeneration, the Ready condition), so that the playbooks' wait ends
as it does against the operator."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import kubernetes
import pytest

from tests.support.virtualclusters import ensure_namespace, install_crds

GROUP, VERSION, NS = "kosmos.io", "v1alpha1", "request-tests"
REPO = Path(__file__).resolve().parents[3]


class ReadyStandIn:
    """Stands in for the operator's report: every VirtualCluster of NS whose spec is newer than its status is
    marked Ready for that spec, as the operator's status reads after a successful run."""

    def __init__(self, custom):
        self.custom, self.stop = custom, threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(0.2):
            for vc in self.custom.list_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters")["items"]:
                generation = vc["metadata"]["generation"]
                if (vc.get("status") or {}).get("observedGeneration") == generation:
                    continue
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, NS, "virtualclusters", vc["metadata"]["name"], {"status": {
                        "phase": "Completed", "observedGeneration": generation,
                        "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "ok",
                                        "lastTransitionTime": "2026-12-07T12:00:00Z"}]}},
                    _content_type="application/merge-patch+json")

    def __enter__(self) -> ReadyStandIn:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def custom(apiserver, api_client):
    install_crds(apiserver.kubeconfig)
    ensure_namespace(api_client, NS)
    custom = kubernetes.client.CustomObjectsApi(api_client)
    with ReadyStandIn(custom):
        yield custom


def _play(apiserver, playbook: str, **variables) -> subprocess.CompletedProcess:
    args = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
            str(REPO / "playbooks" / playbook), "-e", f"ansible_python_interpreter={sys.executable}",
            "-e", "kubenest_vc_wait_timeout=60", "-e", f"kubenest_vc_namespace={NS}"]
    for key, value in variables.items():
        args += ["-e", f"{key}={value}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "K8S_AUTH_KUBECONFIG": str(apiserver.kubeconfig), "ANSIBLE_NOCOLOR": "1"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


def _nodes(custom, name: str) -> tuple:
    spec = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters", name)["spec"]
    return (spec.get("promoteResources"), spec.get("promotePolicies"), spec.get("apiServerReplicas"))


def test_the_create_request_keeps_nodes_only_when_told_and_none_is_asked_for(custom, apiserver):
    # A new one told to keep its nodes has none: the workflow's create step on a new virtual cluster.
    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="fresh", kubenest_vc_keep_nodes="yes")
    assert _nodes(custom, "fresh") == (None, None, None)

    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="held", kubenest_vc_nodes="kn-w1,kn-w2")
    assert _nodes(custom, "held") == ({"nodes": ["kn-w1", "kn-w2"]}, None, None)
    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="counted", kubenest_vc_node_count=1,
          kubenest_vc_node_labels="pool=a")
    policies = [{"labelSelector": {"matchLabels": {"pool": "a"}}, "nodeCount": 1}]
    assert _nodes(custom, "counted") == (None, policies, None)

    # Told to keep them, with no node asked for: the rest of the spec changes, the nodes stay, named or counted.
    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="held", kubenest_vc_keep_nodes="yes",
          kubenest_vc_api_server_replicas=2)
    assert _nodes(custom, "held") == ({"nodes": ["kn-w1", "kn-w2"]}, None, 2)
    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="counted", kubenest_vc_keep_nodes="yes")
    assert _nodes(custom, "counted") == (None, policies, None)

    # Nodes asked for win over keeping.
    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="held", kubenest_vc_keep_nodes="yes",
          kubenest_vc_nodes="kn-w3")
    assert _nodes(custom, "held") == ({"nodes": ["kn-w3"]}, None, None)

    # Not told: the answers are the whole spec, and the nodes go.
    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="held")
    assert _nodes(custom, "held") == (None, None, None)


def test_nodes_set_by_the_nodes_request_stay_through_a_create_step_that_keeps_them(custom, apiserver):
    """The AWX workflow run again on a virtual cluster that exists: its create step keeps the nodes, its nodes step
    sets them."""
    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="again", kubenest_vc_keep_nodes="yes")
    _play(apiserver, "virtualcluster_nodes.yml", kubenest_vc_name="again", kubenest_nodes_names="kn-w1")
    assert _nodes(custom, "again") == ({"nodes": ["kn-w1"]}, None, None)
    _play(apiserver, "virtualcluster_apply.yml", kubenest_vc_name="again", kubenest_vc_keep_nodes="yes",
          kubenest_vc_external_ip="198.18.0.20")
    assert _nodes(custom, "again") == ({"nodes": ["kn-w1"]}, None, None)
    spec = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters", "again")["spec"]
    assert spec["externalIP"] == "198.18.0.20"
