"""The host objects the looks read, listed once per namespace for all of its virtual clusters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

# {virtual cluster: {"Kind/name": object}}
Shares = dict[str, dict[str, dict[str, Any]]]


class HostObjects:
    """What the looks read of the host: a namespace's labelled objects, listed once per kind for the looks of every
    virtual cluster there within `max_age` seconds, instead of once per virtual cluster (a namespace of a thousand
    tenants then costs six lists per few seconds, not six per tenant per look). A list that began before a run in
    the namespace ended is not used, since runs change the objects; each virtual cluster's share is handed out
    once, so all that stays in memory is the share of those that have not looked yet, and of a namespace with one
    virtual cluster nothing."""

    def __init__(self, max_age: float):
        self.max_age = max_age
        self._shares: dict[str, tuple[float, Shares]] = {}
        self._changed: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def changed(self, namespace: str) -> None:
        """A run in the namespace ended: what was listed before is stale."""
        self._changed[namespace] = time.monotonic()
        self._shares.pop(namespace, None)

    async def of(self, namespace: str, name: str, list_namespace: Callable[[], Shares]) -> dict[str, dict[str, Any]]:
        """The virtual cluster's objects, {"Kind/name": object}, as listed at most `max_age` seconds ago;
        `list_namespace` (blocking) lists the namespace's, by virtual cluster."""
        async with self._locks.setdefault(namespace, asyncio.Lock()):  # looks that come together share a list
            taken, shares = self._shares.get(namespace, (0.0, {}))
            if name not in shares or time.monotonic() - taken > self.max_age:
                taken = time.monotonic()
                shares = await asyncio.to_thread(list_namespace)
                if taken > self._changed.get(namespace, float("-inf")):  # else a run ended meanwhile
                    self._shares[namespace] = (taken, shares)
            return shares.pop(name, {})
