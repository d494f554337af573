"""Kubernetes API access: one configuration for kopf and for the operator's own calls.

The operator's own calls use the official (synchronous) client in worker threads, so the event loop that
serves kopf never blocks on them.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import kopf
import kubernetes
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import Connection
from kubernetes.client.rest import ApiException

from kubenest_operator import sdk_config

from .clients import Lender, TenantClients

GROUP, VERSION = "kosmos.io", "v1alpha1"
VIRTUALCLUSTERS, GLOBALNODES = "virtualclusters", "globalnodes"
FIELD_MANAGER = "kubenest-operator"
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
REQUEST_TIMEOUT = 30
TENANT_TIMEOUT_S = 10


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


def load_configuration(kubeconfig: str | None) -> kubernetes.client.Configuration:
    """The collection's loader, so an exec plugin in the kubeconfig runs as it does for the playbooks' tasks.
    Raises sdk_config.KubeClientError."""
    if kubeconfig is None:
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_incluster_config(client_configuration=configuration)
        return configuration
    return sdk_config.load_configuration(kubeconfig)


def connection_info(configuration: kubernetes.client.Configuration) -> kopf.ConnectionInfo:
    """The same credentials for kopf's own client (as kopf.login_via_client does, for our configuration). kopf
    logs in again when the server answers 401; by then an exec plugin's expired credential has been renewed
    (reading the token runs the configuration's refresh hook)."""
    header = (configuration.get_api_key_with_prefix("BearerToken")
              or configuration.get_api_key_with_prefix("authorization"))
    parts = header.split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return kopf.ConnectionInfo(
        server=configuration.host, ca_path=configuration.ssl_ca_cert, insecure=not configuration.verify_ssl,
        username=configuration.username or None, password=configuration.password or None,
        scheme=scheme, token=token,
        certificate_path=configuration.cert_file, private_key_path=configuration.key_file,
    )


def is_status(exc: BaseException, *codes: int) -> bool:
    return isinstance(exc, ApiException) and exc.status in codes


def host_connection(kubeconfig: str | None) -> Connection:
    """The same server and credentials for the collection's client (the looks' reads, clients.py). Raises
    kube_api.ConfigError."""
    return Connection.in_cluster() if kubeconfig is None else Connection.from_kubeconfig(kubeconfig)


class Api:
    """The few calls the operator makes itself, as coroutines."""

    def __init__(self, configuration: kubernetes.client.Configuration, connection: Connection):
        # The looks' reads, many per minute per virtual cluster, go through kept-alive collection clients.
        self.host = Lender(connection, REQUEST_TIMEOUT, keep=8)
        self.tenants = TenantClients(TENANT_TIMEOUT_S)
        self.client = kubernetes.client.ApiClient(configuration)
        self.custom = kubernetes.client.CustomObjectsApi(self.client)
        self.core = kubernetes.client.CoreV1Api(self.client)
        self.authorization = kubernetes.client.AuthorizationV1Api(self.client)

    async def _call(self, fn, *args, **kwargs) -> Any:
        kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
        return await asyncio.to_thread(fn, *args, **kwargs)

    # VirtualClusters
    async def get_virtualcluster(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION, namespace,
                                VIRTUALCLUSTERS, name)

    async def patch_virtualcluster_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self.custom.patch_namespaced_custom_object_status, GROUP, VERSION, namespace,
                                VIRTUALCLUSTERS, name, patch, field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH)

    async def apply_virtualcluster_conditions(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        return await self._call(self.custom.patch_namespaced_custom_object_status, GROUP, VERSION,
                                meta["namespace"], VIRTUALCLUSTERS, meta["name"], body,
                                field_manager=FIELD_MANAGER, force=True, _content_type=APPLY_PATCH)

    async def patch_virtualcluster(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self.custom.patch_namespaced_custom_object, GROUP, VERSION, namespace,
                                VIRTUALCLUSTERS, name, patch, field_manager=FIELD_MANAGER, _content_type=MERGE_PATCH)

    async def list_virtualclusters(self, namespaces: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """In every namespace, or in the given ones (the operator's namespaced mode)."""
        return await asyncio.to_thread(self.virtualclusters_now, namespaces)

    def virtualclusters_now(self, namespaces: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """list_virtualclusters for a thread of its own (the metrics' server)."""
        if not namespaces:
            listed = self.custom.list_cluster_custom_object(GROUP, VERSION, VIRTUALCLUSTERS,
                                                            _request_timeout=REQUEST_TIMEOUT)
            return listed.get("items") or []
        items: list[dict[str, Any]] = []
        for namespace in namespaces:
            listed = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, VIRTUALCLUSTERS,
                                                               _request_timeout=REQUEST_TIMEOUT)
            items.extend(listed.get("items") or [])
        return items

    async def has_tenant_rights(self, namespace: str) -> bool:
        """Whether the operator may write a control plane's Secrets here (its tenant rights, which
        kubenest-binder grants per namespace in the default install)."""
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"namespace": namespace, "verb": "create", "resource": "secrets"}}}
        result = await self._call(self.authorization.create_self_subject_access_review, review)
        return bool(result.status.allowed)

    async def read_secret_data(self, namespace: str, name: str) -> dict[str, str]:
        secret = await self._call(self.core.read_namespaced_secret, name, namespace)
        return dict(secret.data or {})  # values stay base64, exactly as spec.kubeconfig wants them

    # GlobalNodes
    async def get_globalnode(self, name: str) -> dict[str, Any]:
        return await self._call(self.custom.get_cluster_custom_object, GROUP, VERSION, GLOBALNODES, name)

    async def create_globalnode(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(self.custom.create_cluster_custom_object, GROUP, VERSION, GLOBALNODES, body,
                                field_manager=FIELD_MANAGER)

    async def patch_globalnode(self, name: str, patch: dict[str, Any], status: bool = False) -> dict[str, Any]:
        fn = self.custom.patch_cluster_custom_object_status if status else self.custom.patch_cluster_custom_object
        return await self._call(fn, GROUP, VERSION, GLOBALNODES, name, patch, field_manager=FIELD_MANAGER,
                                _content_type=MERGE_PATCH)

    async def list_globalnodes(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.globalnodes_now)

    def globalnodes_now(self) -> list[dict[str, Any]]:
        listed = self.custom.list_cluster_custom_object(GROUP, VERSION, GLOBALNODES, _request_timeout=REQUEST_TIMEOUT)
        return listed.get("items") or []

    async def list_nodes(self) -> list[dict[str, Any]]:
        listed = await self._call(self.core.list_node)
        return [self.client.sanitize_for_serialization(node) for node in listed.items]

    async def virtualcluster_exists(self, namespace: str, name: str) -> bool:
        try:
            await self.get_virtualcluster(namespace, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def delete_globalnode(self, name: str, resource_version: str) -> None:
        options = {"preconditions": {"resourceVersion": resource_version}}
        await self._call(self.custom.delete_cluster_custom_object, GROUP, VERSION, GLOBALNODES, name, body=options)

    def close(self) -> None:
        self.client.close()
        self.host.close()
        self.tenants.close()
