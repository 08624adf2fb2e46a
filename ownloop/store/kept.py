"""The index kept open between reads, for a long-lived reader such as ``ownloop view``.

``Store.sql`` checks that the index matches the journal (two stats when the journal's change
marker has not moved, else a stat of every stream: about 80 ms at 10k streams) and attaches the
index to the process's DuckDB (about 10 ms, and its cache starts empty) on every call. A
``KeptIndex`` does both less often:

- it keeps one read-only connection, and the index lock shared, while it is read, and lets both
  go after ``idle`` seconds without a read, and for a moment every ``linger`` seconds while reads
  keep coming (so other processes can sync or rebuild the index: a process waiting for the lock
  gets it then);
- a new stream (a new session) is seen at the next read: creating a file changes the journal
  folder's modification time, one stat;
- a stream that grew is seen within ``every`` seconds: while reads come, a thread looks at the
  journal's change marker (``changes.py``) that often, scans the streams' sizes when it moved,
  and syncs the index (the connection closed meanwhile) when they changed. ``every`` is
  ``interval``, or ten times what a scan took if that is more (a store of many streams is not
  scanned all the time). The first read after an idle spell scans first.

``as_of`` says when the journal was last scanned: what a page read from it can be behind by.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, NamedTuple

from ownloop.errors import OwnloopError
from ownloop.store import Store
from ownloop.store.changes import Look, look
from ownloop.store.index import Index
from ownloop.store.locks import hold_lock
from ownloop.store.query import open_read_only

if TYPE_CHECKING:
    import duckdb

    from ownloop.store.index import SyncResult

__all__ = ["KeptIndex"]

# A folder changed this close to the stat that saw it may change again within the same clock
# tick without its time moving (the kernel's file times are coarse): look again next read.
_RACY_NS = 50_000_000
_LET_IN = 0.3  # seconds the lock is left free every ``linger`` seconds


class _Scan(NamedTuple):
    """The journal as one scan saw it."""

    folder: tuple[int, int] | None  # the journal folder's (mtime, inode)
    now: int  # wall-clock ns when it was taken
    started: float  # time.monotonic() then
    took: float  # seconds the scan took
    look: Look  # the journal's change marker, taken before the sizes
    sizes: dict[str, int] | None  # None: the marker says nothing was appended (none taken)
    seen: object  # what the version is made of: the sizes, or the marker's remembered stats


class _Held(Store):
    """The store as seen through a kept connection: queries skip the sync and the lock."""

    def __init__(self, kept: KeptIndex, connection: duckdb.DuckDBPyConnection) -> None:
        super().__init__(kept.store.root, fsync=False)
        self.blobs = kept.store.blobs  # the same blobs (a read through it writes none)
        self._kept = kept
        self._connection = connection

    def index(self) -> Index:
        return Index(self, self._connection)

    def version(self) -> str:
        return self._kept.version

    def sync(self) -> SyncResult:
        raise OwnloopError("a kept index is synced by its KeptIndex, not through a read")

    def rebuild_index(self, *, accept_damaged: bool = False) -> SyncResult:
        raise OwnloopError("a kept index cannot be rebuilt through a read")


class KeptIndex:
    """``store``'s index, kept open for reads; ``with kept.reading() as store: ...``.

    Use ``close()`` (or ``with``) to stop its thread and let the index go. With ``keep=False``
    every read scans the journal and opens the index, then lets it go (what ``Store.sql`` does
    for each query): the baseline ``bench/view_bench.py`` measures against.
    """

    def __init__(
        self,
        store: Store,
        *,
        interval: float = 1.0,
        idle: float = 5.0,
        linger: float = 30.0,
        keep: bool = True,
    ) -> None:
        self.store = store
        self.interval = interval
        self.idle = idle
        self.linger = linger
        self.keep = keep
        self.as_of = 0.0  # wall-clock time of the last scan of the journal (0: none yet)
        self.every = interval  # seconds between scans while reads come
        # Store.version's token as of that scan (None: not hashed yet, from ``_versioned``)
        self._version: str | None = ""
        self._versioned: object = {}
        self._seen: object = None  # the last scan's ``seen`` (None: scan before the next read)
        self._folder: tuple[int, int] | None = None  # the journal folder's (mtime, inode)
        self._racy = False
        self._lock = threading.RLock()
        self._stack: ExitStack | None = None  # the shared index lock, while held
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._held: _Held | None = None  # the store over that connection
        self._last_read = 0.0
        self._opened = 0.0  # time.monotonic() when the connection was opened
        self._scanned = 0.0  # time.monotonic() of the scan pages show
        self._closing = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------- reading
    def prepare(self) -> None:
        """Scan, sync and open now, so that the first read does not wait for it; an error
        (e.g. a read-only store whose index is out of date) is left for a read to report."""
        with self._lock:
            if self._closed:
                return
            try:
                with self.reading():
                    pass
            except Exception:  # the next read meets it again, and says it
                self._release()
                self._seen = None

    @contextmanager
    def reading(self) -> Iterator[Store]:
        """The store to read from, as of the last scan (reads are taken one at a time)."""
        with self._lock:
            if self._seen is None or self._racy or self._folder != self._folder_now():
                self._scan()
            if self._held is None:
                self._open()
            assert self._held is not None
            self._last_read = time.monotonic()
            if not self.keep:
                try:
                    yield self._held
                finally:
                    self._release()
                    self._seen = None
                return
            self._start_thread()
            yield self._held

    def _folder_now(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.store.journal_dir)
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_ino

    def _scan(self) -> None:
        """Look at every stream's size; sync the index when one changed since the last scan."""
        self._apply(self._measure())

    def _measure(self) -> _Scan:
        """The journal as it is now (no lock needed: reads go on meanwhile)."""
        folder = self._folder_now()
        now = time.time_ns()
        started = time.monotonic()
        index = Index(self.store)
        before = look(self.store.journal_dir)
        remembered = index.unchanged_since(before)
        sizes: dict[str, int] | None = None
        seen: object
        if remembered is not None:  # two stats, not one per stream
            seen = (remembered.marker, remembered.folder)
        else:
            sizes = seen = index.journal_sizes()
        return _Scan(folder, now, started, time.monotonic() - started, before, sizes, seen)

    def _apply(self, scan: _Scan) -> None:
        """Take ``scan`` as what the index shows (syncing it first when it changed), unless a
        later scan was taken already."""
        if scan.started < self._scanned:
            return  # older than what pages already show: it must not turn the version back
        self._scanned = scan.started
        self.every = max(self.interval, 10 * scan.took)
        index = Index(self.store)
        if scan.seen != self._seen:
            if scan.sizes is None:
                pass  # the marker says the index holds every line
            elif not index.up_to_date(scan.sizes):  # not a second scan
                self._release()  # a sync takes the index lock exclusively
                self.store.sync()
            else:
                index.remember(scan.look)
            self._seen = self._versioned = scan.seen
            self._version = None  # hashed when asked: a command that reads once never asks
        elif scan.sizes is not None:
            index.remember(scan.look)  # the same sizes as a scan the index was found to hold
        self._folder = scan.folder
        self._racy = scan.folder is not None and scan.now - scan.folder[0] < _RACY_NS
        self.as_of = scan.now / 1e9

    @property
    def version(self) -> str:
        """``Store.version``'s token as of the last scan ("" before the first)."""
        with self._lock:
            if self._version is None:
                seen = self._versioned
                text = repr(sorted(seen.items()) if isinstance(seen, dict) else seen)
                self._version = hashlib.sha256(text.encode()).hexdigest()
            return self._version

    def _open(self) -> None:
        stack = ExitStack()
        try:
            stack.enter_context(hold_lock(Index(self.store).lock_path, exclusive=False))
            self._connection = open_read_only(self.store.index_path)
        except BaseException:
            stack.close()
            raise
        stack.callback(self._connection.close)
        self._stack = stack
        self._held = _Held(self, self._connection)
        self._opened = time.monotonic()

    def _release(self) -> None:
        """Close the connection and let the index lock go."""
        stack, self._stack, self._connection, self._held = self._stack, None, None, None
        if stack is not None:
            stack.close()  # closes the connection, then the lock

    # -------------------------------------------------------------- the thread
    def _start_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._closing.clear()
            self._thread = threading.Thread(
                target=self._watch, name="ownloop-kept-index", daemon=True
            )
            self._thread.start()

    def _watch(self) -> None:
        while not self._closing.wait(self.every):
            scan = self._measure() if time.monotonic() - self._last_read <= self.idle else None
            with self._lock:
                if self._closing.is_set():
                    return
                if scan is None or time.monotonic() - self._last_read > self.idle:
                    self._release()
                    self._seen = None  # the next read scans first
                    self._thread = None
                    return
                try:
                    self._apply(scan)
                except Exception:  # e.g. another process held the index too long
                    self._release()
                    self._seen = None  # the next read tries again, and says what is wrong
                if self._held is not None and time.monotonic() - self._opened > self.linger:
                    # A process waiting to sync or rebuild tries the lock every 0.1 s or so:
                    # no read takes it back meanwhile.
                    self._release()
                    time.sleep(_LET_IN)

    def close(self) -> None:
        """Stop watching the journal and let the index go."""
        self._closed = True
        self._closing.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
        with self._lock:
            self._release()
            self._thread = None

    def __enter__(self) -> KeptIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
