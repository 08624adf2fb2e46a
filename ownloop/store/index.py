"""The DuckDB index: a projection of the journal, brought up to date incrementally.

``index.duckdb`` holds one table per event kind (see ``schema.py``), bookkeeping tables and the
views of ``views.sql``. Each stream's ingested byte offset is remembered in the same transaction
as its events, so a sync that stops half way loses nothing and ingesting twice is a no-op.
``index.manifest`` caches the stream sizes seen by the last sync: when no journal file changed
size, a sync is a directory scan and opens no database. ``index.looked`` remembers the journal's
change marker as it was when the index last matched the journal (``changes.py``): a query finds
nothing appended since with two stats, not one per stream.

A new index starts as a copy of an empty one built once per index format (``template.py``).

The index is only ever opened under ``index.lock`` (exclusive to sync, shared to query); recorders
never open it. How a sync's new lines are read, decoded and written is ``pipeline.py``'s.
"""

from __future__ import annotations

import hashlib
import heapq
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import msgspec

from ownloop.errors import OwnloopError
from ownloop.store.archive import ArchiveResult, attach_archives, compact, move_runs
from ownloop.store.changes import Look, look, unchanged
from ownloop.store.disk import DISK_ERRNOS, READ_ONLY_ERRNOS, StoreNotWritable, disk_error
from ownloop.store.events import Event
from ownloop.store.journal import StreamFiles, decode_places
from ownloop.store.locks import LockNotNeeded, hold_lock
from ownloop.store.pipeline import SyncResult, ingest_streams, ingested_marks
from ownloop.store.query import QueryResult, describe_error, run_read_only, run_read_only_many
from ownloop.store.schema import BOOKKEEPING_DDL, TABLES, fingerprint
from ownloop.store.scores import refresh_bootstraps
from ownloop.store.template import place
from ownloop.version import __version__

if TYPE_CHECKING:
    import pyarrow as pa

    from ownloop.store import Store

__all__ = ["Index", "Params", "SyncResult", "VIEWS_SQL"]

Params = Sequence[Any] | Mapping[str, Any] | None
"""Values bound to a query's ``?`` or ``$name`` placeholders."""

VIEWS_SQL = resources.files("ownloop.store").joinpath("views.sql").read_text()
_FINGERPRINT = fingerprint(VIEWS_SQL)
# A new index file's block size (an existing file keeps its own). DuckDB's default, 256 KiB,
# leaves most of a small store's index empty; 64 KiB makes it 40-60% smaller (10k-200k events)
# at the same query cost.
_BLOCK_SIZE = str(64 << 10)


class _Manifest(msgspec.Struct):
    fingerprint: str
    sizes: dict[str, int]


class _Looked(msgspec.Struct):
    """``index.looked``: the journal's change marker when the index last matched the journal."""

    fingerprint: str
    at: int
    marker: tuple[int, int, int, int]
    folder: tuple[int, int, int, int]


def _search_hot_first(con: duckdb.DuckDBPyConnection) -> None:
    """Ingest writes the hot tables by their bare names; the views in ``main`` still read
    ``main``'s union views (a view binds names in its own schema first)."""
    con.execute("set search_path = 'hot,main'")


def _duckdb_disk_error(exc: duckdb.Error, path: Path) -> StoreNotWritable | None:
    """The one-line error for a DuckDB write that the disk refused (DuckDB gives only text)."""
    text = str(exc)
    for code in sorted(DISK_ERRNOS):
        if os.strerror(code) in text:
            return disk_error(OSError(code, os.strerror(code)), path)
    return None


def _fingerprint_in(con: duckdb.DuckDBPyConnection) -> str | None:
    row = con.execute("select value from meta where key = 'fingerprint'").fetchone()
    return None if row is None else str(row[0])


def _create_schema(
    con: duckdb.DuckDBPyConnection, root: Path | None, sizes: dict[str, int]
) -> None:
    """Create every table and view of an empty index (inside a transaction); ``root``: the
    store's, whose archive folders the union views read (None: none, the template)."""
    for statement in BOOKKEEPING_DDL:
        con.execute(statement)
    for table in TABLES:
        con.execute(table.ddl())
    con.execute(VIEWS_SQL)
    attach_archives(con, root, _FINGERPRINT, sizes)
    con.execute("insert into meta values ('fingerprint', ?)", [_FINGERPRINT])


def _template_key() -> str:
    """What a new index's template is built for: the schema, DuckDB's version, the block size
    and the code that builds it (this module's, the archive's union views')."""
    h = hashlib.sha256(f"{_FINGERPRINT} {duckdb.__version__} {_BLOCK_SIZE}".encode())
    for module in ("index.py", "archive.py"):
        try:
            h.update(resources.files("ownloop.store").joinpath(module).read_bytes())
        except OSError:  # installed without its sources: ownloop's version stands for them
            h.update(__version__.encode())
    return h.hexdigest()[:16]


def _build_template(path: Path) -> None:
    """Build the empty index at ``path`` (a template: no store's archives).

    Raises:
        OSError: DuckDB could not write it.
    """
    try:
        con = duckdb.connect(str(path), config={"default_block_size": _BLOCK_SIZE})
        try:
            con.begin()
            _create_schema(con, None, {})
            con.commit()
        finally:
            con.close()
    except duckdb.Error as exc:
        raise OSError(f"cannot build the index template {path}: {exc}") from exc


class Index:
    """The DuckDB index of one store. Cheap to create; every call opens and closes DuckDB.

    With ``connection`` (a read-only one whose holder keeps the index lock shared and the index
    up to date: ``ownloop.store.kept``), queries run on it as they are: no sync, no lock.
    """

    def __init__(self, store: Store, connection: duckdb.DuckDBPyConnection | None = None) -> None:
        self.journal_dir = store.journal_dir
        self.path = store.index_path
        self.lock_path = store.root / "index.lock"
        self.manifest_path = store.root / "index.manifest"
        self.looked_path = store.root / "index.looked"
        self._accept_damaged: bool | None = None  # None: as the index was built
        self._processes: int | None = None  # decoding processes; None: by the work's size
        self._connection = connection

    # -------------------------------------------------------------- syncing
    def sync(self, *, processes: int | None = None) -> SyncResult:
        """Ingest every journal line not yet in the index (waits for the index lock).

        ``processes``: how many worker processes check and decode the lines (0 or 1: none, all
        in this process); by default one per core when there are many new bytes, else none.

        Raises:
            StoreNotWritable: the index needs writing and the store is read-only or full.
        """
        before = look(self.journal_dir)
        if self.up_to_date():  # also what lets a read-only store answer queries
            self.remember(before)
            return SyncResult(0, 0, 0, False)
        self._processes = processes
        try:
            with self._writing("its index is out of date", unless=self.up_to_date):
                existed = self.path.exists()
                try:
                    return self._sync()
                except (duckdb.Error, OwnloopError, OSError):
                    if not existed:  # e.g. a full disk: a half-made file would not open
                        self._remove_files(quietly=True)
                    raise
        except LockNotNeeded:  # another process synced it while this one waited
            return SyncResult(0, 0, 0, False)

    def rebuild(self, *, accept_damaged: bool = False, processes: int | None = None) -> SyncResult:
        """Drop the index and ingest the whole journal again.

        With ``accept_damaged``, lines whose checksum or chain fails are projected all the same
        (still listed in the ``damage`` view), now and in later syncs of this index.
        ``processes``: as for ``sync``.

        Raises:
            StoreNotWritable: the store is read-only or full; a half-built index is removed.
        """
        self._accept_damaged = accept_damaged
        self._processes = processes
        with self._writing("its index cannot be rebuilt there"):
            try:
                self._remove_files()
                return self._sync()
            except (duckdb.Error, OwnloopError, OSError):
                # Free what the failed attempt took; the next sync starts from nothing.
                self._remove_files(quietly=True)
                raise

    def drop(self) -> int:
        """Remove the index's files, a projection of the journal that the next query builds
        again from nothing (``index --rebuild`` at once); the bytes freed."""
        with self._writing("its index cannot be dropped there"):
            files = (
                self.path,
                self.path.with_name(self.path.name + ".wal"),
                self.manifest_path,
                self.looked_path,
            )
            freed = sum(path.stat().st_size for path in files if path.exists())
            self._remove_files()
        return freed

    def _remove_files(self, *, quietly: bool = False) -> None:
        # The look first: without it a reader stats every stream.
        wal = self.path.with_name(self.path.name + ".wal")
        for path in (self.looked_path, self.path, wal, self.manifest_path):
            try:
                path.unlink(missing_ok=True)
            except OSError:
                if not quietly:
                    raise

    @contextmanager
    def _writing(self, state: str, unless: Callable[[], bool] | None = None) -> Iterator[None]:
        """Hold the index lock exclusively (``unless``: as for ``hold_lock``); the disk's
        refusals become one-line errors."""
        root = self.path.parent
        with ExitStack() as stack:
            try:
                stack.enter_context(hold_lock(self.lock_path, exclusive=True, unless=unless))
            except StoreNotWritable as exc:
                if exc.errno not in READ_ONLY_ERRNOS:
                    raise
                raise StoreNotWritable(
                    f"the store {root} is read-only and {state}: run `ownloop index` where the "
                    "store is writable, or copy it to a writable folder and pass --store DIR",
                    exc.errno,
                ) from None
            try:
                yield
            except duckdb.Error as exc:
                raise _duckdb_disk_error(exc, self.path) or exc from None
            except OSError as exc:
                raise disk_error(exc) or exc from None

    def journal_sizes(self) -> dict[str, int]:
        """Every journal stream's size in bytes, by stream name (no database opened)."""
        return self._sizes()

    def up_to_date(self, sizes: dict[str, int] | None = None) -> bool:
        """True when the last sync saw every stream at its current size (no database opened);
        ``sizes``: the streams' sizes when the caller just took them (``journal_sizes``)."""
        manifest = self._read_manifest()
        return (
            manifest is not None
            and manifest.fingerprint == _FINGERPRINT
            and self.path.exists()
            and manifest.sizes == (self._sizes() if sizes is None else sizes)
        )

    def current(self) -> bool:
        """True when the index shows every line appended to the journal (no database opened):
        two stats when the change marker says nothing was appended since the index last matched
        the journal, else ``up_to_date``'s stat of every stream (see ``changes.py``)."""
        now = look(self.journal_dir)
        if self.unchanged_since(now) is not None:
            return True
        if self.up_to_date():
            self.remember(now)
            return True
        return False

    def unchanged_since(self, now: Look) -> Look | None:
        """The look remembered when the index last matched the journal, when ``now`` (a look
        taken just before) finds nothing appended since; else None."""
        try:
            looked = msgspec.json.decode(self.looked_path.read_bytes(), type=_Looked)
        except (FileNotFoundError, msgspec.DecodeError):
            return None
        remembered = Look(looked.at, looked.marker, looked.folder)
        if looked.fingerprint != _FINGERPRINT or not unchanged(remembered, now):
            return None
        return remembered if self.path.exists() else None

    def remember(self, before: Look) -> None:
        """Remember ``before`` (a look taken before the streams were found ingested) for the
        next ``current``; a cache: when it cannot be written, readers stat every stream."""
        temporary = self.looked_path.with_name(f".index.looked.{os.getpid()}.tmp")
        try:
            temporary.write_bytes(msgspec.json.encode(_Looked(_FINGERPRINT, *before)))
            os.replace(temporary, self.looked_path)
        except OSError:  # e.g. a read-only store, where even removing nothing is refused
            with suppress(OSError):
                temporary.unlink(missing_ok=True)

    def _sizes(self) -> dict[str, int]:
        try:
            entries = os.scandir(self.journal_dir)
        except FileNotFoundError:
            return {}
        with entries:
            return {e.name[:-6]: e.stat().st_size for e in entries if e.name.endswith(".jsonl")}

    def _read_manifest(self) -> _Manifest | None:
        try:
            return msgspec.json.decode(self.manifest_path.read_bytes(), type=_Manifest)
        except (FileNotFoundError, msgspec.DecodeError):
            return None  # a cache: when it is missing or torn, the database is asked

    def _write_manifest(self, sizes: dict[str, int]) -> None:
        temporary = self.manifest_path.with_name(f".index.manifest.{os.getpid()}.tmp")
        try:
            temporary.write_bytes(msgspec.json.encode(_Manifest(_FINGERPRINT, sizes)))
            os.replace(temporary, self.manifest_path)
        except OSError:
            # Only a cache (e.g. the disk just filled up): without it the next sync asks the
            # database, which is already up to date. Leave no temporary file behind.
            temporary.unlink(missing_ok=True)
            self.manifest_path.unlink(missing_ok=True)

    def _sync(self) -> SyncResult:
        before = look(self.journal_dir)  # before the sizes: what lands after it moves the marker
        sizes = self._sizes()
        if self.up_to_date(sizes):
            self.remember(before)
            return SyncResult(0, 0, 0, False)
        con, rebuilt = self._open(sizes)
        try:
            accept = self._accepting(con)
            known = ingested_marks(con)
            runs: set[str] = set()
            result = ingest_streams(
                con, self.journal_dir, sizes, known, runs, accept, self._processes
            )
            # The seeded bootstrap of the runs whose units changed: of those the new rows
            # touched, of every run in a new index (an archived run's rows were not ingested).
            refresh_bootstraps(con, None if rebuilt else runs)
            seen = {s: mark.size for s, mark in known.items()}
        finally:
            con.close()
        self._write_manifest(seen)
        self.remember(before)
        return result._replace(rebuilt=rebuilt, accepted=accept)

    def _accepting(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Whether damaged lines are projected: as asked by a rebuild, else as the index was."""
        if self._accept_damaged is not None:
            con.execute(
                "insert or replace into meta values ('accept_damaged', ?)",
                ["1" if self._accept_damaged else "0"],
            )
            return self._accept_damaged
        row = con.execute("select value from meta where key = 'accept_damaged'").fetchone()
        return row is not None and row[0] == "1"

    def _connect(self) -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(self.path), config={"default_block_size": _BLOCK_SIZE})
        except duckdb.Error as exc:
            full = _duckdb_disk_error(exc, self.path)
            if full is not None:
                raise full from None
            raise OwnloopError(
                f"cannot open the index {self.path}: {describe_error(exc)}. If another program "
                "has it open, close it; else rebuild it with: ownloop index --rebuild"
            ) from None

    def _open(self, sizes: dict[str, int]) -> tuple[duckdb.DuckDBPyConnection, bool]:
        """Connect, with the schema in place: (the connection, whether the index was made from
        nothing). A new index is a copy of the template (``template.py``) when one can be had."""
        if not self.path.exists() and place(self.path, _template_key(), _build_template):
            con = None
            try:
                con = self._connect()
                if _fingerprint_in(con) == _FINGERPRINT:
                    con.begin()
                    attach_archives(con, self.path.parent, _FINGERPRINT, sizes, moved=True)
                    con.commit()
                    _search_hot_first(con)
                    return con, True
            except (duckdb.Error, OwnloopError):
                pass
            if con is not None:
                con.close()
            self._remove_files()  # not the index it should be: built in place instead
        con = self._connect()
        return con, self._ensure_schema(con, sizes)

    def _ensure_schema(self, con: duckdb.DuckDBPyConnection, sizes: dict[str, int]) -> bool:
        """Create the tables and views, dropping everything first when their definition changed."""
        try:
            if _fingerprint_in(con) == _FINGERPRINT:  # one query in the common case
                _search_hot_first(con)
                return False
        except duckdb.CatalogException:  # no meta table: a new or foreign file
            pass
        tables = {
            name
            for (name,) in con.execute(
                "select table_name from information_schema.tables where table_schema = 'main' "
                "and table_type = 'BASE TABLE'"
            ).fetchall()
        }
        con.begin()
        for (name,) in con.execute(
            "select view_name from duckdb_views() where not internal"
        ).fetchall():
            con.execute(f'drop view if exists "{name}"')
        for name in tables:
            con.execute(f'drop table "{name}"')
        con.execute("drop schema if exists hot cascade")
        # The store's root: archived runs' Parquet folders are in its archive/ (archive.py).
        _create_schema(con, self.path.parent, sizes)
        con.commit()
        _search_hot_first(con)
        return True

    def archive(self, run_ids: list[str]) -> list[ArchiveResult]:
        """Move the rows of these sealed runs' streams into Parquet folders read through
        views (see ``archive.py``), then rewrite the DuckDB file without them."""
        self.sync()
        with self._writing("its runs cannot be archived there"):
            con = self._connect()
            try:
                self._ensure_schema(con, self._sizes())
                results = move_runs(con, self.path.parent, run_ids, _FINGERPRINT)
                if not all(result.already for result in results):
                    compact(con, self.path)
            finally:
                con.close()
        return results

    # -------------------------------------------------------------- reading
    def query(self, sql: str, params: Params = None, first: int | None = None) -> QueryResult:
        """Bring the index up to date, then run ``sql`` read-only: column names, types, rows
        (``first``: only the first rows, and how many there are: ``QueryResult.total``)."""
        return self._read(sql, arrow=False, params=params, first=first)

    def query_arrow(self, sql: str, params: Params = None) -> pa.Table:
        """Like ``query``, returning an Arrow table."""
        return self._read(sql, arrow=True, params=params)

    def query_many(self, queries: Sequence[tuple[str, Params]]) -> list[QueryResult]:
        """Bring the index up to date, then run each (sql, params) read-only over one
        connection."""
        if self._connection is not None:
            return run_read_only_many(self.path, queries, self._connection)
        if not self.current():
            self.sync()
        with hold_lock(self.lock_path, exclusive=False):
            return run_read_only_many(self.path, queries)

    def _read(
        self, sql: str, *, arrow: bool, params: Params, first: int | None = None
    ) -> QueryResult | pa.Table:
        if self._connection is not None:
            return run_read_only(
                self.path, sql, arrow=arrow, params=params, connection=self._connection, first=first
            )
        if not self.current():
            self.sync()
        with hold_lock(self.lock_path, exclusive=False):
            return run_read_only(self.path, sql, arrow=arrow, params=params, first=first)

    def session_events(self, session_id: str) -> list[Event]:
        """Every event about one session, from every stream: streams in order, merged by time."""
        # Rows as tuples, not Arrow: a session's few hundred places need no pyarrow (whose
        # import, with numpy's, would be most of a cold ``show``).
        rows = self.query(
            "select stream, byte_offset, byte_length from journal where session_id = ? "
            "order by stream, seq",
            [session_id],
        ).rows
        places: dict[str, list[tuple[int, int]]] = {}
        for stream, offset, length in rows:
            places.setdefault(stream, []).append((offset, length))
        per_stream: list[list[Event]] = []
        with StreamFiles(self.journal_dir) as line_at:
            for stream, spans in places.items():
                raws = []
                with open(self.journal_dir / f"{stream}.jsonl", "rb") as f:
                    for offset, length in spans:
                        f.seek(offset)
                        raws.append(f.read(length - 1))  # without the newline
                offsets = [offset for offset, _ in spans]
                per_stream.append(decode_places(raws, [stream] * len(raws), offsets, line_at))
        return list(heapq.merge(*per_stream, key=lambda e: e.at))
