"""A batch's index rows as Arrow tables, and their write in one DuckDB transaction.

``ingest._Batch`` (in this process or in a decoding worker) builds a ``_Rows``; the process
that holds the index's DuckDB writes one or more of them with ``write_rows``: every table's
rows, the touched sessions' ``session_facts`` and the streams' new marks, committed together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from ownloop.store.journal import ChainState
from ownloop.store.schema import SESSION_FACTS_REFRESH

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


class _Mark(NamedTuple):
    """How far a stream is ingested: bytes, the size seen (-1: not finished), the chain there."""

    ingested: int
    size: int
    chain: ChainState


class _Rows(NamedTuple):
    """One batch's rows as Arrow tables, ready to be written."""

    inserts: list[tuple[str, pa.Table]]  # (table, rows), in the order they are inserted
    touched: pa.Table | None  # the session ids whose session_facts rows to recompute
    marks: pa.Table | None  # the streams' new rows in ``streams``

    def write(self, con: duckdb.DuckDBPyConnection) -> set[str]:
        """Insert the rows and move the streams' offsets, in one transaction: DuckDB's share of
        writing a batch, which runs without Python's GIL. Returns ``write_rows``'s runs."""
        return write_rows(con, [self])


def write_rows(con: duckdb.DuckDBPyConnection, batches: Sequence[_Rows]) -> set[str]:
    """Insert the rows of ``batches`` and move their streams' offsets, in one transaction.
    Returns the runs whose scored units these rows may change (``scores.refresh_bootstraps``):
    those of the sessions whose facts were recomputed, before and after, and of new run
    starts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    runs: set[str] = set()
    con.begin()
    for batch in batches:
        for table, rows in batch.inserts:
            _insert(con, table, rows)
            if table == "run_started":
                runs.update(pc.unique(rows.column("run_id")).to_pylist())
    touched = [batch.touched for batch in batches if batch.touched is not None]
    if touched:
        runs |= _refresh_session_facts(con, pa.concat_tables(touched))
    marks = [batch.marks for batch in batches if batch.marks is not None]
    if marks:
        con.register("_marks", pa.concat_tables(marks))
        con.execute("delete from streams where stream in (select stream from _marks)")
        con.execute("insert into streams select * from _marks")
        con.unregister("_marks")
    con.commit()
    return runs


def _marks_table(marks: dict[str, _Mark]) -> pa.Table:
    """The ``streams`` rows of these marks."""
    import pyarrow as pa

    names = list(marks)
    return pa.table(
        {
            "stream": pa.array(names, pa.string()),
            "ingested": pa.array([marks[n].ingested for n in names], pa.int64()),
            "size": pa.array([marks[n].size for n in names], pa.int64()),
            "last_sum": pa.array([marks[n].chain.prev for n in names], pa.string()),
            "last_seq": pa.array([marks[n].chain.seq for n in names], pa.int64()),
        }
    )


def _refresh_session_facts(con: duckdb.DuckDBPyConnection, touched: pa.Table) -> set[str]:
    """Recompute the ``session_facts`` rows of the sessions named in ``touched`` (inside the
    ingest's transaction, so the table always matches the events committed with it); the runs
    of those rows, before (archived ones too: ``main``'s view) and after."""
    con.register("_touched", touched)
    runs = con.execute(
        "select distinct run_id from main.session_facts "
        "where session_id in (select session_id from _touched)"
    ).fetchall()
    con.execute("delete from session_facts where session_id in (select session_id from _touched)")
    runs += con.execute(SESSION_FACTS_REFRESH + "returning run_id").fetchall()
    con.unregister("_touched")
    return {run for (run,) in runs if run is not None}


def _insert(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table) -> None:
    # DuckDB scans the Arrow table in bulk: no row-by-row INSERT. A relation inserted as it is
    # costs half what registering the table as a view, inserting from it and dropping it does.
    con.from_arrow(data).insert_into(f'"{table}"')
