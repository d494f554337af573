"""Pod Security admission of a real API server accepts the pods kosmos.kubenest runs: the hosted control plane
under `baseline` (the level of tenant control-plane namespaces), the operator under `restricted` (the level of
kubenest-system); the shipped namespaces carry those labels."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import kubernetes
import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest
from kubernetes.client.rest import ApiException

REPO = Path(__file__).resolve().parents[3]
ENFORCE = "pod-security.kubernetes.io/enforce"
SETTINGS = {"image": "kubenest.local/etcd:v3.6.16", "advertise_ip": "10.96.0.20",
            "image_repository": "kubenest.local", "version": "v1.36.3", "etcd_endpoint": "https://10.96.0.20:2379",
            "service_cidr": "198.18.128.0/17", "pod_cidr": "198.18.64.0/18", "node_cidr_mask": 24,
            "node_selector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}


@pytest.fixture(scope="module")
def namespaces(api_client):
    core = kubernetes.client.CoreV1Api(api_client)
    made = {}
    for level in ("baseline", "restricted"):
        name = f"psa-{level}-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": name, "labels": {ENFORCE: level,
                                                                     f"{ENFORCE}-version": "latest"}}})
        # No controller-manager here to make it: pods need their service account to exist.
        core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
        made[level] = name
    yield made
    for name in made.values():
        core.delete_namespace(name)


def admitted(api_client, namespace: str, pod_spec: dict) -> str:
    """'' when a Pod with this spec would be created in the namespace (server-side dry run), else the refusal."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": namespace},
            "spec": pod_spec}
    try:
        kubernetes.client.CoreV1Api(api_client).create_namespaced_pod(namespace, body, dry_run="All")
    except ApiException as exc:
        return exc.body or str(exc)
    return ""


def control_plane_pod(component: str, namespace: str) -> dict:
    vc = {"name": "vc1", "namespace": namespace, "labels": {"kosmos.io/virtualcluster": "vc1"},
          "selector": {"kosmos.io/virtualcluster": "vc1"},
          "owner_references": [{"apiVersion": "kosmos.io/v1alpha1", "kind": "VirtualCluster", "name": "vc1",
                                "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]}
    manifest = hosted_manifest(component, vc, SETTINGS)
    pod = manifest["spec"]["template"]["spec"]
    # As the StatefulSet controller makes it: each claim template becomes a volume of the pod's own claim.
    for claim in manifest["spec"].get("volumeClaimTemplates", []):
        name = claim["metadata"]["name"]
        pod["volumes"].append({"name": name, "persistentVolumeClaim": {"claimName": f"{name}-vc1-etcd-0"}})
    return pod


@pytest.mark.parametrize("component", ["etcd", "apiserver", "controller-manager", "scheduler"])
def test_control_plane_pods_pass_baseline_and_a_privileged_variant_does_not(api_client, namespaces, component):
    ns = namespaces["baseline"]
    pod = control_plane_pod(component, ns)
    assert admitted(api_client, ns, pod) == ""

    for breach, field in (({"hostNetwork": True}, "host namespaces"), ({"hostPID": True}, "host namespaces")):
        refusal = admitted(api_client, ns, {**pod, **breach})
        assert "violates PodSecurity" in refusal and field in refusal, refusal
    privileged = copy.deepcopy(pod)
    privileged["containers"][0]["securityContext"] = {"privileged": True}
    assert "privileged" in admitted(api_client, ns, privileged)


def test_operator_pod_passes_restricted(api_client, namespaces):
    deployment = yaml.safe_load((REPO / "deploy" / "operator" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    pod.pop("serviceAccountName", None)  # not in this namespace; the account is not what is checked here
    assert admitted(api_client, namespaces["restricted"], pod) == ""
    loosened = copy.deepcopy(pod)
    del loosened["securityContext"]["runAsNonRoot"]
    loosened["securityContext"]["runAsUser"] = 0
    assert "violates PodSecurity" in admitted(api_client, namespaces["restricted"], loosened)


def test_shipped_namespaces_carry_their_levels():
    system = yaml.safe_load((REPO / "deploy" / "operator" / "namespace.yaml").read_text())
    assert system["metadata"]["labels"][ENFORCE] == "restricted"
    served = yaml.safe_load((REPO / "deploy" / "operator" / "namespaced" / "tenant-namespaces.yaml").read_text())
    tenants = [d for d in served["items"] if d["kind"] == "Namespace"]
    assert tenants and all(t["metadata"]["labels"][ENFORCE] == "baseline" for t in tenants)
