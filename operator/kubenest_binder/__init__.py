"""``kubenest-binder``: the operator's tenant rights in exactly the namespaces that hold a VirtualCluster.

The operator's rights over Secrets, Deployments, Services and the rest of a control plane come from ClusterRole
kubenest-operator-tenant. Bound cluster-wide, they would reach every Secret of the host, kube-system's included.
The binder binds it per namespace instead: a RoleBinding made when a namespace's first VirtualCluster appears and
removed once its last one is gone and no GlobalNode names one of its VirtualClusters. A VirtualCluster being
deleted still exists until the operator's finalizer is released, so the teardown keeps its rights to the end; one
that vanished without it (its finalizer forced away) leaves its nodes held, and the operator returns them with the
namespace's rights still in place.

The binder is a separate Deployment with its own service account, allowed to read VirtualClusters and
GlobalNodes, to create and delete RoleBindings and to bind that one ClusterRole; the admission policy
kubenest-binder-rolebindings confines what it creates to this one RoleBinding, for the operator's account alone.
It holds no tenant rights itself.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from dataclasses import dataclass

import kubernetes
from kubernetes.client.rest import ApiException

from kubenest_operator.kube import GLOBALNODES, GROUP, VERSION, VIRTUALCLUSTERS, kubeconfig_path, load_configuration
from kubenest_operator.sdk_config import KubeClientError

log = logging.getLogger("kubenest_binder")

BINDING = "kubenest-operator-tenant"
MANAGED_BY = "kubenest-binder"
SELECTOR = f"app.kubernetes.io/managed-by={MANAGED_BY}"
REQUEST_TIMEOUT = 30


@dataclass(frozen=True)
class Grant:
    """What is bound in each namespace, and to whom."""
    cluster_role: str = BINDING
    account_namespace: str = "kubenest-system"
    account: str = "kubenest-operator"

    def binding(self, namespace: str) -> dict:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": BINDING, "namespace": namespace, "labels": {
                "app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/part-of": "kosmos.kubenest"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": self.cluster_role},
            "subjects": [{"kind": "ServiceAccount", "name": self.account, "namespace": self.account_namespace}],
        }

    def matches(self, existing) -> bool:
        """Whether a RoleBinding found in a namespace is the one this grant makes (roleRef cannot be changed)."""
        ref, subjects = existing.role_ref, existing.subjects or []
        return (ref.kind == "ClusterRole" and ref.name == self.cluster_role and len(subjects) == 1
                and subjects[0].kind == "ServiceAccount" and subjects[0].name == self.account
                and subjects[0].namespace == self.account_namespace)


class Binder:
    def __init__(self, api_client: kubernetes.client.ApiClient, grant: Grant):
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
        self.grant = grant

    def needs_rights(self, namespace: str) -> bool:
        listed = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, VIRTUALCLUSTERS, limit=1,
                                                           _request_timeout=REQUEST_TIMEOUT)
        return bool(listed.get("items")) or namespace in self.holding_namespaces()

    def holding_namespaces(self) -> set[str]:
        """Namespaces whose VirtualClusters GlobalNodes name (claimed, occupied, returning, held)."""
        listed = self.custom.list_cluster_custom_object(GROUP, VERSION, GLOBALNODES, _request_timeout=REQUEST_TIMEOUT)
        owners = ((item.get("status") or {}).get("virtualCluster") or "" for item in listed.get("items") or [])
        return {owner.split("/")[0] for owner in owners if owner.count("/") == 1 and all(owner.split("/"))}

    def reconcile(self, namespace: str) -> str | None:
        """Bind or unbind in one namespace as its VirtualClusters say; returns what changed, if anything."""
        wanted = self.needs_rights(namespace)
        try:
            existing = self.rbac.read_namespaced_role_binding(BINDING, namespace, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise
            existing = None
        if existing is not None and (not wanted or not self.grant.matches(existing)):
            self._delete(namespace)
            if not wanted:
                return "unbound"
            existing = None
        if wanted and existing is None:
            try:
                self.rbac.create_namespaced_role_binding(namespace, self.grant.binding(namespace),
                                                         field_manager=MANAGED_BY, _request_timeout=REQUEST_TIMEOUT)
            except ApiException as exc:
                if exc.status != 409:  # made meanwhile by a replica before this one
                    raise
            return "bound"
        return None

    def _delete(self, namespace: str) -> None:
        try:
            self.rbac.delete_namespaced_role_binding(BINDING, namespace, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def resync(self) -> str:
        """Every namespace with a VirtualCluster or one of the binder's bindings; returns the list's version."""
        listed = self.custom.list_cluster_custom_object(GROUP, VERSION, VIRTUALCLUSTERS,
                                                        _request_timeout=REQUEST_TIMEOUT)
        namespaces = {item["metadata"]["namespace"] for item in listed.get("items") or []}
        namespaces |= self.holding_namespaces()
        bound = self.rbac.list_role_binding_for_all_namespaces(label_selector=SELECTOR,
                                                               _request_timeout=REQUEST_TIMEOUT)
        namespaces |= {item.metadata.namespace for item in bound.items if item.metadata.name == BINDING}
        for namespace in sorted(namespaces):
            self._reconcile_logged(namespace)
        return listed["metadata"]["resourceVersion"]

    def _reconcile_logged(self, namespace: str) -> None:
        try:
            change = self.reconcile(namespace)
        except ApiException as exc:  # e.g. refused by the admission policy: the other namespaces go on
            log.warning("namespace %s: API error %s (%s): %s", namespace, exc.status, exc.reason, exc.body)
            return
        if change == "bound":
            log.info("namespace %s: holds a VirtualCluster or nodes of one; %s bound to the operator", namespace,
                     self.grant.cluster_role)
        elif change == "unbound":
            log.info("namespace %s: no VirtualCluster left; %s unbound", namespace, self.grant.cluster_role)

    def run(self, stop: threading.Event, resync_seconds: int, retry_seconds: float = 5.0) -> None:
        """Resync, then follow VirtualCluster events until the watch ends (at most resync_seconds); again until
        stop is set. Errors are logged and retried: a namespace is never left bound past the next resync."""
        while not stop.is_set():
            try:
                version = self.resync()
                watch = kubernetes.watch.Watch()
                for event in watch.stream(self.custom.list_cluster_custom_object, GROUP, VERSION, VIRTUALCLUSTERS,
                                          resource_version=version, timeout_seconds=resync_seconds,
                                          _request_timeout=resync_seconds + REQUEST_TIMEOUT):
                    if stop.is_set():
                        watch.stop()
                        break
                    obj = event.get("object") or {}
                    namespace = (obj.get("metadata") or {}).get("namespace") if isinstance(obj, dict) else None
                    if namespace and event.get("type") in ("ADDED", "DELETED", "MODIFIED"):
                        self._reconcile_logged(namespace)
            except ApiException as exc:
                if exc.status != 410:  # 410: the watch's version is too old; resync at once
                    log.warning("API error %s (%s); resyncing in %.0fs", exc.status, exc.reason, retry_seconds)
                    stop.wait(retry_seconds)
            except Exception as exc:  # a dropped connection: resync, which repairs whatever was missed
                log.warning("%s: %s; resyncing in %.0fs", type(exc).__name__, exc, retry_seconds)
                stop.wait(retry_seconds)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kubenest-binder", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, in-cluster, ~/.kube/config")
    parser.add_argument("--cluster-role", default=BINDING, help="the ClusterRole bound (default %(default)s)")
    parser.add_argument("--operator-account", default="kubenest-system/kubenest-operator",
                        help="NAMESPACE/NAME of the operator's service account (default %(default)s)")
    parser.add_argument("--resync", type=int, default=300,
                        help="seconds between full resyncs (each watch ends after this long); default %(default)s")
    args = parser.parse_args(argv)
    namespace, _slash, name = args.operator_account.partition("/")
    if not namespace or not name or "/" in name:
        parser.error(f"--operator-account must be NAMESPACE/NAME, got {args.operator_account!r}")
    if args.resync < 10:
        parser.error("--resync must be at least 10 seconds")
    args.grant = Grant(args.cluster_role, namespace, name)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        configuration = load_configuration(kubeconfig_path(args.kubeconfig))
    except (FileNotFoundError, KubeClientError, kubernetes.config.ConfigException) as exc:
        print(f"kubenest-binder: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _stop(*_):  # ends a watch that waits for its next event, too
        stop.set()
        raise SystemExit(0)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    log.info("binding %s to %s in namespaces with a VirtualCluster", args.grant.cluster_role, args.operator_account)
    with kubernetes.client.ApiClient(configuration) as api_client:
        Binder(api_client, args.grant).run(stop, args.resync)
    return 0
