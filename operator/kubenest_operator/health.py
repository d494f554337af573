"""How a virtual cluster stands: its control plane against what the collection last applied, its tenant's Nodes,
its certificates.

One assessment serves the operator's start (resume: does this virtual cluster need a run?) and the periodic
look (looks.py: report it in the status, repair or renew with a run). It compares what exists in the host
namespace with what the last successful run left there (`status.controlPlaneObjects`, recorded by the operator
from the objects the collection's field manager wrote), asks the tenant's own API through its endpoint (its
Nodes, a consistent read), and reads the PKI Secrets for certificates inside their renewal window:

- an object that is gone, or whose fields the collection set were changed by someone else (a Deployment
  scaled to 0, an image or flag edited, a Service's ports or a NetworkPolicy changed), is repaired by a run;
  the run's forced server-side apply takes the fields back;
- a workload with fewer ready replicas than it has, or a tenant API that does not answer a consistent read, is
  reported and waited out: controllers replace pods, a run would not help.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from . import ca_rotation, metrics, owners
from .certificates import PKI_SECRETS, due_certificates, expiry_times, pki_secrets
from .clients import Lender, TenantClients
from .context import Context
from .extravars import load_site_vars, plain, renew_before_days
from .kube import unless_gone

LABEL = "kosmos.io/virtualcluster"


@dataclass(frozen=True)
class Finding:
    text: str
    repair: bool  # a playbook run puts it right; otherwise it is reported until it passes


@dataclass
class Assessment:
    findings: list[Finding] = field(default_factory=list)  # the control plane's
    nodes: dict[str, bool] | None = None  # the tenant's Nodes and whether each is Ready; None: not asked, no answer
    due: list[str] = field(default_factory=list)  # certificates inside their renewal window

    def reason_to_run(self, promoted: Sequence[str]) -> str | None:
        """What a run would put right, or None."""
        if self.findings:
            return "; ".join(finding.text for finding in self.findings)
        missing = [name for name in promoted if self.nodes is not None and not self.nodes.get(name)]
        if missing:
            return f"{', '.join(missing)} not Ready in the virtual cluster"
        return f"certificates are due: {', '.join(self.due)}" if self.due else None


@dataclass(frozen=True)
class Kind:
    name: str
    collection: str  # the API path of the namespaced collection, with {namespace}
    compare: bool  # whether fields changed by others count (Secrets: the pki role keeps what it finds)
    workload: bool = False


KINDS = (
    Kind("Deployment", "/apis/apps/v1/namespaces/{namespace}/deployments", True, True),
    Kind("StatefulSet", "/apis/apps/v1/namespaces/{namespace}/statefulsets", True, True),
    Kind("Service", "/api/v1/namespaces/{namespace}/services", True),
    Kind("NetworkPolicy", "/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies", True),
    Kind("PodDisruptionBudget", "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", True),
    Kind("Secret", "/api/v1/namespaces/{namespace}/secrets", False),
)
KIND_BY_NAME = {kind.name: kind for kind in KINDS}


def workloads(name: str) -> list[dict[str, Any]]:
    """What the etcd and control_plane roles run for a virtual cluster: what is looked for when an older
    operator recorded no objects."""
    return [{"kind": "StatefulSet", "name": f"{name}-etcd"}] + [
        {"kind": "Deployment", "name": f"{name}-{component}"}
        for component in ("apiserver", "controller-manager", "scheduler")]


def list_objects(host: Lender, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    """{"Kind/name": object as the API returns it} of the virtual cluster's labelled objects (blocking)."""
    return list_by_virtualcluster(host, namespace, name).get(name, {})


def list_by_virtualcluster(host: Lender, namespace: str,
                           name: str | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """{virtual cluster: {"Kind/name": object}} of the labelled objects of one virtual cluster, or with no `name`
    of every virtual cluster in the namespace (blocking)."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    with host.client() as api:
        for kind in KINDS:
            listed = api.request("GET", kind.collection.format(namespace=namespace),
                                 query={"labelSelector": f"{LABEL}={name}" if name else LABEL})
            for obj in listed.get("items") or []:
                owner = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL, "")
                found.setdefault(owner, {})[f"{kind.name}/{obj['metadata']['name']}"] = obj
    return found


def inventory(objects: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What status.controlPlaneObjects records: each object the collection wrote, a digest of the fields it
    set (owners.fields_digest) and, for workloads, the replicas it set."""
    recorded = []
    for key, obj in sorted(objects.items()):
        if not owners.applied_by_collection(obj):
            continue
        kind, name = key.split("/", 1)
        entry = {"kind": kind, "name": name, "fields": owners.fields_digest(obj)}
        if KIND_BY_NAME[kind].workload:
            entry["replicas"] = _replicas(obj)
        recorded.append(entry)
    return recorded


def _replicas(obj: Mapping[str, Any]) -> int:
    wanted = (obj.get("spec") or {}).get("replicas")
    return 1 if wanted is None else int(wanted)


def _missing(kind: str, name: str) -> Finding:
    if kind == "Secret" and any(name.endswith(pattern.replace("{name}", "")) for pattern in PKI_SECRETS):
        # A run would issue a new CA here, which no promoted node and no handed-out kubeconfig trusts.
        return Finding(f"Secret {name} is missing: its certificate authorities come back only with a backup "
                       "restored into a new virtual cluster (playbooks/etcd_restore.yml), not by a run", False)
    return Finding(f"{kind} {name} is missing", True)


def _changed(kind: Kind, name: str, obj: Mapping[str, Any], recorded: Mapping[str, Any]) -> str | None:
    """How the object differs from what the collection set, or None. Only a field the collection lost since
    its last run counts (so a field its own tools set under another name never does); whoever took it names it."""
    replicas = kind.workload and "replicas" in recorded and _replicas(obj) != recorded["replicas"]
    if replicas:
        return f"{kind.name} {name}: spec.replicas is {_replicas(obj)} where the collection set {recorded['replicas']}"
    if not recorded.get("fields") or owners.fields_digest(obj) == recorded["fields"]:
        return None
    others = owners.changed_by_others(obj)
    if others:
        return owners.describe(kind.name, name, others)
    return f"{kind.name} {name}: a field the collection set was changed by another writer"


def assess_objects(objects: Mapping[str, Mapping[str, Any]],
                   expected: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Findings about the host-side objects against the record of the last run (pure): gone, changed by
    someone else, workloads not ready."""
    findings = []
    for recorded in sorted(expected, key=lambda entry: (entry.get("kind", ""), entry.get("name", ""))):
        kind, name = KIND_BY_NAME.get(recorded.get("kind", "")), recorded.get("name", "")
        if kind is None:
            continue  # a kind a newer operator recorded: not this one's to judge
        obj = objects.get(f"{kind.name}/{name}")
        if obj is None:
            findings.append(_missing(kind.name, name))
            continue
        changed = _changed(kind, name, obj, recorded) if kind.compare else None
        if changed:
            findings.append(Finding(changed, True))
        elif kind.workload:
            ready = int((obj.get("status") or {}).get("readyReplicas") or 0)
            if ready < _replicas(obj):
                findings.append(Finding(f"{kind.name} {name} has {ready} of {_replicas(obj)} replicas ready", False))
    return findings


def ask_tenant(tenants: TenantClients, namespace: str, name: str,
               kubeconfig: bytes) -> tuple[str | None, dict[str, bool]]:
    """What is wrong with the tenant's API seen from outside, through its endpoint, and its Nodes' readiness
    (blocking). Listing the Nodes is a consistent read, which only an API server with its etcd behind it answers."""
    try:
        lender = tenants.lender(namespace, name, kubeconfig)
    except Exception as exc:  # a kubeconfig that cannot be used is the same as an API that does not answer
        return f"the virtual cluster's API does not answer: {type(exc).__name__}", {}
    try:
        with lender.client() as api:
            nodes = api.request("GET", "/api/v1/nodes").get("items") or []
    except KubeApiError as exc:
        return f"the virtual cluster's API does not answer: {f'HTTP {exc.status}' if exc.status else exc}", {}
    except Exception as exc:  # refused, timed out
        return f"the virtual cluster's API does not answer: {type(exc).__name__}", {}
    return None, {(node.get("metadata") or {}).get("name"): any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions")
        or []) for node in nodes}


async def admin_kubeconfig(ctx: Context, namespace: str, status: Mapping[str, Any],
                           objects: Mapping[str, Mapping[str, Any]]) -> bytes | None:
    """From its Secret as listed with the virtual cluster's objects, else as read now."""
    ref = status.get("kubeconfigSecretRef") or {}
    if not ref.get("name"):
        return None
    listed = objects.get(f"Secret/{ref['name']}")
    if listed is not None:
        data = listed.get("data") or {}
    else:
        data = await unless_gone(ctx.api.read_secret_data(namespace, ref["name"])) or {}
    value = data.get(ref.get("key", ""))
    return base64.b64decode(value) if value else None


async def assess(ctx: Context, body: Mapping[str, Any], control_plane: bool = True,
                 certificates: bool = True) -> Assessment:
    """The virtual cluster now: with `control_plane`, its host-side objects against the last run's record and its
    tenant's API and Nodes; with `certificates`, which are due (and their expiry, for the metrics)."""
    metadata, status = plain(body.get("metadata") or {}), plain(body.get("status") or {})
    namespace, name = metadata["namespace"], metadata["name"]
    found = Assessment()
    if control_plane:
        objects = await ctx.host_objects.of(namespace, name, lambda: list_by_virtualcluster(ctx.api.host, namespace))
        expected = status.get("controlPlaneObjects") or workloads(name)
        found.findings = assess_objects(objects, expected)
        kubeconfig = await admin_kubeconfig(ctx, namespace, status, objects)
        if kubeconfig is None:
            secret = (status.get("kubeconfigSecretRef") or {}).get("name")
            recorded = any(entry.get("kind") == "Secret" and entry.get("name") == secret for entry in expected)
            if f"Secret/{secret}" in objects or not recorded:  # else it was found missing above
                found.findings.append(Finding("the admin kubeconfig is missing", True))
        else:
            problem, nodes = await asyncio.to_thread(ask_tenant, ctx.api.tenants, namespace, name, kubeconfig)
            if problem:
                found.findings.append(Finding(problem, False))
            else:
                found.nodes = nodes
    if certificates:
        secrets = await pki_secrets(ctx, namespace, name)
        metrics.set_certificates(namespace, name, expiry_times(secrets))
        found.due = due_certificates(secrets, renew_before_days(load_site_vars(ctx.config.site_vars)))
        # A rotation left half-way (an operator restarted between two steps) goes on like a renewal.
        step = ca_rotation.next_step(plain(body.get("spec") or {}), status)
        if step is not None:
            found.due.append(f"CA rotation {body['spec']['caRotation']['id']} (step {step})")
    return found


async def record_inventory(ctx: Context, namespace: str, name: str) -> list[dict[str, Any]]:
    """After a successful run: note in the status what it left, for later looks to compare against."""
    objects = await asyncio.to_thread(list_objects, ctx.api.host, namespace, name)
    recorded = inventory(objects)
    await ctx.api.patch_virtualcluster_status(namespace, name, {"status": {"controlPlaneObjects": recorded}})
    return recorded
