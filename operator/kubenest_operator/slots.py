"""Run slots: at most --max-parallel playbook runs at once, and at most --max-parallel-per-namespace of them
for one namespace, so one tenant's stuck runs (an unpullable image holds a run for minutes) cannot take
every slot. And one run at a time per VirtualCluster, whoever starts it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


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
    """kopf serialises its own handlers of an object, not a daemon's runs: the certificate check and the
    change handlers take this lock, so two runs of one VirtualCluster never overlap."""

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
