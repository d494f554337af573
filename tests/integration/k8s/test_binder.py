"""kubenest-binder on a real API server, run as the default install runs it: its own program with its own service
account's token, deploy/operator/binder.yaml's RBAC and the admission policy. The operator's tenant rights (asked
of the API server as SubjectAccessReviews) follow the namespaces that hold a VirtualCluster; the binder's account,
used the way a thief of its token would, can bind nothing else."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "operator"
GROUP, VERSION = "kosmos.io", "v1alpha1"
OPERATOR = "system:serviceaccount:kubenest-system:kubenest-operator"
OPERATOR_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:kubenest-system", "system:authenticated"]
NAMESPACES = ("bind-a", "bind-b", "bind-c")
RESYNC = 10  # the binder's full pass; GlobalNode changes are seen at the next one
GLOBALNODE = "bind-gn"
# Objects with no namespace that only this module makes: removed at the end, as other modules on the same API
# server check the operator's rights without a binder (its namespaced mode).
CLUSTER_SCOPED = [("ClusterRoleBinding", "kubenest-binder"), ("ClusterRole", "kubenest-binder"),
                  ("ClusterRoleBinding", "kubenest-operator-virtualclusters"),
                  ("ClusterRole", "kubenest-operator-virtualclusters")]


def _documents(path: Path):
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            yield from (doc["items"] if doc.get("kind") == "List" else [doc])


def _apply(dynamic, path: Path) -> None:
    for doc in _documents(path):
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        try:
            resource.create(body=doc, namespace=doc["metadata"].get("namespace"))
        except ApiException as exc:
            if exc.status != 409:
                raise


def _token_client(api_client, token: str) -> kubernetes.client.ApiClient:
    base = api_client.configuration
    configuration = kubernetes.client.Configuration()
    configuration.host, configuration.ssl_ca_cert = base.host, base.ssl_ca_cert
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return kubernetes.client.ApiClient(configuration)


def _kubeconfig(apiserver, token: str, path: Path) -> Path:
    config = yaml.safe_load(apiserver.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def binder(apiserver, api_client, kosmos_crds, tmp_path_factory):
    """The binder's RBAC and admission policy applied, its account's token, and the program running with it."""
    core = kubernetes.client.CoreV1Api(api_client)
    for name in ("kubenest-system", *NAMESPACES):
        try:
            core.create_namespace({"metadata": {"name": name}})
        except ApiException as exc:
            if exc.status != 409:
                raise
    dynamic = DynamicClient(api_client)
    for name in ("rbac.yaml", "binder.yaml", "admission-policy.yaml"):
        _apply(dynamic, DEPLOY / name)
    _wait_for(lambda: _policy_enforced(api_client), "the binder's admission policy to take effect")
    token = core.create_namespaced_service_account_token("kubenest-binder", "kubenest-system", {
        "spec": {"expirationSeconds": 3600}}).status.token
    directory = tmp_path_factory.mktemp("binder")
    log = directory / "binder.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "kubenest_binder", "--kubeconfig",
                                    str(_kubeconfig(apiserver, token, directory / "kubeconfig")),
                                    f"--resync={RESYNC}"], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield _token_client(api_client, token), log
    finally:
        process.terminate()
        process.wait(30)
        for kind, name in CLUSTER_SCOPED:
            resource = dynamic.resources.get(api_version="rbac.authorization.k8s.io/v1", kind=kind)
            resource.delete(name=name)
    assert process.returncode == 0, log.read_text()
    assert token not in log.read_text()


def _policy_enforced(api_client) -> bool:
    """Whether the API server refuses, as the binder, a RoleBinding the policy forbids (dry run)."""
    impersonating = kubernetes.client.ApiClient(api_client.configuration)
    impersonating.set_default_header("Impersonate-User", "system:serviceaccount:kubenest-system:kubenest-binder")
    rbac = kubernetes.client.RbacAuthorizationV1Api(impersonating)
    try:
        rbac.create_namespaced_role_binding("bind-b", _binding("probe", "kubenest-binder"), dry_run="All")
    except ApiException as exc:
        return "kubenest-binder may only bind" in (exc.body or "")
    return False


def _binding(name: str, account: str, role: str = "kubenest-operator-tenant") -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "kubenest-system"}]}


def _wait_for(check, what: str, timeout: float = 3 * RESYNC):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def operator_can(api_client, verb, resource, namespace=None, group="") -> bool:
    review = kubernetes.client.AuthorizationV1Api(api_client).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": OPERATOR, "groups": OPERATOR_GROUPS, "resourceAttributes": {
            "verb": verb, "resource": resource, "group": group, "namespace": namespace}}})
    return review.status.allowed


def _vc(custom, namespace: str, name: str) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "virtualclusters", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "VirtualCluster",
        "metadata": {"namespace": namespace, "name": name}, "spec": {}})


def test_a_namespace_gets_the_operators_rights_with_its_first_virtualcluster_and_loses_them_with_its_last(
        api_client, binder):
    custom = kubernetes.client.CustomObjectsApi(api_client)
    assert not operator_can(api_client, "create", "secrets", "bind-a")
    _vc(custom, "bind-a", "one")
    _wait_for(lambda: operator_can(api_client, "create", "secrets", "bind-a"), "the rights in bind-a")
    assert operator_can(api_client, "create", "deployments", "bind-a", "apps")
    assert not operator_can(api_client, "create", "secrets", "bind-b")  # no VirtualCluster there
    assert not operator_can(api_client, "get", "secrets", "kube-system")
    # Every VirtualCluster is seen (kopf's watch, finalizer, status) without the tenant rights anywhere.
    assert operator_can(api_client, "watch", "virtualclusters", None, GROUP)
    assert operator_can(api_client, "patch", "virtualclusters", "bind-b", GROUP)
    made = kubernetes.client.RbacAuthorizationV1Api(api_client).read_namespaced_role_binding(
        "kubenest-operator-tenant", "bind-a")
    assert made.metadata.labels["app.kubernetes.io/managed-by"] == "kubenest-binder"

    _vc(custom, "bind-a", "two")
    custom.delete_namespaced_custom_object(GROUP, VERSION, "bind-a", "virtualclusters", "one")
    time.sleep(2)  # the binder has seen the deletion; one VirtualCluster is left
    assert operator_can(api_client, "create", "secrets", "bind-a")
    custom.delete_namespaced_custom_object(GROUP, VERSION, "bind-a", "virtualclusters", "two")
    _wait_for(lambda: not operator_can(api_client, "create", "secrets", "bind-a"), "the rights in bind-a to go")


def test_a_namespace_stays_bound_while_a_globalnode_names_one_of_its_virtualclusters(api_client, binder):
    """A VirtualCluster whose finalizer was forced away leaves its nodes held: the operator returns them with
    the namespace's rights (its teardown reads and deletes the control plane's objects there)."""
    custom = kubernetes.client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object(GROUP, VERSION, "globalnodes", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode", "metadata": {"name": GLOBALNODE},
        "spec": {"nodeIP": "198.18.9.9", "labels": {"kubernetes.io/hostname": GLOBALNODE}}})
    custom.patch_cluster_custom_object_status(GROUP, VERSION, "globalnodes", GLOBALNODE, {
        "status": {"state": "occupied", "virtualCluster": "bind-c/vanished"}})
    _wait_for(lambda: operator_can(api_client, "delete", "deployments", "bind-c", "apps"), "the rights in bind-c")
    custom.patch_cluster_custom_object_status(GROUP, VERSION, "globalnodes", GLOBALNODE, {
        "status": {"state": "free", "virtualCluster": None}})
    _wait_for(lambda: not operator_can(api_client, "delete", "deployments", "bind-c", "apps"),
              "the rights in bind-c to go")
    custom.delete_cluster_custom_object(GROUP, VERSION, "globalnodes", GLOBALNODE)


def _refused(call) -> str:
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status == 403, refused.value.body
    return refused.value.body


def test_the_binders_account_binds_nothing_but_the_operators_tenant_role(api_client, binder):
    stolen, _log = binder
    rbac = kubernetes.client.RbacAuthorizationV1Api(stolen)
    # The tenant role for itself, or for the operator under another name: the admission policy.
    body = _refused(lambda: rbac.create_namespaced_role_binding("bind-b", _binding("mine", "kubenest-binder")))
    assert "kubenest-binder may only bind" in body
    body = _refused(lambda: rbac.create_namespaced_role_binding(
        "bind-b", _binding("kubenest-operator-tenant", "kubenest-binder")))
    assert "kubenest-binder may only bind" in body
    # Another role: RBAC (it may bind that one role only).
    body = _refused(lambda: rbac.create_namespaced_role_binding(
        "bind-b", _binding("kubenest-operator-tenant", "kubenest-operator", role="cluster-admin")))
    assert "escalat" in body or "bind" in body
    # The operator's binding in a host namespace.
    body = _refused(lambda: rbac.create_namespaced_role_binding(
        "kube-system", _binding("kubenest-operator-tenant", "kubenest-operator")))
    assert "host's own namespaces" in body
    # Somebody else's RoleBinding.
    kubernetes.client.RbacAuthorizationV1Api(api_client).create_namespaced_role_binding(
        "bind-b", _binding("theirs", "kubenest-operator"))
    body = _refused(lambda: rbac.delete_namespaced_role_binding("theirs", "bind-b"))
    assert "kubenest-binder may only bind" in body
    # None of the tenant rights it hands out.
    _refused(lambda: kubernetes.client.CoreV1Api(stolen).list_namespaced_secret("bind-a"))
    _refused(lambda: kubernetes.client.CoreV1Api(stolen).list_namespaced_secret("kube-system"))
