"""Bounds on connections that have not authenticated yet.

Every TCP connection costs a TLS object and buffers until its handshake ends. Without a bound, anyone who
can reach the port can open thousands of idle connections and grow the agent's memory; so connections
still in their TLS handshake are capped in total and per source address, the excess is closed at once,
and refusals are audited at most once per second per address (with a count), not once per connection.
A refused or failed connection leaves reference cycles (transport, TLS state with its 256 KiB buffer,
exception and traceback) that only the cyclic garbage collector frees, and its oldest generation runs
rarely; so every GC_EVERY of them triggers a collection, which keeps a flood's garbage small.
"""

from __future__ import annotations

import gc
import time

from . import audit

MAX_PENDING = 256
MAX_PENDING_PER_ADDRESS = 32
AUDIT_INTERVAL_S = 1.0
GC_EVERY = 64


class HandshakeGate:
    def __init__(self, max_pending: int = MAX_PENDING, per_address: int = MAX_PENDING_PER_ADDRESS):
        self.max_pending = max_pending
        self.per_address = per_address
        self.pending = 0
        self._by_address: dict[str, int] = {}
        self._refused: dict[str, tuple[float, int]] = {}  # address -> (last audit, refusals since)
        self._garbage = 0

    def admit(self, address: str) -> bool:
        if self.pending >= self.max_pending or self._by_address.get(address, 0) >= self.per_address:
            self._note_refusal(address)
            return False
        self.pending += 1
        self._by_address[address] = self._by_address.get(address, 0) + 1
        return True

    def discarded(self) -> None:
        """A connection was refused or failed its handshake."""
        self._garbage += 1
        if self._garbage >= GC_EVERY:
            self._garbage = 0
            gc.collect()

    def done(self, address: str) -> None:
        self.pending -= 1
        left = self._by_address[address] - 1
        if left:
            self._by_address[address] = left
        else:
            del self._by_address[address]

    def _note_refusal(self, address: str) -> None:
        now = time.monotonic()
        last, count = self._refused.get(address, (0.0, 0))
        count += 1
        if now - last >= AUDIT_INTERVAL_S:
            audit.record("refused", addr=address, reason="too many connections in TLS handshake", count=count)
            self._refused[address] = (now, 0)
            if len(self._refused) > 4096:  # forget quiet addresses; the map must not grow without bound
                self._refused = {a: v for a, v in self._refused.items() if now - v[0] < AUDIT_INTERVAL_S}
        else:
            self._refused[address] = (last, count)
