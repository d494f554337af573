"""Whether a virtual cluster needs a playbook run when the operator (re)starts.

kopf calls the resume handler for every object when the operator starts. A virtual cluster that was
reconciled for its current spec by a collection with the same desired state (revision.py), whose control plane
is as the last run left it (health.py: its objects there and unchanged, its workloads ready, its API answering),
whose nodes are Ready and whose certificates are not due, needs no run: a restart or an upgrade that changes no
tenant then costs a few API reads per virtual cluster instead of a whole playbook each.
"""

from __future__ import annotations

import kopf

from . import health
from . import status as st
from .context import Context
from .extravars import plain
from .settings import ANNOTATION_PREFIX

# On the VirtualCluster after each successful run: the collection revision that reconciled it.
REVISION_ANNOTATION = f"{ANNOTATION_PREFIX}/reconciled-revision"
# The reason given when only the collection changed: an upgrade's run, taken one virtual cluster at a time.
COLLECTION_CHANGED = "the collection's desired state changed since the last run"


async def reason_to_run(ctx: Context, body: kopf.Body) -> str | None:
    """Why a resumed virtual cluster needs a run, or None when nothing drifted."""
    status = plain(body.get("status") or {})
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == st.READY), {})
    if status.get("phase") != st.COMPLETED or ready.get("status") != "True":
        return f"phase {status.get('phase')}, Ready {ready.get('status')}"
    if status.get("observedGeneration") != body.metadata.get("generation"):
        return "the spec changed"
    if (body.metadata.get("annotations") or {}).get(REVISION_ANNOTATION) != ctx.revision:
        return COLLECTION_CHANGED
    assessment = await health.assess(ctx, body)
    return assessment.reason_to_run([n["name"] for n in status.get("nodes") or [] if n.get("name")])


async def record_revision(ctx: Context, namespace: str, name: str) -> None:
    await ctx.api.patch_virtualcluster(namespace, name, {"metadata": {"annotations": {REVISION_ANNOTATION:
                                                                                      ctx.revision}}})
