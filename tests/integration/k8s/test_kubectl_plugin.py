"""`kubectl kubenest` run by the real kubectl (its plugin lookup on PATH) against a real API server with the CRDs.

The VirtualCluster's status is written here as the operator writes it (status subresource), and the kubeconfig
Secret holds this API server's own admin kubeconfig: the one the plugin takes out must work with kubectl.
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from tests.support import k8sbin
from tests.support.virtualclusters import install_crds

GROUP, VERSION = "kosmos.io", "v1alpha1"
NS = "kubectl-plugin"
# The API server is shared with the other test files of a worker: GlobalNodes (cluster-scoped) named for this one.
W1, W2, W3 = "kp-w1", "kp-w2", "kp-w3"


@pytest.fixture(scope="module")
def world(apiserver, api_client):
    install_crds(apiserver.kubeconfig)
    core, custom = kubernetes.client.CoreV1Api(api_client), kubernetes.client.CustomObjectsApi(api_client)
    try:
        core.create_namespace({"metadata": {"name": NS}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    core.create_namespaced_secret(NS, {"metadata": {"name": "named-admin-kubeconfig"}, "data": {
        "kubeconfig": base64.b64encode(Path(apiserver.kubeconfig).read_bytes()).decode()}})
    for name, spec in (("named", {"externalIP": "198.18.0.11", "promoteResources": {"nodes": ["kn-w1"]}}),
                       ("by-label", {"externalIP": "198.18.0.11", "promotePolicies": [
                           {"labelSelector": {"matchLabels": {"pool": "a"}}, "nodeCount": 1}]}),
                       ("new", {"externalIP": "198.18.0.11"})):
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "VirtualCluster", "metadata": {"name": name}, "spec": spec})
    custom.patch_namespaced_custom_object_status(GROUP, VERSION, NS, "virtualclusters", "named", {"status": {
        "phase": "Completed", "nodesReady": "1/1", "endpoint": "https://198.18.0.11:31443",
        "nodes": [{"name": "kn-w1", "ip": "198.18.0.12", "ready": True}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "1 of 1 nodes Ready",
                        "lastTransitionTime": "2026-12-03T11:00:00Z"}],
        "kubeconfigSecretRef": {"name": "named-admin-kubeconfig", "key": "kubeconfig"}}},
        _content_type="application/merge-patch+json")
    for name, status in ((W1, {"state": "occupied", "virtualCluster": f"{NS}/named"}), (W2, {"state": "free"}),
                         (W3, {"state": "held", "virtualCluster": f"{NS}/gone"})):
        custom.create_cluster_custom_object(GROUP, VERSION, "globalnodes", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode", "metadata": {"name": name},
            "spec": {"nodeIP": "198.18.0.12"}})
        custom.patch_cluster_custom_object_status(GROUP, VERSION, "globalnodes", name, {"status": status},
                                                  _content_type="application/merge-patch+json")
    yield apiserver, custom
    for name in (W1, W2, W3):
        custom.delete_cluster_custom_object(GROUP, VERSION, "globalnodes", name)
    core.delete_namespace(NS)


def kubectl(apiserver, *args, kubeconfig=None) -> subprocess.CompletedProcess:
    """The real kubectl, which finds kubectl-kubenest on PATH as it finds any plugin."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "KUBECONFIG": str(kubeconfig or apiserver.kubeconfig)}
    return subprocess.run([str(k8sbin.binary("kubectl")), *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def spec_nodes(custom, name):
    vc = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters", name)
    return vc["spec"].get("promoteResources", {}).get("nodes")


def test_the_kubeconfig_taken_out_is_private_and_works_with_kubectl(world, tmp_path):
    apiserver, _custom = world
    out = tmp_path / "tenant.kubeconfig"
    proc = kubectl(apiserver, "kubenest", "kubeconfig", f"{NS}/named", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert out.read_bytes() == Path(apiserver.kubeconfig).read_bytes()
    assert f"kubectl --kubeconfig {out} get nodes" in proc.stderr
    used = kubectl(apiserver, "get", "namespace", NS, "-o", "name", kubeconfig=out)
    assert used.returncode == 0 and used.stdout.strip() == f"namespace/{NS}", used.stderr
    printed = kubectl(apiserver, "kubenest", "-n", NS, "kubeconfig", "named")
    assert printed.returncode == 0 and printed.stdout == out.read_text()


def test_a_virtual_cluster_without_a_kubeconfig_yet_says_so_and_what_to_run(world):
    apiserver, _custom = world
    proc = kubectl(apiserver, "kubenest", "kubeconfig", f"{NS}/new")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == (
        f"error: virtualcluster {NS}/new has no kubeconfig yet (phase not reconciled yet): the operator writes it "
        f"once the control plane is up; follow it with kubectl kubenest status {NS}/new")
    missing = kubectl(apiserver, "kubenest", "status", f"{NS}/gone")
    assert missing.returncode == 1 and missing.stderr.startswith(f"error: virtualcluster {NS}/gone not found")


def test_status_lists_the_virtual_clusters_and_details_one(world):
    apiserver, _custom = world
    listed = kubectl(apiserver, "kubenest", "status", "-n", NS)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["NAME", "PHASE", "READY", "NODES", "PROGRESS", "AGE"]
    assert [r[:4] for r in rows[1:]] == [["by-label", "-", "-", "-"], ["named", "Completed", "True", "1/1"],
                                         ["new", "-", "-", "-"]]
    everywhere = kubectl(apiserver, "kubenest", "status", "-A")
    assert everywhere.stdout.splitlines()[0].split()[0] == "NAMESPACE"
    detail = kubectl(apiserver, "kubenest", "status", f"{NS}/named")
    assert detail.returncode == 0, detail.stderr
    assert "Endpoint:    https://198.18.0.11:31443" in detail.stdout
    assert any(line.split()[:3] == ["kn-w1", "198.18.0.12", "True"] for line in detail.stdout.splitlines())
    assert any(line.split()[:3] == ["Ready", "True", "Ready"] for line in detail.stdout.splitlines())


def test_nodes_lists_each_globalnode_with_its_holder(world):
    apiserver, _custom = world
    proc = kubectl(apiserver, "kubenest", "nodes")
    assert proc.returncode == 0, proc.stderr
    rows = [line.split()[:3] for line in proc.stdout.splitlines()[1:] if line.split()[0] in (W1, W2)]
    assert proc.stdout.splitlines()[0].split()[:3] == ["NAME", "STATE", "VIRTUAL"]
    assert rows == [[W1, "occupied", f"{NS}/named"], [W2, "free", "-"]]


def test_promote_and_return_edit_the_spec_and_refuse_what_they_cannot_do(world):
    apiserver, custom = world
    proc = kubectl(apiserver, "kubenest", "promote", f"{NS}/named", "kn-w2")
    assert proc.returncode == 0, proc.stderr
    assert spec_nodes(custom, "named") == ["kn-w1", "kn-w2"]
    again = kubectl(apiserver, "kubenest", "promote", f"{NS}/named", "kn-w2")
    assert again.returncode == 0 and "unchanged" in again.stdout
    back = kubectl(apiserver, "kubenest", "return", f"{NS}/named", "kn-w1")
    assert back.returncode == 0, back.stderr
    assert spec_nodes(custom, "named") == ["kn-w2"]
    unknown = kubectl(apiserver, "kubenest", "return", f"{NS}/named", "kn-w9")
    assert unknown.returncode == 1 and "does not ask for kn-w9 (it asks for: kn-w2)" in unknown.stderr
    policy = kubectl(apiserver, "kubenest", "promote", f"{NS}/by-label", "kn-w2")
    assert policy.returncode == 1 and "chooses its nodes by promotePolicies" in policy.stderr
    assert spec_nodes(custom, "named") == ["kn-w2"] and spec_nodes(custom, "by-label") is None


def test_clear_asks_for_held_nodes_only_and_changes_nothing_when_one_is_not(world):
    apiserver, custom = world

    def annotations(name):
        node = custom.get_cluster_custom_object(GROUP, VERSION, "globalnodes", name)
        return node["metadata"].get("annotations") or {}

    refused = kubectl(apiserver, "kubenest", "clear", W3, W2, "kp-none")
    assert refused.returncode == 1
    assert refused.stderr == (f"error: only held nodes are cleared, and nothing was asked: {W2} is free, not held; "
                              "no GlobalNode kp-none\n")
    assert annotations(W3) == {} and annotations(W2) == {}
    asked = kubectl(apiserver, "kubenest", "clear", W3)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith(f"globalnode {W3} asked to be cleared;")
    assert annotations(W3) == {"kubenest.kosmos.io/clear": "asked"}
    again = kubectl(apiserver, "kubenest", "clear", W3)
    assert again.returncode == 0 and again.stdout == f"globalnode {W3} was asked to be cleared already\n"
    listed = kubectl(apiserver, "kubenest", "nodes")
    assert [line.split()[1:] for line in listed.stdout.splitlines() if line.split()[0] == W3] == [
        ["held", f"{NS}/gone", "-", "asked"]], listed.stdout


def test_retry_changes_only_the_annotation_the_operator_watches(world):
    apiserver, custom = world
    before = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters", "new")
    first = kubectl(apiserver, "kubenest", "retry", "-n", NS, "new")
    assert first.returncode == 0, first.stderr
    assert first.stdout == (f"virtualcluster {NS}/new runs its spec again (phase not reconciled yet); follow it with "
                            f"kubectl kubenest status {NS}/new\n")
    after = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters", "new")
    asked = after["metadata"]["annotations"]["kubenest.kosmos.io/retry"]
    assert after["spec"] == before["spec"] and after["metadata"]["generation"] == before["metadata"]["generation"]
    # Each ask is a new value, so each is a change the operator sees.
    second = kubectl(apiserver, "kubenest", "retry", f"{NS}/new")
    assert second.returncode == 0, second.stderr
    again = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "virtualclusters", "new")
    assert again["metadata"]["annotations"]["kubenest.kosmos.io/retry"] > asked
    gone = kubectl(apiserver, "kubenest", "retry", f"{NS}/absent")
    assert gone.returncode == 1 and f"virtualcluster {NS}/absent not found" in gone.stderr


def test_a_bad_reference_is_refused_before_any_request(world):
    apiserver, _custom = world
    proc = kubectl(apiserver, "kubenest", "status", "a/b/c")
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("error: 'a/b/c' names no virtual cluster: give NAMESPACE/NAME, "
                                   "or NAME with -n NAMESPACE")


def test_a_kubeconfig_with_an_exec_plugin_works_and_a_failing_plugin_is_said(world, tmp_path):
    """The plugin logs in as kubectl would with a kubeconfig whose user is an exec credential plugin (a real
    program handing out a client certificate the server's CA signed), through the collection's client."""
    from ansible_collections.kosmos.kubenest.plugins.module_utils import pki

    from tests.support.exec_plugin import credential, exec_kubeconfig, plugin_dir, runs

    apiserver, _custom = world
    pair = pki.issue_certificate(apiserver.ca, "exec-admin", organizations=["system:masters"], client=True)
    bin_dir = plugin_dir(tmp_path, credential({
        "clientCertificateData": pki.certificate_pem(pair.cert).decode(),
        "clientKeyData": pki.private_key_pem(pair.key).decode()}))
    listed = kubectl(apiserver, "kubenest", "status", "-n", NS, kubeconfig=exec_kubeconfig(apiserver, tmp_path))
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["by-label", "named", "new"]
    assert len(runs(bin_dir)) == 1
    failing = tmp_path / "failing"
    failing.mkdir()
    plugin_dir(failing, {"exit": 2, "stderr": "error: refresh token expired, run `corp-login`"})
    refused = kubectl(apiserver, "kubenest", "nodes", kubeconfig=exec_kubeconfig(apiserver, failing))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("error: globalnodes: ")
    assert refused.stderr.strip().endswith("exited with status 2: error: refresh token expired, run `corp-login`")
    assert "token-that-must-not-leak" not in refused.stderr
