"""The store: an append-only event journal, content-addressed blobs and a DuckDB index.

The small public API later parts build on::

    store = open_store("ownloop-data")
    with store.stream() as stream:          # a new stream; this process is its one writer
        stream.append([event, event, ...])  # one fsync for the batch
    sha = store.put_blob(png_bytes)
    store.sql("select * from sessions")     # brings the index up to date, read-only
    store.sql_arrow("select * from steps")  # the same, as a pyarrow.Table
    store.session_events(session_id)        # every event of a session, from every stream
    store.verify()                          # hash chains and blobs
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ownloop.errors import OwnloopError
from ownloop.store.blobs import BlobStore, MissingBlob
from ownloop.store.disk import disk_error
from ownloop.store.events import Event
from ownloop.store.ids import new_id
from ownloop.store.journal import StreamWriter, read_lines

if TYPE_CHECKING:
    import pyarrow as pa

    from ownloop.store.index import Index, Params, SyncResult
    from ownloop.store.query import QueryError, QueryResult
    from ownloop.store.verify import VerifyReport

# DuckDB and pyarrow load only when the index is used: recorders append to the journal and never
# pay for them.
_LAZY = {
    "QueryError": "ownloop.store.query",
    "QueryResult": "ownloop.store.query",
    "SyncResult": "ownloop.store.index",
    "VerifyReport": "ownloop.store.verify",  # and its process pool: only `verify` needs them
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ownloop.store' has no attribute {name!r}")


__all__ = [
    "DEFAULT_STORE",
    "MissingBlob",
    "NoStore",
    "OwnloopError",
    "QueryError",
    "QueryResult",
    "Store",
    "SyncResult",
    "VerifyReport",
    "new_id",
    "open_store",
]

DEFAULT_STORE = "ownloop-data"


class Store:
    """A store directory: ``journal/*.jsonl``, ``blobs/ab/<sha256>``, ``index.duckdb``."""

    def __init__(self, root: Path, *, fsync: bool = True) -> None:
        self.root = root
        self.journal_dir = root / "journal"
        self.index_path = root / "index.duckdb"
        self.blobs = BlobStore(root / "blobs", fsync=fsync)
        self._fsync = fsync

    # -------------------------------------------------------------- writing
    def stream(self, stream_id: str | None = None) -> StreamWriter:
        """A new stream with this process as its only writer (the id is generated if not given)."""
        try:
            self.journal_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise (disk_error(exc, self.journal_dir) or exc) from None
        return StreamWriter(
            self.journal_dir / f"{stream_id or new_id()}.jsonl",
            fsync=self._fsync,
            before_write=self.blobs.settle,
        )

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` once (atomically) and return its sha256."""
        return self.blobs.put(data)

    def get_blob(self, sha256: str) -> bytes:
        """The bytes of a blob (a compacted screenshot: a PNG of the same pixels, see
        ``ownloop compact``); raises ``MissingBlob`` when it is not in the store."""
        return self.blobs.get(sha256)

    # -------------------------------------------------------------- reading
    def has_streams(self) -> bool:
        """Whether any stream has been written: while none has, every query of the index
        answers nothing (a recorder's first run asks none, and builds no index to ask)."""
        try:
            with os.scandir(self.journal_dir) as entries:
                return any(entry.name.endswith(".jsonl") for entry in entries)
        except FileNotFoundError:
            return False

    def stream_paths(self) -> list[Path]:
        if not self.journal_dir.exists():
            return []
        return sorted(self.journal_dir.glob("*.jsonl"))

    def read_stream(self, stream_id: str) -> Iterator[Event]:
        """The events of one stream in order; a torn last line is skipped."""
        path = self.journal_dir / f"{stream_id}.jsonl"
        if not path.exists():
            raise OwnloopError(f"no stream '{stream_id}' in {self.journal_dir}")
        for line in read_lines(path):
            yield line.event

    # -------------------------------------------------------------- the index
    def index(self) -> Index:
        """The DuckDB index (opened per call, under the index lock)."""
        from ownloop.store.index import Index

        return Index(self)

    def sync(self) -> SyncResult:
        """Bring the DuckDB index up to date with the journal; returns what was ingested."""
        return self.index().sync()

    def rebuild_index(self, *, accept_damaged: bool = False) -> SyncResult:
        """Drop the DuckDB index and rebuild it from the whole journal.

        Lines whose checksum or chain fails are quarantined (the ``damage`` view lists them)
        unless ``accept_damaged``.
        """
        return self.index().rebuild(accept_damaged=accept_damaged)

    def sql(self, query: str, params: Params = None, first: int | None = None) -> QueryResult:
        """Run a read-only query after bringing the index up to date: columns, types, rows.

        ``params`` are bound to the query's ``?`` (or ``$name``) placeholders, e.g.
        ``store.sql("select * from sessions where run_id = ?", [run_id])``. ``first``: fetch
        only the first rows; the result's ``total`` counts them all.
        """
        return self.index().query(query, params, first)

    def version(self) -> str:
        """A token that changes whenever an event is appended anywhere (every journal stream's
        size): equal tokens, equal answers from the index. Costs a directory listing."""
        sizes = self.index().journal_sizes()
        return hashlib.sha256(repr(sorted(sizes.items())).encode()).hexdigest()

    def sql_many(self, queries: Sequence[tuple[str, Params]]) -> list[QueryResult]:
        """Several read-only queries, (sql, params) each, after one sync and over one
        connection to the index (what a page that asks several wants)."""
        return self.index().query_many(queries)

    def sql_arrow(self, query: str, params: Params = None) -> pa.Table:
        """Like ``sql``, returning a ``pyarrow.Table``."""
        return self.index().query_arrow(query, params)

    def session_events(self, session_id: str) -> list[Event]:
        """Every event about one session, from every stream, in the order they happened."""
        return self.index().session_events(session_id)

    def events(self, session_id: str) -> Iterator[Event]:
        """``session_events`` as an iterator (the name STYLE.md's store contract uses)."""
        return iter(self.session_events(session_id))

    def verify(
        self,
        *,
        run_id: str | None = None,
        fingerprint: str | None = None,
        incremental: bool = False,
    ) -> VerifyReport:
        """Check every stream's hash chain and every referenced blob; with ``run_id``, also
        that the run is sealed (with ``fingerprint``, when given) and unchanged since. With
        ``incremental``, what the last sound check found unchanged is not read again."""
        from ownloop.store.verify import verify_store

        return verify_store(self, run_id=run_id, fingerprint=fingerprint, incremental=incremental)


class NoStore(OwnloopError):
    """``open_store(..., create=False)`` found no store there (nothing, or a folder without one)."""


def open_store(
    root: str | os.PathLike[str] | None = None, *, fsync: bool = True, create: bool = True
) -> Store:
    """Open the store at ``root``, ``$OWNLOOP_STORE`` or ``./ownloop-data``.

    With ``create`` (the default) a missing store is made; without it (commands that only read
    what is there) a path that holds no store raises ``NoStore`` and nothing is created.
    """
    path = Path(root or os.environ.get("OWNLOOP_STORE") or DEFAULT_STORE)
    if path.exists() and not path.is_dir():
        raise OwnloopError(f"{path} is a file, not a store directory. Pass --store DIR")
    if not create:
        _must_be_a_store(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise (disk_error(exc, path) or exc) from None
    for part in ("journal", "blobs"):
        # Read as an empty folder, a file here would make a damaged store look clean.
        if (path / part).exists() and not (path / part).is_dir():
            raise OwnloopError(
                f"{path / part} is a file, but a store keeps a folder there: {path} is damaged or "
                f"not an ownloop store. Move that file away, or pass --store DIR"
            )
    return Store(path, fsync=fsync)


def _must_be_a_store(path: Path) -> None:
    if not path.exists():
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:  # the same words as a store that cannot be made there
            raise OwnloopError(
                f"{path} cannot be a folder: {blocker} is a file. Pass --store DIR naming a folder"
            )
        raise NoStore(
            f"there is no store at {path}. Pass --store DIR (or set $OWNLOOP_STORE) "
            "naming one, or record one there with: ownloop demo"
        )
    if not any((path / part).exists() for part in ("journal", "blobs", "index.duckdb")):
        raise NoStore(
            f"{path} is not an ownloop store (it has no journal folder). Pass --store "
            "DIR (or set $OWNLOOP_STORE) naming one"
        )
