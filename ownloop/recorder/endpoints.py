"""A pool of model endpoints (``--endpoint`` given several times, e.g. one vLLM server per GPU).

Sessions take the endpoints in turn. An endpoint on which a session ended ``endpoint_error`` (its
calls failed after every retry) is taken out of the pool for ``BENCH_S`` seconds; the recorder
writes ``EndpointBenched`` when that happens. If every endpoint is out, the one that comes back
first is used: the run goes on, and ``--max-endpoint-errors`` decides when it stops.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["BENCH_S", "EndpointPool", "bench_seconds"]

BENCH_S = 60.0
"""How long an endpoint stays out of the pool after a session failed on it."""


def bench_seconds() -> float:
    """``$OWNLOOP_ENDPOINT_BENCH`` seconds if set to a positive number, else ``BENCH_S``."""
    try:
        value = float(os.environ.get("OWNLOOP_ENDPOINT_BENCH", "") or 0)
    except ValueError:
        value = 0.0
    return value if value > 0 else BENCH_S


class EndpointPool:
    """The endpoints a run's sessions spread over (thread-safe).

    Args:
        endpoints: the base URLs, in the order given (duplicates count once).
        bench_s: seconds an endpoint stays out after ``bench``.
        clock: monotonic seconds (a parameter so the order of events is the only input).
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        bench_s: float = BENCH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoints = tuple(dict.fromkeys(endpoints))
        if not self.endpoints:
            raise ValueError("an endpoint pool needs at least one endpoint")
        self.bench_s = bench_s
        self._clock = clock
        self._out_until: dict[str, float] = {}
        self._next = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.endpoints)

    def pick(self) -> str:
        """The endpoint for the next session: the next one in turn that is in the pool, else the
        one whose time out ends first."""
        with self._lock:
            now = self._clock()
            count = len(self.endpoints)
            for offset in range(count):
                endpoint = self.endpoints[(self._next + offset) % count]
                if self._out_until.get(endpoint, 0.0) <= now:
                    self._next = (self._next + offset + 1) % count
                    return endpoint
            return min(self.endpoints, key=lambda e: self._out_until.get(e, 0.0))

    def bench(self, endpoint: str) -> bool:
        """Take ``endpoint`` out for ``bench_s``; True if it was in the pool (a fact to record),
        False if it was out already or the pool has no other endpoint."""
        with self._lock:
            now = self._clock()
            if len(self.endpoints) < 2 or self._out_until.get(endpoint, 0.0) > now:
                return False
            self._out_until[endpoint] = now + self.bench_s
            return True

    def benched(self) -> list[str]:
        """The endpoints out of the pool now."""
        with self._lock:
            now = self._clock()
            return [e for e in self.endpoints if self._out_until.get(e, 0.0) > now]
