"""``--desktop URL`` (repeatable): the run's desktops, each held by one session at a time.

A worker takes a desktop when it claims its first task and keeps it until it stops; the
threaded executor starts one worker per desktop, so no two sessions ever share one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ownloop.errors import OwnloopError
from ownloop.world.desktop import DesktopWorld
from ownloop.world.guest import Guest

__all__ = ["DesktopLease", "DesktopPool", "DesktopTarget"]


class DesktopLease:
    """One worker's hold on one desktop; ``world`` makes each session's world on it."""

    def __init__(self, pool: DesktopPool, url: str) -> None:
        self.pool, self.url = pool, url

    def world(
        self,
        *,
        a11y: bool,
        settle_s: float,
        reset: str | None,
        put_blob: Callable[[bytes], str] | None = None,
    ) -> DesktopWorld:
        """A session's world on this desktop; with ``put_blob`` its exchanges are kept."""
        world = DesktopWorld(
            Guest(self.url), a11y=a11y, settle_s=settle_s, reset=reset, put_blob=put_blob
        )
        return world

    def close(self) -> None:
        """Give the desktop back to the pool."""
        self.pool.give(self.url)


class DesktopPool:
    def __init__(self, urls: Sequence[str]) -> None:
        self._free = list(dict.fromkeys(u.rstrip("/") for u in urls))
        self._lock = threading.Lock()
        if not self._free:
            raise OwnloopError("no desktop: give --desktop URL")

    def take(self) -> DesktopLease:
        """A free desktop.

        Raises:
            OwnloopError: every desktop is held (more workers than desktops).
        """
        with self._lock:
            if not self._free:
                raise OwnloopError("every --desktop is in use: workers = desktops")
            return DesktopLease(self, self._free.pop(0))

    def give(self, url: str) -> None:
        with self._lock:
            if url not in self._free:
                self._free.append(url)


class DesktopTarget(NamedTuple):
    """A desktop to re-execute a session on (``replay --desktop URL [--reset CMD]``)."""

    url: str
    reset: str | None = None

    def world(self, *, settle_s: float) -> DesktopWorld:
        return DesktopWorld(Guest(self.url), settle_s=settle_s, reset=self.reset)
