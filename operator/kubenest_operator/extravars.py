"""VirtualCluster object -> the extravars of playbooks/virtualcluster.yml (the operator/playbook contract)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from . import ca_rotation
from .restores import PENDING, restore_of

# Written back by the operator; a credential the playbooks neither need nor should see.
OPERATOR_OWNED_SPEC_FIELDS = ("kubeconfig",)
STATES = ("present", "absent")
RENEW_BEFORE_DAYS = 30  # the roles' default


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


def load_site_vars(path: Path | None) -> dict[str, Any]:
    """The operator's --site-vars file: a mapping of variables every run gets (never user data)."""
    if path is None:
        return {}
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ValueError("must hold a YAML mapping of variable names to values")
    reserved = {"virtualcluster", "kubenest_host_kubeconfig"} & set(data)
    if reserved:
        raise ValueError(f"may not set {', '.join(sorted(reserved))}: the operator sets them")
    return data


def renew_before_days(site_vars: Mapping[str, Any]) -> float:
    """Days before its end a certificate is renewed (never more than a third of its lifetime): the site
    variable the roles read too, so the operator's checks and the runs agree."""
    try:
        return float(site_vars.get("kubenest_cert_renew_before_days", RENEW_BEFORE_DAYS))
    except (TypeError, ValueError):
        return float(RENEW_BEFORE_DAYS)


def build_extravars(body: Mapping[str, Any], state: str, host_kubeconfig: str | None,
                    site_vars: Mapping[str, Any] | None = None,
                    allowed_registries: tuple[str, ...] = ()) -> dict[str, Any]:
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, not {state!r}")
    metadata = plain(body.get("metadata") or {})
    extravars: dict[str, Any] = dict(site_vars or {})
    extravars.update({
        "virtualcluster": {
            "namespace": metadata.get("namespace"),
            "name": metadata.get("name"),
            "uid": metadata.get("uid"),
            "generation": metadata.get("generation"),
            "state": state,
            "spec": desired_spec(body.get("spec")),
            # What the control plane runs now: a spec without a version keeps it (no upgrade by the collection).
            "kubernetes_version": (plain(body.get("status") or {})).get("kubernetesVersion"),
        },
    })
    rotation = ca_rotation.extravars(body.get("spec"), plain(body.get("status") or {}))
    if rotation is not None and state == "present":
        extravars["virtualcluster"]["ca_rotation"] = rotation
    restore = restore_of(metadata)
    if restore is not None and restore != PENDING:
        extravars["virtualcluster"]["etcd_restore"] = restore
    # The node running the operator is never promoted (in-cluster, NODE_NAME comes from the downward API).
    own_node = os.environ.get("NODE_NAME")
    if own_node and "node_promote_exclude" not in extravars:
        extravars["node_promote_exclude"] = [own_node]
    if allowed_registries:  # the playbook refuses other registries (kosmos.kubenest.virtualcluster_problems)
        extravars["kubenest_allowed_registries"] = list(allowed_registries)
    # In-cluster the collection's API client finds the service account itself.
    if host_kubeconfig:
        extravars["kubenest_host_kubeconfig"] = host_kubeconfig
    return extravars


class _UnsafeDumper(yaml.SafeDumper):
    """Tags every string `!unsafe`: Ansible then treats it as data, never as a template."""


def _represent_unsafe(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("!unsafe", value, style='"')


_UnsafeDumper.add_representer(str, _represent_unsafe)


def dump_unsafe(extravars: Mapping[str, Any]) -> str:
    """The extravars file of a run. Every string in it (keys included: ansible templates keys it iterates)
    comes from a user object or the operator's settings and is handed over as data; nothing in it is a
    template. JSON on the command line, ansible-runner's way, would let `{{ ... }}` in a CR run code."""
    return yaml.dump(plain(extravars), Dumper=_UnsafeDumper, default_flow_style=False, sort_keys=True,
                     allow_unicode=True)
