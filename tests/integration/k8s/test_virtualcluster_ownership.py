"""The real virtualcluster playbook on a real API server: planted objects are refused, never taken over,
and deletion removes only what the virtual cluster owns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes
import pytest
from kubernetes.client.rest import ApiException

from kubenest_operator.extravars import dump_unsafe

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
NS, UID = "owned-tests", "6f1c7c1e-0000-4000-8000-000000000001"
LABELS = {"app.kubernetes.io/managed-by": "kosmos.kubenest", "kosmos.io/virtualcluster": "vc1"}


@pytest.fixture(scope="module")
def core(api_client, kosmos_crds):
    api = kubernetes.client.CoreV1Api(api_client)
    try:
        api.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=NS)))
    except ApiException as exc:
        if exc.status != 409:
            raise
    return api


def run_playbook(tmp_path, apiserver, state, **settings):
    extravars = tmp_path / "vc.yml"
    extravars.write_text(dump_unsafe({
        "kubenest_host_kubeconfig": str(apiserver.kubeconfig),
        "virtualcluster": {"namespace": NS, "name": "vc1", "uid": UID, "state": state, "spec": {}},
        **settings,
    }))
    return subprocess.run([ANSIBLE_PLAYBOOK, str(REPO / "playbooks" / "virtualcluster.yml"), "-e", f"@{extravars}"],
                          capture_output=True, text=True, timeout=600, check=False)


def secret(name, labels=None, owner_uid=None):
    refs = None
    if owner_uid:
        refs = [kubernetes.client.V1OwnerReference(api_version="kosmos.io/v1alpha1", kind="VirtualCluster",
                                                   name="vc1", uid=owner_uid, controller=True)]
    return kubernetes.client.V1Secret(
        metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=NS, labels=labels, owner_references=refs),
        string_data={"ca.crt": "planted", "ca.key": "planted"})


def test_a_planted_secret_is_refused_by_name_and_left_alone(core, apiserver, tmp_path):
    planted = core.create_namespaced_secret(NS, secret("vc1-pki", labels=LABELS))
    try:
        proc = run_playbook(tmp_path, apiserver, "present")
        assert proc.returncode != 0
        assert "[kubenest:permanent:NotOwned] Secret owned-tests/vc1-pki already exist" in proc.stdout
        assert "planted" not in proc.stdout  # the listing of Secrets never shows their content
        after = core.read_namespaced_secret("vc1-pki", NS)
        assert after.metadata.resource_version == planted.metadata.resource_version
        with pytest.raises(ApiException) as missing:  # nothing was created before the refusal
            core.read_namespaced_service("vc1-etcd", NS)
        assert missing.value.status == 404
    finally:
        core.delete_namespaced_secret("vc1-pki", NS)


def test_a_wrong_role_setting_fails_the_run_before_anything_is_written(core, apiserver, tmp_path):
    # The role includes skip ansible-core's per-include check: the settings of every role are checked up front.
    proc = run_playbook(tmp_path, apiserver, "present", etcd_hosted_key_type="dsa",
                        node_promote_drain_timeout="soon", coredns_replicas=2)
    assert proc.returncode != 0
    assert "Check the settings of the roles this playbook runs" in proc.stdout
    assert "etcd_hosted_key_type" in proc.stdout and "node_promote_drain_timeout" in proc.stdout
    errors = proc.stdout.split("Validation of arguments failed")[-1].split("argument_spec_data")[0]
    assert "coredns_replicas" not in errors  # a right setting is not named
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_service("vc1-etcd", NS)
    assert missing.value.status == 404


def test_deletion_removes_only_what_the_virtual_cluster_owns(core, apiserver, tmp_path):
    core.create_namespaced_secret(NS, secret("vc1-pki", labels=LABELS, owner_uid=UID))
    core.create_namespaced_secret(NS, secret("vc1-etcd-pki", labels=LABELS, owner_uid="someone-elses-uid"))
    core.create_namespaced_secret(NS, secret("unrelated", labels=LABELS))
    try:
        proc = run_playbook(tmp_path, apiserver, "absent")
        assert proc.returncode == 0, proc.stdout[-3000:]
        left = {s.metadata.name for s in core.list_namespaced_secret(NS).items}
        assert "vc1-pki" not in left
        assert {"vc1-etcd-pki", "unrelated"} <= left
    finally:
        for name in ("vc1-pki", "vc1-etcd-pki", "unrelated"):
            try:
                core.delete_namespaced_secret(name, NS)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def _workload(name, labels=None):
    selector = {"app": name}
    return {"apiVersion": "apps/v1", "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"replicas": 0, "selector": {"matchLabels": selector}, "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "planted", "image": "registry.example/planted:1"}]}}}}


@pytest.mark.parametrize("kind, name, labels", [
    ("Deployment", "vc1-apiserver", None),  # no label of ours: found by name all the same
    ("StatefulSet", "vc1-etcd", LABELS),
])
def test_a_planted_workload_is_refused_by_name_and_left_alone(core, api_client, apiserver, tmp_path, kind, name,
                                                              labels):
    apps = kubernetes.client.AppsV1Api(api_client)
    create, read, delete = {
        "Deployment": (apps.create_namespaced_deployment, apps.read_namespaced_deployment,
                       apps.delete_namespaced_deployment),
        "StatefulSet": (apps.create_namespaced_stateful_set, apps.read_namespaced_stateful_set,
                        apps.delete_namespaced_stateful_set)}[kind]
    if kind == "StatefulSet":
        body = dict(_workload(name, labels), kind=kind)
        body["spec"]["serviceName"] = name
    else:
        body = dict(_workload(name, labels), kind=kind)
    planted = create(NS, body)
    try:
        proc = run_playbook(tmp_path, apiserver, "present")
        assert proc.returncode != 0
        assert f"[kubenest:permanent:NotOwned] {kind} {NS}/{name} already exist" in proc.stdout, proc.stdout[-3000:]
        after = read(name, NS)
        assert after.metadata.resource_version == planted.metadata.resource_version
        assert after.spec.template.spec.containers[0].image == "registry.example/planted:1"
        with pytest.raises(ApiException) as missing:  # nothing was created before the refusal
            core.read_namespaced_secret("vc1-pki", NS)
        assert missing.value.status == 404
    finally:
        delete(name, NS)
