"""spec.kubeconfig: where the reference design put the tenant's admin kubeconfig.

Everyone who may read VirtualClusters could read it there, and whoever may patch one could swap it for a
kubeconfig pointing elsewhere. The kubeconfig lives in the Secret that status.kubeconfigSecretRef names; the
field is written only with --spec-kubeconfig (compatibility), and then put back when anyone changes it.
Without the setting the operator keeps the field empty.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from .context import Context
from .extravars import desired_spec, plain
from .kube import GROUP, VERSION, VIRTUALCLUSTERS, http_error, unless_gone
from .settings import ANNOTATION_PREFIX

WRITE_ATTEMPTS = 5
LAST_HANDLED = f"{ANNOTATION_PREFIX}/last-handled-configuration"


async def write(ctx: Context, namespace: str, name: str, value: str | None, ran_spec: dict[str, Any],
                ran_generation: int | None) -> int | None:
    """Make spec.kubeconfig `value` (None: absent); returns the generation the status now describes.

    The write bumps metadata.generation. If the rest of the spec is still the one the run converged, the
    new generation is reconciled too; if someone changed the spec meanwhile, the run's generation is,
    and kopf will hand the newer spec to the next run.
    """
    for _attempt in range(WRITE_ATTEMPTS):
        try:
            current = await ctx.api.get_virtualcluster(namespace, name)
            unchanged = desired_spec(current.get("spec")) == ran_spec
            if (current.get("spec") or {}).get("kubeconfig") != value:
                # resourceVersion makes this a compare-and-swap: a concurrent spec edit gets a 409, not lost.
                current = await ctx.api.patch_virtualcluster(namespace, name, {
                    "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                    "spec": {"kubeconfig": value}})
        except KubeApiError as exc:
            if exc.status == 409:
                continue
            # The response could echo the request; keep the message to the status code.
            raise kopf.TemporaryError(f"writing spec.kubeconfig failed: {http_error(exc)}",
                                      delay=ctx.config.backoff_base) from None
        return current["metadata"].get("generation") if unchanged else ran_generation
    raise kopf.TemporaryError("writing spec.kubeconfig kept conflicting with other writers",
                              delay=ctx.config.backoff_base)


def _last_handled_spec(body: kopf.Body) -> dict[str, Any] | None:
    try:
        return json.loads(body.metadata.annotations.get(LAST_HANDLED) or "null").get("spec") or {}
    except (AttributeError, ValueError):
        return None


async def _expected(ctx: Context, body: kopf.Body) -> str | None:
    if not ctx.config.spec_kubeconfig:
        return None
    ref = (body.get("status") or {}).get("kubeconfigSecretRef") or {}
    if not ref.get("name") or not ref.get("key"):
        return None
    return (await unless_gone(ctx.api.read_secret_data(body.metadata.namespace, ref["name"])) or {}).get(ref["key"])


@kopf.on.event(GROUP, VERSION, VIRTUALCLUSTERS)
async def guard(body: kopf.Body, type: str, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """Put spec.kubeconfig back when someone changes it (or clear it, without --spec-kubeconfig)."""
    ctx: Context = memo.ctx
    if type == "DELETED" or body.metadata.get("deletionTimestamp"):
        return
    actual = (body.get("spec") or {}).get("kubeconfig")
    if ctx.config.spec_kubeconfig and not (body.get("status") or {}).get("kubeconfigSecretRef"):
        return  # nothing written yet: the first successful run writes it
    if actual is None and not ctx.config.spec_kubeconfig:
        return
    expected = await _expected(ctx, body)
    if actual == expected or (ctx.config.spec_kubeconfig and expected is None):
        return
    namespace, name = body.metadata.namespace, body.metadata.name
    logger.warning("spec.kubeconfig was changed by someone else; " +
                   ("restoring it" if expected else "removing it (the kubeconfig is in the Secret)"))
    spec = desired_spec(body.get("spec"))
    generation = await write(ctx, namespace, name, expected, spec, None)
    # Only spec.kubeconfig moved since the last run: the status still describes the spec, now at the new
    # generation (the field is not part of what runs converge).
    status = plain(body.get("status") or {})
    if generation is not None and status.get("observedGeneration") and _last_handled_spec(body) == spec:
        await ctx.api.patch_virtualcluster_status(namespace, name, {"status": {"observedGeneration": generation}})
