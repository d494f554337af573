"""The operator's deploy manifests on a real API server: namespaced rights (`kubectl auth can-i` as the
operator's service account, through SubjectAccessReviews) and the admission policy on what it may create."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import kubernetes
import pytest
import yaml
from ansible_collections.kosmos.kubenest.plugins.filter.hosted_manifest import hosted_manifest
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "operator"
SA = "system:serviceaccount:kubenest-system:kubenest-operator"
SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:kubenest-system", "system:authenticated"]
NAMESPACES = ("kubenest-system", "tenants", "elsewhere")


def _documents(path: Path):
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            yield from (doc["items"] if doc.get("kind") == "List" else [doc])


@pytest.fixture(scope="module")
def deployed(api_client):
    core = kubernetes.client.CoreV1Api(api_client)
    for name in NAMESPACES:
        try:
            core.create_namespace({"metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise
    dynamic = DynamicClient(api_client)
    for path in (DEPLOY / "rbac.yaml", DEPLOY / "namespaced" / "tenant-namespaces.yaml",
                 DEPLOY / "admission-policy.yaml"):
        for doc in _documents(path):
            resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            try:
                resource.create(body=doc, namespace=doc["metadata"].get("namespace"))
            except ApiException as exc:
                if exc.status != 409:
                    raise
    return api_client


def can_i(api_client, verb, resource, namespace=None, group="", subresource=None, name=None) -> bool:
    review = kubernetes.client.AuthorizationV1Api(api_client).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": SA, "groups": SA_GROUPS, "resourceAttributes": {
            "verb": verb, "resource": resource, "group": group, "namespace": namespace,
            "subresource": subresource, "name": name}}})
    return review.status.allowed


@pytest.mark.parametrize(("verb", "resource", "namespace", "group", "allowed"), [
    ("create", "deployments", "tenants", "apps", True),
    ("create", "statefulsets", "tenants", "apps", True),
    ("create", "networkpolicies", "tenants", "networking.k8s.io", True),
    ("create", "networkpolicies", "kube-system", "networking.k8s.io", False),
    ("create", "poddisruptionbudgets", "tenants", "policy", True),
    ("create", "poddisruptionbudgets", "kube-system", "policy", False),
    ("get", "secrets", "tenants", "", True),
    ("watch", "virtualclusters", "tenants", "kosmos.io", True),
    ("create", "secrets", "kubenest-system", "", True),      # node stash
    ("patch", "nodes", None, "", True),                       # promotion
    ("create", "nodes", None, "", True),                      # a returning node, cordoned and tainted first
    ("patch", "globalnodes", None, "kosmos.io", True),
    ("patch", "persistentvolumes", None, "", True),           # a wiped local volume offered again
    ("create", "persistentvolumes", None, "", False),         # no volume pointing at a path of its choice
    ("list", "storageclasses", None, "storage.k8s.io", True),
    ("delete", "persistentvolumeclaims", "kube-system", "", False),
    ("create", "deployments", "elsewhere", "apps", False),    # not a namespace it serves
    ("get", "secrets", "elsewhere", "", False),
    ("create", "deployments", "kube-system", "apps", False),
    ("get", "secrets", "kube-system", "", False),
    ("list", "secrets", "kube-system", "", False),
    ("create", "secrets", "kube-system", "", True),          # a returned node's host bootstrap token
    ("delete", "secrets", "kube-system", "", True),
    ("create", "deployments", "kubenest-system", "apps", False),
    ("create", "daemonsets", "tenants", "apps", False),
    ("create", "pods", "tenants", "", False),
    ("create", "clusterrolebindings", None, "rbac.authorization.k8s.io", False),
    ("create", "serviceaccounts", "tenants", "", False),
    ("watch", "virtualclusters", None, "kosmos.io", False),   # no cluster-wide watch in namespaced mode
])
def test_namespaced_mode_rights(deployed, verb, resource, namespace, group, allowed):
    assert can_i(deployed, verb, resource, namespace, group) is allowed


@pytest.mark.parametrize(("verb", "resource", "subresource", "name", "allowed"), [
    # a returned node's first host client certificate, approved by the run for its own name
    ("list", "certificatesigningrequests", None, None, True),
    ("update", "certificatesigningrequests", "approval", None, True),
    ("approve", "signers", None, "kubernetes.io/kube-apiserver-client-kubelet", True),
    ("approve", "signers", None, "kubernetes.io/kube-apiserver-client", False),  # no other client certificate
    ("approve", "signers", None, "kubernetes.io/kubelet-serving", False),
    ("create", "certificatesigningrequests", None, None, False),
    ("delete", "certificatesigningrequests", None, None, False),
    ("get", "clusterrolebindings", None, "kubenest:returning-node-bootstrap", True),
    ("get", "clusterrolebindings", None, "cluster-admin", False),
])
def test_certificate_rights(deployed, verb, resource, subresource, name, allowed):
    assert can_i(deployed, verb, resource, None, "certificates.k8s.io" if "cert" in resource or resource == "signers"
                 else "rbac.authorization.k8s.io", subresource, name) is allowed


def _as_operator(api_client):
    impersonating = kubernetes.client.ApiClient(copy.copy(api_client.configuration))
    impersonating.set_default_header("Impersonate-User", SA)
    impersonating.set_default_header("Impersonate-Group", SA_GROUPS[0])
    return kubernetes.client.AppsV1Api(impersonating)


def _pod_template(**pod):
    spec = {"containers": [{"name": "c", "image": "kubenest.local/pause:3.10"}], "automountServiceAccountToken": False}
    for key, value in pod.items():
        if key == "container":
            spec["containers"][0].update(value)
        else:
            spec[key] = value
    return {"metadata": {"labels": {"app": "x"}}, "spec": spec}


def _deployment(name, **pod):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": _pod_template(**pod)}}


def _statefulset(name, **pod):
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": name, "selector": {"matchLabels": {"app": "x"}}, "template": _pod_template(**pod)}}


def _refused(apps, body) -> str:
    create, delete = ((apps.create_namespaced_deployment, apps.delete_namespaced_deployment)
                      if body["kind"] == "Deployment"
                      else (apps.create_namespaced_stateful_set, apps.delete_namespaced_stateful_set))
    deadline = time.monotonic() + 30  # the policy takes effect once the API server has loaded it
    while True:
        try:
            create("tenants", body)
        except ApiException as exc:
            if exc.status in (403, 422) and "kubenest-operator-workloads" in exc.body:
                return exc.body
            raise
        delete(body["metadata"]["name"], "tenants")
        assert time.monotonic() < deadline, f"{body['kind']} {body['metadata']['name']} was never refused"
        time.sleep(1)


@pytest.mark.parametrize(("name", "pod", "says"), [
    ("privileged", {"container": {"securityContext": {"privileged": True}}}, "privileged"),
    ("caps", {"container": {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}}, "capabilities"),
    ("host-pid", {"hostPID": True}, "host namespaces"),
    ("host-net", {"hostNetwork": True}, "host namespaces"),
    ("host-path", {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, "hostPath"),
    ("foreign-image", {"container": {"image": "evil.example/x:1"}}, "images from kubenest.local"),
    ("init", {"initContainers": [{"name": "i", "image": "kubenest.local/x:1",
                                  "securityContext": {"privileged": True}}]}, "privileged"),
    ("nfs", {"volumes": [{"name": "n", "nfs": {"server": "198.18.0.1", "path": "/"}}]},
     "only create pods with volumes"),
    ("token", {"volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]},
     "only create pods with volumes"),
    ("own-sa", {"serviceAccountName": "builder"}, "without a service account"),
    ("automount", {"automountServiceAccountToken": True}, "automountServiceAccountToken false"),
    ("host-port", {"container": {"ports": [{"containerPort": 80, "hostPort": 8080}]}}, "host ports"),
    ("unconfined", {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "seccomp switched off"),
    ("unconfined-c", {"container": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}},
     "seccomp switched off"),
])
def test_the_policy_refuses_dangerous_workloads_from_the_operator(deployed, name, pod, says):
    apps = _as_operator(deployed)
    assert says in _refused(apps, _deployment(name, **pod))
    assert says in _refused(apps, _statefulset(name, **pod))


def test_the_real_control_plane_passes_and_others_are_not_limited(deployed):
    apps = _as_operator(deployed)
    _refused(apps, _deployment("warm-up", hostPID=True))  # the policy is live
    vc = {"name": "vc1", "namespace": "tenants", "labels": {"kosmos.io/virtualcluster": "vc1"},
          "selector": {"kosmos.io/virtualcluster": "vc1"}, "owner_references": []}
    settings = {"image": "kubenest.local/etcd:v3.6.16", "advertise_ip": "10.96.0.20",
                "image_repository": "kubenest.local", "version": "v1.36.3",
                "etcd_endpoint": "https://10.96.0.20:2379", "service_cidr": "198.18.128.0/17",
                "pod_cidr": "198.18.64.0/18", "konnectivity_image": "kubenest.local/konnectivity-server:v0.34.0"}
    apps.create_namespaced_stateful_set("tenants", hosted_manifest("etcd", vc, settings))
    for component in ("apiserver", "controller-manager", "scheduler"):
        apps.create_namespaced_deployment("tenants", hosted_manifest(component, vc, settings))
    # An administrator is not the operator: the policy does not apply to them.
    admin = kubernetes.client.AppsV1Api(deployed)
    admin.create_namespaced_deployment("elsewhere", _deployment("admin-privileged",
                                                                container={"securityContext": {"privileged": True}}))


def _bootstrap_token(name, token_type="bootstrap.kubernetes.io/token", labels=None, expires_in=600,
                     groups="system:bootstrappers:kubenest:returning", expiration_format="%Y-%m-%dT%H:%M:%SZ") -> dict:
    data = {"token-id": name[-6:], "token-secret": "0123456789abcdef"}
    if expires_in is not None:
        data["expiration"] = time.strftime(expiration_format, time.gmtime(time.time() + expires_in))
    if groups is not None:
        data["auth-extra-groups"] = groups
    return {"metadata": {"name": name, "labels": {"kosmos.io/bootstrap-token": "true"} if labels is None else labels},
            "type": token_type, "stringData": data}


def test_in_kube_system_the_operator_makes_and_removes_only_its_bootstrap_tokens(deployed):
    impersonating = kubernetes.client.ApiClient(copy.copy(deployed.configuration))
    impersonating.set_default_header("Impersonate-User", SA)
    impersonating.set_default_header("Impersonate-Group", SA_GROUPS[0])
    operator = kubernetes.client.CoreV1Api(impersonating)
    admin = kubernetes.client.CoreV1Api(deployed)

    def refused(call, *args) -> str:
        with pytest.raises(ApiException) as caught:
            call(*args)
        return caught.value.body

    deadline = time.monotonic() + 30  # the policy takes effect once the API server has loaded it
    while True:
        try:
            operator.create_namespaced_secret("kube-system", {"metadata": {"name": "not-a-token"},
                                                              "stringData": {"k": "v"}})
        except ApiException as exc:
            assert exc.status in (403, 422) and "kubenest-operator-bootstrap-tokens" in exc.body, exc.body
            break
        admin.delete_namespaced_secret("not-a-token", "kube-system")
        assert time.monotonic() < deadline, "an Opaque Secret in kube-system was never refused"
        time.sleep(1)
    assert "bootstrap-tokens" in refused(operator.create_namespaced_secret, "kube-system",
                                         _bootstrap_token("bootstrap-token-unlab1", labels={}))
    assert "bootstrap-tokens" in refused(operator.create_namespaced_secret, "kube-system",
                                         _bootstrap_token("other-name-abcdef"))

    assert "an expiration is required" in refused(operator.create_namespaced_secret, "kube-system",
                                                  _bootstrap_token("bootstrap-token-never1", expires_in=None))
    # A token that outlives the bound by a minute, or whose expiration the policy cannot read as written: refused.
    assert "expire within an hour" in refused(operator.create_namespaced_secret, "kube-system",
                                              _bootstrap_token("bootstrap-token-long01", expires_in=3660))
    assert "expire within an hour" in refused(operator.create_namespaced_secret, "kube-system",
                                              _bootstrap_token("bootstrap-token-year01", expires_in=366 * 86400))
    for number, odd in enumerate(("%Y-%m-%dT%H:%M:%S+00:00", "%Y-%m-%d %H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.000Z")):
        assert "expire within an hour" in refused(operator.create_namespaced_secret, "kube-system", _bootstrap_token(
            f"bootstrap-token-fmt0{number}", expiration_format=odd))
    # Within the bound, to the minute: taken (the policy decodes the date, not only its shape).
    operator.create_namespaced_secret("kube-system", _bootstrap_token("bootstrap-token-hour01", expires_in=3540))
    operator.delete_namespaced_secret("bootstrap-token-hour01", "kube-system")
    assert "may only name the groups" in refused(
        operator.create_namespaced_secret, "kube-system",
        _bootstrap_token("bootstrap-token-group1", groups="system:bootstrappers:kubenest,system:bootstrappers:x"))
    assert "may only name the groups" in refused(operator.create_namespaced_secret, "kube-system",
                                                 _bootstrap_token("bootstrap-token-group2", groups="system:masters"))
    # Groups a host approves for any node name (this collection's own join group, kubeadm's): never.
    assert "may only name the groups" in refused(
        operator.create_namespaced_secret, "kube-system",
        _bootstrap_token("bootstrap-token-group3", groups="system:bootstrappers:kubenest"))
    assert "may only name the groups" in refused(
        operator.create_namespaced_secret, "kube-system",
        _bootstrap_token("bootstrap-token-group4", groups="system:bootstrappers:kubeadm:default-node-token"))
    operator.create_namespaced_secret("kube-system", _bootstrap_token("bootstrap-token-kbnst1"))
    operator.delete_namespaced_secret("bootstrap-token-kbnst1", "kube-system")
    admin.create_namespaced_secret("kube-system", {"metadata": {"name": "admins-own"}, "stringData": {"k": "v"}})
    assert "bootstrap-tokens" in refused(operator.delete_namespaced_secret, "admins-own", "kube-system")
    assert refused(operator.read_namespaced_secret, "admins-own", "kube-system")  # 403: no reading there
    admin.delete_namespaced_secret("admins-own", "kube-system")
