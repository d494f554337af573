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

from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApi, KubeApiError

from kubenest_operator.kube import CRD_PATH, GLOBALNODES, VIRTUALCLUSTERS, host_connection, kubeconfig_path

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

    def matches(self, existing: dict) -> bool:
        """Whether a RoleBinding found in a namespace is the one this grant makes (roleRef cannot be changed)."""
        ref, subjects = existing.get("roleRef") or {}, existing.get("subjects") or []
        return (ref.get("kind") == "ClusterRole" and ref.get("name") == self.cluster_role and len(subjects) == 1
                and subjects[0].get("kind") == "ServiceAccount" and subjects[0].get("name") == self.account
                and subjects[0].get("namespace") == self.account_namespace)


def bindings_path(namespace: str | None = None, name: str = "") -> str:
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/rbac.authorization.k8s.io/v1{where}/rolebindings" + (f"/{name}" if name else "")


class Binder:
    def __init__(self, api: KubeApi, grant: Grant):
        self.api = api
        self.grant = grant

    def needs_rights(self, namespace: str) -> bool:
        listed = self.api.request("GET", f"{CRD_PATH}/namespaces/{namespace}/{VIRTUALCLUSTERS}", query={"limit": 1})
        return bool(listed.get("items")) or namespace in self.holding_namespaces()

    def holding_namespaces(self) -> set[str]:
        """Namespaces whose VirtualClusters GlobalNodes name (claimed, occupied, returning, held)."""
        listed = self.api.request("GET", f"{CRD_PATH}/{GLOBALNODES}")
        owners = ((item.get("status") or {}).get("virtualCluster") or "" for item in listed.get("items") or [])
        return {owner.split("/")[0] for owner in owners if owner.count("/") == 1 and all(owner.split("/"))}

    def reconcile(self, namespace: str) -> str | None:
        """Bind or unbind in one namespace as its VirtualClusters say; returns what changed, if anything."""
        wanted = self.needs_rights(namespace)
        existing = self.api.request("GET", bindings_path(namespace, BINDING), ok_missing=True)
        if existing is not None and (not wanted or not self.grant.matches(existing)):
            self.api.request("DELETE", bindings_path(namespace, BINDING), ok_missing=True)
            if not wanted:
                return "unbound"
            existing = None
        if wanted and existing is None:
            try:
                self.api.request("POST", bindings_path(namespace), query={"fieldManager": MANAGED_BY},
                                 body=self.grant.binding(namespace))
            except KubeApiError as exc:
                if exc.status != 409:  # made meanwhile by a replica before this one
                    raise
            return "bound"
        return None

    def resync(self) -> str:
        """Every namespace with a VirtualCluster or one of the binder's bindings; returns the list's version."""
        listed = self.api.request("GET", f"{CRD_PATH}/{VIRTUALCLUSTERS}")
        namespaces = {item["metadata"]["namespace"] for item in listed.get("items") or []}
        namespaces |= self.holding_namespaces()
        bound = self.api.request("GET", bindings_path(), query={"labelSelector": SELECTOR})
        namespaces |= {item["metadata"]["namespace"] for item in bound.get("items") or []
                       if item["metadata"]["name"] == BINDING}
        for namespace in sorted(namespaces):
            self._reconcile_logged(namespace)
        return listed["metadata"]["resourceVersion"]

    def _reconcile_logged(self, namespace: str) -> None:
        try:
            change = self.reconcile(namespace)
        except KubeApiError as exc:  # e.g. refused by the admission policy: the other namespaces go on
            log.warning("namespace %s: %s", namespace, exc)
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
                events = self.api.watch(f"{CRD_PATH}/{VIRTUALCLUSTERS}", {"resourceVersion": version}, resync_seconds)
                for event in events:
                    if stop.is_set():
                        events.close()
                        break
                    obj = event.get("object") or {}
                    namespace = (obj.get("metadata") or {}).get("namespace") if isinstance(obj, dict) else None
                    if namespace and event.get("type") in ("ADDED", "DELETED", "MODIFIED"):
                        self._reconcile_logged(namespace)
            except KubeApiError as exc:
                if exc.status != 410:  # 410: the watch's version is too old; resync at once
                    log.warning("%s; resyncing in %.0fs", exc, retry_seconds)
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
        connection = host_connection(kubeconfig_path(args.kubeconfig))
    except (FileNotFoundError, KubeApiError) as exc:
        print(f"kubenest-binder: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _stop(*_):  # ends a watch that waits for its next event, too
        stop.set()
        raise SystemExit(0)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop)
    log.info("binding %s to %s in namespaces with a VirtualCluster", args.grant.cluster_role, args.operator_account)
    api = KubeApi(connection, timeout=REQUEST_TIMEOUT)
    try:
        Binder(api, args.grant).run(stop, args.resync)
    finally:
        api.close()
    return 0
