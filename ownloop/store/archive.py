"""``ownloop archive``: a sealed run's rows leave the DuckDB file for Parquet files of their own.

A sealed run takes no more events, so its rows in the index never change again: they can live
in ``<store>/archive/<run_id>/``, one Parquet file per table, written once. The index reads them
through views, so every query answers the same either way:

- The tables that hold a stream's rows (one per event kind, ``journal``, ``session_facts``,
  ``skipped_lines``, ``damaged_lines``) live in the schema ``hot``; ingest writes there (its
  connection searches ``hot`` first). Under each table's own name, ``main`` has a view: the hot
  rows, then the archived rows read with ``read_parquet`` and cast to the table's types. The
  views of ``views.sql`` are built over those names, so they need no change at all.
- A view cannot take a changing list of files, so the union views are recreated whenever the set
  of archived runs changes (the ``archives`` meta row lists them).
- Archiving moves whole streams: those holding the run's events and nobody else's. Their marks
  stay in ``streams``, and each folder's ``manifest.json`` lists them (bytes ingested, size seen,
  the chain's head there), so ``index --rebuild`` knows them and reads only the other streams.
- A session's facts are archived when all its events are; a later event about it (a regrade
  against the seal) recomputes them into ``hot.session_facts``, whose row then wins.

The journal stays the source of truth and the archive is a cache derived from it: a folder
whose streams are shorter than it says, or missing, or written for another index schema is not
used (its streams are read from the journal again), and deleting ``archive/`` followed by
``ownloop index --rebuild`` gives the same index.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from ownloop.errors import OwnloopError
from ownloop.store.schema import TABLES

if TYPE_CHECKING:
    import duckdb

    from ownloop.store import Store

__all__ = [
    "ARCHIVE_DIR",
    "ArchiveResult",
    "HOT_TABLES",
    "archive_runs",
    "archived_run_ids",
    "attach_archives",
    "compact",
    "folder_name",
    "move_runs",
]

ARCHIVE_DIR = "archive"
# The tables whose rows belong to a stream (session_facts: to a session) and so can be archived.
HOT_TABLES = (
    *(table.name for table in TABLES),
    "journal",
    "session_facts",
    "skipped_lines",
    "damaged_lines",
)
_MANIFEST = "manifest.json"
_PLAIN = re.compile(r"[A-Za-z0-9._-]{1,100}")
_STREAMS = "streams.parquet"  # the archived streams' rows of the ``streams`` table


class _Folder(msgspec.Struct):
    """``manifest.json`` of one run's archive folder."""

    run_id: str
    fingerprint: str  # the index schema the Parquet files were written for
    # stream -> (bytes ingested, size seen, the chain's last sum, its last seq)
    streams: dict[str, tuple[int, int, str, int]]
    tables: list[str]  # the tables with rows here (one <table>.parquet each)
    events: int


class ArchiveResult(NamedTuple):
    """What archiving one run did."""

    run_id: str
    streams: int
    events: int
    bytes: int  # of Parquet written
    already: bool = False

    def line(self) -> str:
        if self.already:
            return f"run {self.run_id} is archived already"
        return (
            f"archived run {self.run_id}: {self.events} events from {self.streams} streams "
            f"moved to {ARCHIVE_DIR}/{folder_name(self.run_id)}/ "
            f"({self.bytes / 1e6:.1f} MB of Parquet)"
        )


def archive_runs(store: Store, run_ids: list[str] | None) -> list[ArchiveResult]:
    """Move sealed runs (``None``: every sealed run) out of the DuckDB file into Parquet.

    Raises:
        OwnloopError: a run does not exist or is not sealed.
    """
    from ownloop.store.seal import run_seals

    seals = run_seals(store)  # also brings the index up to date
    if run_ids is None:
        run_ids = sorted(seals)
    for run_id in run_ids:
        if run_id in seals:
            continue
        if not store.sql("select 1 from runs where run_id = $run", {"run": run_id}).rows:
            raise OwnloopError(
                f"no run {run_id} in {store.root}. List runs with: "
                'ownloop sql "select run_id from runs"'
            )
        raise OwnloopError(
            f"run {run_id} is not sealed, so it can still change: seal it first with: "
            f"ownloop seal --run {run_id}"
        )
    return store.index().archive(run_ids)


# ------------------------------------------------------------------ inside the index


def folder_name(run_id: str) -> str:
    """The archive folder's name for ``run_id``: the id itself when it is a plain file name,
    else a hash of it (a run id is any text; its manifest keeps the id)."""
    if _PLAIN.fullmatch(run_id) and not run_id.startswith("."):
        return run_id
    return "run-" + hashlib.sha256(run_id.encode()).hexdigest()[:16]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _read_folder(path: Path) -> _Folder | None:
    try:
        return msgspec.json.decode((path / _MANIFEST).read_bytes(), type=_Folder)
    except (OSError, msgspec.DecodeError):
        return None


def _folders(root: Path, fingerprint: str, sizes: dict[str, int]) -> list[tuple[Path, _Folder]]:
    """The archive folders a new index can use: written for this schema, every stream of
    theirs still in the journal and at least as long as when they were archived."""
    try:
        paths = sorted((root / ARCHIVE_DIR).iterdir())
    except FileNotFoundError:
        return []
    usable = []
    for path in paths:
        if path.name.startswith("."):
            continue  # a folder being written, or left by a crash
        folder = _read_folder(path)
        if (
            folder is not None
            and folder.fingerprint == fingerprint
            and all(sizes.get(stream, -1) >= mark[0] for stream, mark in folder.streams.items())
        ):
            usable.append((path, folder))
    return usable


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    return [
        (str(name), str(kind))
        for name, kind in con.execute(
            "select column_name, data_type from duckdb_columns() "
            "where schema_name = 'hot' and table_name = ? order by column_index",
            [table],
        ).fetchall()
    ]


def _create_union_views(
    con: duckdb.DuckDBPyConnection, folders: list[tuple[Path, _Folder]]
) -> None:
    """(Re)create each hot table's view in ``main``: hot rows, then the archived ones."""
    for table in HOT_TABLES:
        files = [
            str(path / f"{table}.parquet") for path, folder in folders if table in folder.tables
        ]
        sql = f'create or replace view main."{table}" as select * from hot."{table}"'
        if files:
            cast = ", ".join(f'"{name}"::{kind} as "{name}"' for name, kind in _columns(con, table))
            listed = ", ".join(map(_quote, files))
            archived = f"select {cast} from read_parquet([{listed}]) a"
            if table == "session_facts":  # a session's facts recomputed since: the hot row wins
                archived += " anti join hot.session_facts h using (session_id)"
            sql += f" union all {archived}"
        con.execute(sql)
    runs = sorted(folder.run_id for _, folder in folders)
    con.execute(
        "insert or replace into meta values ('archives', ?)", [msgspec.json.encode(runs).decode()]
    )


def attach_archives(
    con: duckdb.DuckDBPyConnection,
    root: Path | None,
    fingerprint: str,
    sizes: dict[str, int],
    *,
    moved: bool = False,
) -> None:
    """On a new index (inside its creating transaction): move the hot tables into ``hot``,
    read the usable archive folders through the union views and mark their streams ingested.
    ``root``: the store's (None: no archive, as in the template of ``template.py``);
    ``moved``: the tables are in ``hot`` and read by views of their own already (a copy of the
    template), so only a store with usable archive folders has anything to do."""
    if not moved:
        con.execute("create schema hot")
        for table in HOT_TABLES:
            con.execute(f'create table hot."{table}" as from main."{table}" limit 0')
            con.execute(f'drop table main."{table}"')
    # The views name the Parquet files by absolute path.
    folders = [] if root is None else _folders(root.resolve(), fingerprint, sizes)
    if moved and not folders:
        return
    _create_union_views(con, folders)
    marks = [str(path / _STREAMS) for path, folder in folders if folder.streams]
    if marks:  # in bulk: a row at a time costs a millisecond each
        listed = ", ".join(map(_quote, marks))
        con.execute(f"insert into streams select * from read_parquet([{listed}])")


def archived_run_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The runs this index reads from archive folders."""
    row = con.execute("select value from meta where key = 'archives'").fetchone()
    return msgspec.json.decode(row[0], type=list[str]) if row else []


def _fill_folder(
    con: duckdb.DuckDBPyConnection, temporary: Path, run_id: str, fingerprint: str
) -> tuple[_Folder, int]:
    """Write the Parquet files and the manifest of the streams in ``_archiving``."""
    tables, written, events = [], 0, 0
    for table in HOT_TABLES:
        if table == "session_facts":
            rows = (
                "select * from hot.session_facts where session_id in (select session_id from "
                "_archived_sessions)"
            )
        else:
            rows = f'select * from hot."{table}" where stream in (select stream from _archiving)'
        target = temporary / f"{table}.parquet"
        count = con.execute(
            f"copy ({rows}) to {_quote(str(target))} (format parquet, compression zstd)"
        ).fetchone()
        if count is None or count[0] == 0:
            target.unlink(missing_ok=True)
            continue
        tables.append(table)
        written += target.stat().st_size
        if table == "journal":
            events = int(count[0])
    marked = "select * from streams where stream in (select stream from _archiving)"
    con.execute(f"copy ({marked}) to {_quote(str(temporary / _STREAMS))} (format parquet)")
    marks = {
        str(stream): (int(i), int(z), str(p or ""), int(q or 0))
        for stream, i, z, p, q in con.execute(
            "select stream, ingested, size, last_sum, last_seq from streams "
            "where stream in (select stream from _archiving)"
        ).fetchall()
    }
    folder = _Folder(run_id, fingerprint, marks, tables, events)
    (temporary / _MANIFEST).write_bytes(msgspec.json.encode(folder))
    return folder, written


def _write_folder(
    con: duckdb.DuckDBPyConnection, root: Path, run_id: str, fingerprint: str
) -> tuple[_Folder, int]:
    """Write the run's Parquet files into a temporary folder, then rename it into place."""
    archive = root / ARCHIVE_DIR
    temporary = archive / f".{folder_name(run_id)}.{os.getpid()}.tmp"
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        folder, written = _fill_folder(con, temporary, run_id, fingerprint)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)  # e.g. a full disk: leave nothing behind
        raise
    final = archive / folder_name(run_id)
    if final.exists():  # left by an archive whose index was rebuilt for another schema
        stale = archive / f".{folder_name(run_id)}.{os.getpid()}.old"
        os.replace(final, stale)
        shutil.rmtree(stale, ignore_errors=True)
    os.replace(temporary, final)
    return folder, written


def move_runs(
    con: duckdb.DuckDBPyConnection, root: Path, run_ids: list[str], fingerprint: str
) -> list[ArchiveResult]:
    """Archive each run's streams (those holding its events and no other run's), then
    delete their rows from the hot tables and recreate the union views, in one transaction."""
    root = root.resolve()  # the views name the Parquet files by absolute path
    done = set(archived_run_ids(con))
    results = []
    for run_id in run_ids:
        if run_id in done:
            results.append(ArchiveResult(run_id, 0, 0, 0, already=True))
            continue
        con.execute(
            "create or replace temp table _archiving as select stream from hot.journal "
            "group by stream having bool_and(run_id = ?)",
            [run_id],
        )
        con.execute(
            "create or replace temp table _archived_sessions as "
            "select distinct session_id from hot.journal where stream in (select stream from "
            "_archiving) and session_id <> '' except select session_id from hot.journal "
            "where stream not in (select stream from _archiving)"
        )
        (streams,) = con.execute("select count(*) from _archiving").fetchone() or (0,)
        folder, written = _write_folder(con, root, run_id, fingerprint)
        con.begin()
        for table in HOT_TABLES:
            if table == "session_facts":
                con.execute(
                    "delete from hot.session_facts where session_id in "
                    "(select session_id from _archived_sessions)"
                )
            else:
                con.execute(
                    f'delete from hot."{table}" where stream in (select stream from _archiving)'
                )
        done.add(run_id)
        paths = [root / ARCHIVE_DIR / folder_name(run) for run in sorted(done)]
        _create_union_views(
            con, [(path, f) for path in paths if (f := _read_folder(path)) is not None]
        )
        con.commit()
        results.append(ArchiveResult(run_id, int(streams), folder.events, written))
    con.execute("drop table if exists _archiving")
    con.execute("drop table if exists _archived_sessions")
    return results


def compact(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Copy the index into a new file and close ``con``: DuckDB reuses the blocks that deleted
    rows freed but never gives them back, so the file shrinks only when rewritten."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.compact")
    temporary.unlink(missing_ok=True)
    (name,) = con.execute("select current_database()").fetchone() or ("",)
    try:
        con.execute(f"attach {_quote(str(temporary))} as _compact")
        con.execute(f'copy from database "{name}" to _compact')
        con.execute("detach _compact")
        con.close()
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
