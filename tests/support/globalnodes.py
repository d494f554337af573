"""GlobalNodes put on an API server as the operator's node sync and the claims leave them, for tests that start
from a given state."""

from __future__ import annotations

from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "kosmos.io", "v1alpha1", "globalnodes"


def put_globalnode(custom, name: str, spec: dict, status: dict) -> None:
    """(Re)create GlobalNode `name` with `spec`, then set its status; `custom` is a CustomObjectsApi."""
    try:
        custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    except ApiException as exc:
        if exc.status != 404:
            raise
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "GlobalNode", "metadata": {"name": name}, "spec": spec})
    custom.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, name, {"status": status})
