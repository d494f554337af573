"""VirtualCluster object -> the extravars of playbooks/virtualcluster.yml (the operator/playbook contract)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Written back by the operator; a credential the playbooks neither need nor should see.
OPERATOR_OWNED_SPEC_FIELDS = ("kubeconfig",)
STATES = ("present", "absent")


def plain(value: Any) -> Any:
    """Mappings and sequences as plain dicts and lists (kopf hands out read-only views of the body)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def desired_spec(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """The spec as the user asked for it: everything but the fields the operator writes itself."""
    result = plain(spec or {})
    for field in OPERATOR_OWNED_SPEC_FIELDS:
        result.pop(field, None)
    return result


def build_extravars(body: Mapping[str, Any], state: str, host_kubeconfig: str | None) -> dict[str, Any]:
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, not {state!r}")
    metadata = plain(body.get("metadata") or {})
    extravars: dict[str, Any] = {
        "virtualcluster": {
            "namespace": metadata.get("namespace"),
            "name": metadata.get("name"),
            "uid": metadata.get("uid"),
            "generation": metadata.get("generation"),
            "state": state,
            "spec": desired_spec(body.get("spec")),
        },
    }
    # In-cluster the playbooks' kubernetes.core modules find the service account themselves.
    if host_kubeconfig:
        extravars["kubenest_host_kubeconfig"] = host_kubeconfig
    return extravars
