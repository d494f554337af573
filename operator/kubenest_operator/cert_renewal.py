"""Certificates of a virtual cluster's control plane renewed before they expire, without waiting for a spec change.

A run re-issues every certificate that is inside its renewal window (the certificate module's rule: the
`kubenest_cert_renew_before_days` site variable, never more than a third of the lifetime) and rolls the
components onto the new ones. Between runs nothing would: a daemon per VirtualCluster reads the certificates
in its PKI Secrets every --cert-check-interval and starts a run when one of them is due.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import kopf
from kubernetes.client.rest import ApiException

from . import metrics
from . import status as st
from .certificates import due_certificates, expiry_times, pki_secrets
from .context import Context
from .extravars import load_site_vars, plain, renew_before_days
from .handlers import _converge, runner_slot
from .kube import GROUP, VERSION, VIRTUALCLUSTERS


def _settled(body: kopf.Body) -> bool:
    """A control plane that was built and is not being deleted or given up on."""
    status = plain(body.get("status") or {})
    if body.metadata.get("deletionTimestamp") or not status.get("kubeconfigSecretRef"):
        return False
    given_up = status.get("phase") == st.FAILED and status.get("observedGeneration") == body.metadata.get("generation")
    return not given_up


async def check(ctx: Context, namespace: str, name: str, logger: logging.Logger) -> bool:
    """One check; True when it ran the playbook."""
    body = kopf.Body(await ctx.api.get_virtualcluster(namespace, name))
    if not _settled(body):
        return False
    renew_before = renew_before_days(load_site_vars(ctx.config.site_vars))
    secrets = await pki_secrets(ctx, namespace, name)
    metrics.set_certificates(namespace, name, expiry_times(secrets))
    due = due_certificates(secrets, renew_before)
    if not due:
        return False
    async with ctx.locks.hold(namespace, name):
        # Whatever ran while this waited for the lock may have renewed them already.
        body = kopf.Body(await ctx.api.get_virtualcluster(namespace, name))
        due = due_certificates(await pki_secrets(ctx, namespace, name), renew_before) if _settled(body) else []
        if not due:
            return False
        message = f"renewing certificates: {', '.join(due)}"
        logger.info(message)
        kopf.info(body, reason="CertificateRenewal", message=message)
        async with runner_slot(ctx, body):
            try:
                await _converge(ctx, body, st.UPDATING, 0, logger)
            except (kopf.TemporaryError, kopf.PermanentError) as exc:
                # The status says what happened; a later check (or a spec change) runs again.
                logger.warning(f"certificate renewal run did not complete: {exc}")
    return True


@kopf.daemon(GROUP, VERSION, VIRTUALCLUSTERS)
async def renew_certificates(name: str, namespace: str, memo: kopf.Memo, stopped: kopf.DaemonStopped,
                             logger: logging.Logger, **_: Any) -> None:
    # No cancellation timeout: a renewal run in progress ends by itself (deletion waits for it) rather than
    # being killed half-way.
    ctx: Context = memo.ctx
    try:
        await _watch(ctx, namespace, name, stopped, logger)
    finally:
        metrics.set_certificates(namespace, name, None)


async def _watch(ctx: Context, namespace: str, name: str, stopped: kopf.DaemonStopped,
                 logger: logging.Logger) -> None:
    with contextlib.suppress(ApiException):  # the expiry metrics from the start, not only after an interval
        metrics.set_certificates(namespace, name, expiry_times(await pki_secrets(ctx, namespace, name)))
    while not stopped:
        await stopped.wait(ctx.config.cert_check_interval)
        if stopped:
            return
        try:
            await check(ctx, namespace, name, logger)
        except ApiException as exc:
            if exc.status == 404:
                return
            logger.debug(f"could not check the certificates: HTTP {exc.status}")
        except (OSError, ValueError) as exc:  # unreadable site variables, an unreachable API
            logger.warning(f"could not check the certificates: {type(exc).__name__}: {exc}")
