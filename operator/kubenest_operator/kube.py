"""Kubernetes API access: one connection for kopf and for the operator's own calls.

The operator's own calls use the collection's client (module_utils/kube_api, the one its modules and plugins use)
in worker threads, so the event loop that serves kopf never blocks on them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import Connection, KubeApiError

from .clients import Lender, TenantClients
from .shards import Shard

GROUP, VERSION = "kosmos.io", "v1alpha1"
VIRTUALCLUSTERS, GLOBALNODES = "virtualclusters", "globalnodes"
FIELD_MANAGER = "kubenest-operator"
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
REQUEST_TIMEOUT = 30
TENANT_TIMEOUT_S = 10
CRD_PATH = f"/apis/{GROUP}/{VERSION}"


def kubeconfig_path(explicit: str | None) -> str | None:
    """--kubeconfig, else $KUBECONFIG, else in-cluster (None), else ~/.kube/config."""
    if explicit:
        return str(Path(explicit).expanduser().resolve())
    from_env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if from_env:
        return str(Path(from_env).expanduser().resolve())
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    default = Path.home() / ".kube" / "config"
    if default.is_file():
        return str(default)
    raise FileNotFoundError("no --kubeconfig, no $KUBECONFIG, not in a cluster and no ~/.kube/config")


def host_connection(kubeconfig: str | None) -> Connection:
    """The host's server and credentials (a kubeconfig path, None: in-cluster). An exec plugin in the kubeconfig
    runs as it does for the playbooks' tasks. Raises kube_api.ConfigError."""
    return Connection.in_cluster() if kubeconfig is None else Connection.from_kubeconfig(kubeconfig)


def _text(pem: bytes | None) -> str | None:
    return pem.decode() if pem else None


def connection_info(connection: Connection) -> kopf.ConnectionInfo:
    """The same credentials for kopf's own client. kopf logs in again when the server answers 401; by then an
    exec plugin's expired credential has been renewed (the connection asks the plugin for its current one)."""
    cert, key = connection.client_pair()
    token = connection.bearer()
    return kopf.ConnectionInfo(
        server=connection.server, ca_data=_text(connection.ca_pem), insecure=connection.insecure or None,
        token=token, scheme="Bearer" if token else None,
        certificate_data=_text(cert), private_key_data=_text(key), proxy_url=connection.proxy_url,
    )


def http_error(exc: KubeApiError) -> str:
    """An API error for a log line or a status message: the answer's code, or why there was none."""
    return f"HTTP {exc.status} {exc.reason or ''}".rstrip() if exc.status else str(exc)


def is_status(exc: BaseException, *codes: int) -> bool:
    return isinstance(exc, KubeApiError) and exc.status in codes


T = TypeVar("T")


async def unless_gone(request: Awaitable[T]) -> T | None:
    """The answer, or None where the object is not there (404); any other error is raised."""
    try:
        return await request
    except KubeApiError as exc:
        if exc.status == 404:
            return None
        raise


def vc_path(namespace: str, name: str, subresource: str = "") -> str:
    return f"{CRD_PATH}/namespaces/{namespace}/{VIRTUALCLUSTERS}/{name}" + (f"/{subresource}" if subresource else "")


def gn_path(name: str = "", subresource: str = "") -> str:
    return f"{CRD_PATH}/{GLOBALNODES}" + (f"/{name}" if name else "") + (f"/{subresource}" if subresource else "")


class Api:
    """The few calls the operator makes itself, as coroutines; they raise kube_api.KubeApiError."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.host = Lender(connection, REQUEST_TIMEOUT, keep=8)
        self.tenants = TenantClients(TENANT_TIMEOUT_S)  # the looks' clients of each tenant's API

    def request_now(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request, blocking (for threads of their own: the metrics' server, peering at start)."""
        with self.host.client() as api:
            return api.request(method, path, **kwargs)

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.request_now, method, path, **kwargs)

    async def _patch(self, path: str, patch: dict[str, Any], content_type: str = MERGE_PATCH,
                     force: bool = False) -> dict[str, Any]:
        query = {"fieldManager": FIELD_MANAGER, "force": "true" if force else None}
        return await self._request("PATCH", path, query=query, body=patch, content_type=content_type)

    # VirtualClusters
    async def get_virtualcluster(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._request("GET", vc_path(namespace, name))

    async def patch_virtualcluster_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._patch(vc_path(namespace, name, "status"), patch)

    async def apply_virtualcluster_conditions(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        return await self._patch(vc_path(meta["namespace"], meta["name"], "status"), body, APPLY_PATCH, force=True)

    async def patch_virtualcluster(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._patch(vc_path(namespace, name), patch)

    async def list_virtualclusters(self, namespaces: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """In every namespace, or in those matching the given kopf patterns (the operator's namespaced mode)."""
        return await asyncio.to_thread(self.virtualclusters_now, namespaces)

    def virtualclusters_now(self, namespaces: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """list_virtualclusters for a thread of its own (the metrics' server)."""
        try:
            items = self.request_now("GET", f"{CRD_PATH}/{VIRTUALCLUSTERS}").get("items") or []
        except KubeApiError as exc:
            if exc.status != 403 or not namespaces:
                raise
            # Rights in some namespaces only (deploy/operator/namespaced): the ones named outright.
            return [item for namespace in namespaces if not any(c in namespace for c in "*?!,")
                    for item in self.request_now("GET", f"{CRD_PATH}/namespaces/{namespace}/{VIRTUALCLUSTERS}")
                    .get("items") or []]
        shard = Shard(namespaces)
        return [item for item in items if shard.serves((item.get("metadata") or {}).get("namespace") or "")]

    async def has_tenant_rights(self, namespace: str) -> bool:
        """Whether the operator may write a control plane's Secrets here (its tenant rights, which
        kubenest-binder grants per namespace in the default install)."""
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"namespace": namespace, "verb": "create", "resource": "secrets"}}}
        result = await self._request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review)
        return bool((result.get("status") or {}).get("allowed"))

    async def read_secret_data(self, namespace: str, name: str) -> dict[str, str]:
        secret = await self._request("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
        return dict(secret.get("data") or {})  # values stay base64, exactly as spec.kubeconfig wants them

    # GlobalNodes
    async def get_globalnode(self, name: str) -> dict[str, Any]:
        return await self._request("GET", gn_path(name))

    async def create_globalnode(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._request("POST", gn_path(), query={"fieldManager": FIELD_MANAGER}, body=body)

    async def patch_globalnode(self, name: str, patch: dict[str, Any], status: bool = False) -> dict[str, Any]:
        return await self._patch(gn_path(name, "status" if status else ""), patch)

    async def list_globalnodes(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.globalnodes_now)

    def globalnodes_now(self) -> list[dict[str, Any]]:
        return self.request_now("GET", gn_path()).get("items") or []

    async def list_nodes(self) -> list[dict[str, Any]]:
        return (await self._request("GET", "/api/v1/nodes")).get("items") or []

    async def virtualcluster_exists(self, namespace: str, name: str) -> bool:
        return await self._request("GET", vc_path(namespace, name), ok_missing=True) is not None

    async def delete_globalnode(self, name: str, resource_version: str) -> None:
        options = {"preconditions": {"resourceVersion": resource_version}}
        await self._request("DELETE", gn_path(name), body=options)

    def close(self) -> None:
        self.host.close()
        self.tenants.close()
