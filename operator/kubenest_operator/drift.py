"""Whether a virtual cluster needs a playbook run when the operator (re)starts.

kopf calls the resume handler for every object when the operator starts. A virtual cluster that was
reconciled for its current spec by the current collection, whose control plane is as the last run left it
(health.py: its objects there and unchanged, its workloads ready, its API answering), whose nodes are Ready and
whose certificates are not due, needs no run: a restart then costs a few API reads per virtual cluster instead
of a whole playbook each.
"""

from __future__ import annotations

import asyncio

import kopf

from . import health
from . import status as st
from .certificates import due_certificates, pki_secrets
from .context import Context
from .extravars import load_site_vars, plain, renew_before_days
from .kube import tenant_nodes_ready
from .settings import ANNOTATION_PREFIX

# On the VirtualCluster after each successful run: the collection revision that reconciled it.
REVISION_ANNOTATION = f"{ANNOTATION_PREFIX}/reconciled-revision"


def _nodes_problem(kubeconfig: bytes, nodes: list[str]) -> str | None:
    try:
        ready = tenant_nodes_ready(kubeconfig)
    except Exception as exc:  # unreachable, refused, a broken kubeconfig: all mean "look closer"
        return f"the virtual cluster's API does not answer: {type(exc).__name__}"
    missing = [name for name in nodes if not ready.get(name)]
    return f"{', '.join(missing)} not Ready in the virtual cluster" if missing else None


async def reason_to_run(ctx: Context, body: kopf.Body) -> str | None:
    """Why a resumed virtual cluster needs a run, or None when nothing drifted."""
    status = plain(body.get("status") or {})
    generation = body.metadata.get("generation")
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == st.READY), {})
    if status.get("phase") != st.COMPLETED or ready.get("status") != "True":
        return f"phase {status.get('phase')}, Ready {ready.get('status')}"
    if status.get("observedGeneration") != generation:
        return "the spec changed"
    if (body.metadata.get("annotations") or {}).get(REVISION_ANNOTATION) != ctx.revision:
        return "the collection changed since the last run"
    namespace, name = body.metadata.namespace, body.metadata.name
    findings = await health.assess(ctx, body)
    if findings:
        return "; ".join(finding.text for finding in findings)
    nodes = [n["name"] for n in status.get("nodes") or [] if n.get("name")]
    if nodes:
        problem = await asyncio.to_thread(_nodes_problem, await health.admin_kubeconfig(ctx, namespace, status),
                                          nodes)
        if problem:
            return problem
    due = due_certificates(await pki_secrets(ctx, namespace, name),
                           renew_before_days(load_site_vars(ctx.config.site_vars)))
    return f"certificates are due: {', '.join(due)}" if due else None


async def record_revision(ctx: Context, namespace: str, name: str) -> None:
    await ctx.api.patch_virtualcluster(namespace, name, {"metadata": {"annotations": {REVISION_ANNOTATION:
                                                                                      ctx.revision}}})
