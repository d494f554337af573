"""The loop of the per-VirtualCluster daemons that look at a virtual cluster between runs."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import kopf
from kubernetes.client.rest import ApiException

from .context import Context


async def every_resync(ctx: Context, namespace: str, name: str, stopped: kopf.DaemonStopped,
                       logger: logging.Logger, what: str, look: Callable[[kopf.Body], Awaitable[object]]) -> None:
    """Call `look` with the current VirtualCluster every --resync-interval until it is gone or being deleted."""
    while not stopped:
        await stopped.wait(ctx.config.resync_interval)
        if stopped:
            return
        try:
            body = kopf.Body(await ctx.api.get_virtualcluster(namespace, name))
            if body.metadata.get("deletionTimestamp"):
                return
            await look(body)
        except ApiException as exc:
            if exc.status == 404:
                return
            logger.debug(f"could not look at {what}: HTTP {exc.status}")
        except Exception as exc:  # the tenant API unreachable, a broken kubeconfig: look again later
            logger.debug(f"could not look at {what}: {type(exc).__name__}: {exc}")
