"""Run slots: at most --max-parallel playbook runs at once, and at most --max-parallel-per-namespace of them
for one namespace, so one tenant's stuck runs (an unpullable image holds a run for minutes) cannot take
every slot. And one run at a time per VirtualCluster, whoever starts it: `exclusive_run` is the only way in."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import kopf
from ansible_collections.kosmos.kubenest.plugins.module_utils.kube_api import KubeApiError

from . import metrics
from . import status as st
from .kube import unless_gone

if TYPE_CHECKING:
    from .context import Context


@contextlib.asynccontextmanager
async def exclusive_run(ctx: Context, namespace: str, name: str, phase: str | None,
                        announce: bool = True) -> AsyncIterator[kopf.Body | None]:
    """The VirtualCluster's lock, then a run slot, held until the run's outcome is in the status; yields the
    object as it is once both are held (None when it is gone). `phase` is what a wait for a slot reports
    (`announce=False`: nothing is reported, e.g. for a virtual cluster that has no object). No run starts in a
    namespace that another live shard serves too (shards.ShardGuard)."""
    refused = await ctx.shard_guard.refuse(namespace)
    if refused is not None:
        raise kopf.TemporaryError(refused, delay=ctx.shard_guard.every)
    async with ctx.locks.hold(namespace, name):
        # Checking and taking a free slot happen without a suspension point in between, so a VirtualCluster
        # that has to wait always says so.
        if announce and ctx.slots.busy(namespace):
            with contextlib.suppress(KubeApiError):
                await ctx.api.patch_virtualcluster_status(namespace, name, st.queued(phase))
        asked = time.monotonic()
        metrics.WAITING.inc()
        try:
            await ctx.slots.acquire(namespace)
        finally:
            metrics.WAITING.dec()
        metrics.SLOT_WAIT.observe(time.monotonic() - asked)
        metrics.RUNNING.inc()
        try:
            current = await unless_gone(ctx.api.get_virtualcluster(namespace, name))
            yield kopf.Body(current) if current is not None else None
        finally:
            metrics.RUNNING.dec()
            ctx.slots.release(namespace)


class RunSlots:
    def __init__(self, total: int, per_namespace: int):
        self.total = asyncio.Semaphore(max(1, total))
        self.per_namespace = max(1, min(per_namespace, total))
        self._namespaces: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}

    def _namespace(self, namespace: str) -> asyncio.Semaphore:
        if namespace not in self._namespaces:
            self._namespaces[namespace] = asyncio.Semaphore(self.per_namespace)
        return self._namespaces[namespace]

    def busy(self, namespace: str) -> bool:
        """Whether a run for this namespace would have to wait now."""
        own = self._namespaces.get(namespace)
        return (own is not None and own.locked()) or self.total.locked()

    async def acquire(self, namespace: str) -> None:
        # The namespace's own bound first: waiting on it must not hold one of the shared slots.
        own = self._namespace(namespace)
        self._users[namespace] = self._users.get(namespace, 0) + 1  # holders and waiters
        try:
            await own.acquire()
        except BaseException:
            self._leave(namespace)
            raise
        try:
            await self.total.acquire()
        except BaseException:
            own.release()
            self._leave(namespace)
            raise

    def release(self, namespace: str) -> None:
        self.total.release()
        self._namespaces[namespace].release()
        self._leave(namespace)

    def _leave(self, namespace: str) -> None:
        self._users[namespace] -= 1
        if not self._users[namespace]:  # forget idle namespaces: the map stays as small as the active set
            del self._users[namespace]
            del self._namespaces[namespace]


class ObjectLocks:
    """kopf serialises its own change handlers of an object, not them with its timers: every run takes this
    lock (through exclusive_run), so two runs of one VirtualCluster never overlap."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._users: dict[tuple[str, str], int] = {}

    @contextlib.asynccontextmanager
    async def hold(self, namespace: str, name: str) -> AsyncIterator[None]:
        key = (namespace, name)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:  # forget idle objects, as RunSlots does namespaces
                del self._users[key]
                del self._locks[key]
