"""Measuring while something else happens: a step repeated on a thread of its own for the length of a `with`
block. The base of the tests' and benchmarks' pollers, writers, watchers and samplers."""

from __future__ import annotations

import threading
import time


class Repeating:
    """Calls `step()` every `interval` seconds from entering the `with` block until leaving it (then once more is
    never done: a step under way finishes first). `started` and `stopped` are time.monotonic() at both ends."""

    def __init__(self, interval: float):
        self.interval = interval
        self.started = self.stopped = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def step(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.interval)

    def __enter__(self):
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(120)
        self.stopped = time.monotonic()


class Requests(Repeating):
    """A Repeating whose step is one request, `attempt()`: counts what answered and what failed, keeping the first
    few reasons, the longest stretch without an answer and the slowest answer (seconds)."""

    kept_reasons = 5

    def __init__(self, interval: float):
        super().__init__(interval)
        self.ok, self.failed, self.reasons = 0, 0, []
        self.longest_gap = self.slowest = 0.0
        self.answered_at: list[float] = []
        self.failed_at: list[float] = []
        self._last_ok = 0.0

    def attempt(self) -> None:
        raise NotImplementedError

    def note_failure(self, exc: Exception) -> None:
        """Called for each failed attempt, after it is counted: keeps the first few reasons, each with the time it
        came, in seconds after the start, to be set beside the logs of what was going on."""
        if len(self.reasons) < self.kept_reasons:
            self.reasons.append(f"{self.failed_at[-1] - self.started:.1f}s {type(exc).__name__}: {exc}"[:240])

    def step(self) -> None:
        asked = time.monotonic()
        try:
            self.attempt()
        except Exception as exc:  # every way a request fails counts: refused, reset, timeout, an error answer
            self.failed += 1
            self.failed_at.append(time.monotonic())
            self.note_failure(exc)
        else:
            self.ok += 1
            now = time.monotonic()
            self.slowest = max(self.slowest, now - asked)
            self.answered_at.append(now)
            self.longest_gap = max(self.longest_gap, now - (self._last_ok or self.started))
            self._last_ok = now

    def summary(self) -> str:
        return (f"{self.failed} of {self.ok + self.failed} requests failed, longest gap {self.longest_gap:.1f}s,"
                f" slowest answer {self.slowest:.1f}s"
                + (f" ({'; '.join(self.reasons)})" if self.reasons else ""))
