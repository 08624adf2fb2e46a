"""The index lock: DuckDB allows one writing process and no reader beside it, so every ownloop
process that opens ``index.duckdb`` first takes ``index.lock`` — exclusive to sync, shared to read.

Recorders never take it: they only append to the journal. The wait is bounded, then a one-line
error says what holds the index.
"""

from __future__ import annotations

import fcntl
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ownloop.errors import OwnloopError
from ownloop.store.disk import READ_ONLY_ERRNOS, disk_error

__all__ = ["IndexBusy", "LockNotNeeded", "hold_lock", "lock_timeout"]

_DEFAULT_TIMEOUT = 60.0


class IndexBusy(OwnloopError):
    """Another process held the index lock for longer than the bounded wait."""


class LockNotNeeded(Exception):
    """Raised by ``hold_lock`` when its ``unless`` turned true while it waited."""


def lock_timeout() -> float:
    """Seconds to wait for the index lock: ``$OWNLOOP_LOCK_TIMEOUT`` or 60."""
    try:
        return float(os.environ.get("OWNLOOP_LOCK_TIMEOUT", _DEFAULT_TIMEOUT))
    except ValueError:
        return _DEFAULT_TIMEOUT


def _open_lock(path: Path, *, exclusive: bool) -> int:
    """A descriptor of the lock file, created if missing; -1 when a shared lock needs none."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exclusive or exc.errno not in READ_ONLY_ERRNOS:
            raise (disk_error(exc, path) or exc) from None
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return -1


@contextmanager
def hold_lock(
    path: Path,
    *,
    exclusive: bool,
    timeout: float | None = None,
    unless: Callable[[], bool] | None = None,
) -> Iterator[None]:
    """Hold ``path`` locked (flock), waiting at most ``timeout`` seconds for it.

    ``unless`` is asked every half second of waiting: when it says the lock is no longer
    needed (e.g. another process brought the index up to date meanwhile), ``LockNotNeeded`` is
    raised instead of waiting on (a process that reads the index all the while, such as the
    viewer, may leave the lock free only for moments).

    A shared lock on a read-only store is taken through a read-only descriptor (flock does not
    need write access), so queries work there.

    Raises:
        IndexBusy: the lock was not free within ``timeout``.
        StoreNotWritable: an exclusive lock, and the lock file cannot be written (read-only
            store, no permission, full disk, a file in the way).
    """
    wait = lock_timeout() if timeout is None else timeout
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    fd = _open_lock(path, exclusive=exclusive)
    if fd < 0:
        yield  # a read-only store without a lock file: no process can be writing its index
        return
    try:
        deadline = time.monotonic() + wait
        pause = 0.005
        ask = time.monotonic() + 0.5
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if unless is not None and time.monotonic() >= ask:
                    if unless():
                        raise LockNotNeeded from None
                    ask = time.monotonic() + 0.5
                if time.monotonic() >= deadline:
                    raise IndexBusy(
                        f"the index is busy: another ownloop command held {path} for over "
                        f"{wait:g} s. Try again when it ends, or set OWNLOOP_LOCK_TIMEOUT"
                    ) from None
                # Jitter keeps two waiting processes from retrying in lock step.
                time.sleep(pause * (0.5 + random.random()))
                pause = min(pause * 2, 0.1)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock
