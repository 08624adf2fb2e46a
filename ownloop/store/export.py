"""Writing the index's views to Parquet files, one per view.

``ownloop sql`` runs on a connection that cannot write files (external access is off and COPY is
refused), so export opens its own read-only connection under the shared index lock: it reads the
database and writes only the Parquet files it is asked for.

The files are for other tools (pyarrow, polars, pandas, Spark): JSON columns are written as UTF-8
strings holding the JSON text (DuckDB's JSON type would arrive as binary), and timestamps,
stored as UTC, as timestamps adjusted to UTC (``isAdjustedToUTC``), so a reader shows them in UTC.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import duckdb

from ownloop.errors import OwnloopError
from ownloop.store.locks import hold_lock
from ownloop.store.query import describe_error, sql_literal

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = ["ViewFile", "export_views"]


class ViewFile(NamedTuple):
    """One written Parquet file: the view, its rows and where it went."""

    view: str
    rows: int
    path: Path


def export_views(
    store: Store, out: str | os.PathLike[str], run_id: str | None = None
) -> list[ViewFile]:
    """Write every view of the index as ``<out>/<view>.parquet`` (only ``run_id``'s rows if given).

    A view with a ``session_id`` column keeps the rows of the run's sessions; ``runs`` keeps the
    run's row. Each file is written under a temporary name and renamed when complete.

    Raises:
        OwnloopError: the run is not in the store, or a file cannot be written.
    """
    store.sync()
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    index = store.index()
    written = []
    with hold_lock(index.lock_path, exclusive=False):
        con = duckdb.connect(str(index.path), read_only=True)
        try:
            if run_id is not None:
                found = con.execute(
                    "select count(*) from session_started where run_id = ?", [run_id]
                ).fetchone()
                started = con.execute(
                    "select count(*) from run_started where run_id = ?", [run_id]
                ).fetchone()
                if not (found and found[0]) and not (started and started[0]):
                    raise OwnloopError(
                        f"no run {run_id!r} in the store. List runs with: ownloop sql "
                        '"select run_id, agent, sessions from runs"'
                    )
            views = [
                name
                for (name,) in con.execute(
                    "select view_name from duckdb_views() where not internal order by view_name"
                ).fetchall()
            ]
            for view in views:
                query = f'select {_columns(con, view)} from "{view}"' + _run_filter(
                    con, view, run_id
                )
                target = folder / f"{view}.parquet"
                partial = folder / f".{view}.parquet.{os.getpid()}.tmp"
                try:
                    # COPY answers with the rows it wrote: the view is computed once.
                    row = con.execute(
                        f"copy ({query}) to {sql_literal(str(partial))} (format parquet)"
                    ).fetchone()
                except duckdb.Error as exc:
                    partial.unlink(missing_ok=True)
                    raise OwnloopError(f"cannot write {target}: {describe_error(exc)}") from None
                os.replace(partial, target)
                written.append(ViewFile(view, int(row[0]) if row else 0, target))
        finally:
            con.close()
    return written


def _run_filter(con: duckdb.DuckDBPyConnection, view: str, run_id: str | None) -> str:
    if run_id is None:
        return ""
    columns = {name for (name, *_) in con.execute(f'describe select * from "{view}"').fetchall()}
    if "session_id" in columns:
        return (
            " where session_id in (select session_id from session_started where run_id = "
            f"{sql_literal(run_id)})"
        )
    if "run_id" in columns:
        return f" where run_id = {sql_literal(run_id)}"
    return ""


def _columns(con: duckdb.DuckDBPyConnection, view: str) -> str:
    """The view's columns for other tools: JSON as text, UTC timestamps marked as UTC."""
    out = []
    for name, kind, *_ in con.execute(f'describe select * from "{view}"').fetchall():
        column = '"' + str(name).replace('"', '""') + '"'
        if kind == "JSON":
            out.append(f"cast({column} as varchar) as {column}")
        elif kind == "JSON[]":
            out.append(f"cast({column} as varchar[]) as {column}")
        elif kind == "TIMESTAMP":
            out.append(f"timezone('UTC', {column}) as {column}")
        else:
            out.append(column)
    return ", ".join(out) or "*"
