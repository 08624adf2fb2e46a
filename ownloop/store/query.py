"""Read-only SQL over the index, and its results as a table, CSV or JSON.

A query runs on a DuckDB connection that cannot change anything: the file is opened read-only,
external access (files, URLs, other databases, extensions) is switched off and the configuration
is locked. On top of that only reading statements are accepted, so ``create``, ``insert``,
``copy``, ``attach``, ``install``, ``load``, ``set`` and ``export`` get a one-line error before
anything runs.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

import duckdb
from rich.cells import cell_len
from rich.table import Table

from ownloop.errors import OwnloopError
from ownloop.store.text import cell, visible

if TYPE_CHECKING:
    import pyarrow as pa  # loaded by the Arrow results only

__all__ = [
    "QueryError",
    "QueryResult",
    "describe_error",
    "open_read_only",
    "run_read_only",
    "run_read_only_many",
    "sql_literal",
]

# SELECT covers WITH, VALUES, FROM-first, DESCRIBE, SHOW and SUMMARIZE; PRAGMA and CALL read
# metadata (settings cannot change: the configuration is locked).
_READING = {"SELECT", "EXPLAIN", "PRAGMA", "CALL"}


class QueryError(OwnloopError):
    """A query that is not allowed or that DuckDB rejected."""


class QueryResult(NamedTuple):
    """The result of one query: column names, their SQL types, and the rows."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    total: int | None = None  # the rows over all when only the first ``rows`` were fetched

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow(["" if v is None else _text(v) for v in row])
        return out.getvalue()

    def to_json(self) -> str:
        """A JSON array of objects, one a line; JSON columns are embedded, not quoted."""
        records = []
        for row in self.rows:
            record = {}
            for name, kind, value in zip(self.columns, self.types, row, strict=True):
                if kind == "JSON" and isinstance(value, str):
                    value = json.loads(value)
                record[name] = value
            records.append(record)
        lines = [json.dumps(r, default=_json_default, ensure_ascii=False) for r in records]
        return "[\n" + ",\n".join(lines) + "\n]" if lines else "[]"

    def to_rich(self, max_rows: int | None = None) -> Table:
        """A Rich table whose headers and cells are literal text (never markup), controls
        shown as escapes; with ``max_rows``, only the first rows and a caption saying how many
        were left out and how to see them."""
        table = Table(show_lines=False, header_style="bold")
        for name in self.columns:
            table.add_column(cell(name))
        for row in self.rows[:max_rows] if max_rows else self.rows:
            table.add_row(*(cell(None if v is None else _shown(v)) for v in row))
        table.caption = self.caption(max_rows)
        return table

    def to_text(self, max_rows: int | None = None) -> Iterator[str]:
        """The table of ``to_rich`` as plain lines, as wide as its content, drawn in time
        proportional to the rows shown (Rich takes 2-5 ms a row: 20 s for 10k rows)."""
        shown = self.rows[:max_rows] if max_rows else self.rows
        header = [_cell_lines(name) for name in self.columns]
        body = [[_cell_lines(None if v is None else _shown(v)) for v in row] for row in shown]
        widths = [max((cell_len(line) for line in lines), default=0) for lines in header]
        for row in body:
            for i, lines in enumerate(row):
                for line in lines:
                    if len(line) > widths[i] or not line.isascii():
                        widths[i] = max(widths[i], cell_len(line))
        yield "┏" + "┳".join("━" * (w + 2) for w in widths) + "┓"
        yield from _draw_row(header, widths, "┃")
        yield "┡" + "╇".join("━" * (w + 2) for w in widths) + "┩"
        for row in body:
            yield from _draw_row(row, widths, "│")
        yield "└" + "┴".join("─" * (w + 2) for w in widths) + "┘"
        yield self.caption(max_rows)

    def caption(self, max_rows: int | None = None) -> str:
        """``N rows``, and when ``max_rows`` leaves some out, how many and how to see them."""
        count = len(self.rows) if self.total is None else self.total
        total = f"{count:,} row{'s' if count != 1 else ''}"
        hidden = count - max_rows if max_rows else 0
        if hidden <= 0:
            return total
        return (
            f"{total}, the first {max_rows:,} shown; {hidden:,} not shown. All of them: "
            "--max-rows 0, or --format csv|json"
        )


def _cell_lines(value: object) -> list[str]:
    """A cell's text as ``cell`` shows it (controls escaped, tabs expanded), line by line."""
    return visible(value).expandtabs(8).split("\n")


def _draw_row(cells: list[list[str]], widths: list[int], edge: str) -> Iterator[str]:
    height = max((len(lines) for lines in cells), default=1)
    for i in range(height):
        parts = []
        for lines, width in zip(cells, widths, strict=True):
            line = lines[i] if i < len(lines) else ""
            pad = width - (len(line) if line.isascii() else cell_len(line))
            parts.append(line + " " * pad)
        yield f"{edge} " + f" {edge} ".join(parts) + f" {edge}"


def _text(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, list | dict):
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    return str(value)


def _shown(value: Any) -> str:
    """A cell's text in a table for people: a float rounded to 10 significant digits, so
    binary noise (``7.3725000000000005``) is not printed; CSV and JSON keep every digit."""
    if isinstance(value, float) and math.isfinite(value):
        return repr(float(f"{value:.10g}"))
    return _text(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, UUID | bytes):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal, for the store's own statements that cannot bind a
    parameter (``copy ... to 'file'``) and for commands shown to the user. Everywhere else values
    are bound parameters; code outside ``ownloop/store`` never writes SQL text."""
    return "'" + text.replace("'", "''") + "'"


def describe_error(exc: BaseException) -> str:
    """DuckDB's message on one line (its first paragraph: the error and any suggestion)."""
    paragraph = str(exc).strip().split("\n\n")[0]
    line = " ".join(part.strip() for part in paragraph.splitlines() if part.strip())
    if "No files found" in line and f"{os.sep}archive{os.sep}" in line:
        line += (
            ". An archived run's folder is gone or moved (the journal still holds the run): "
            "rebuild the index with: ownloop index --rebuild"
        )
    return line


def _reading_statements(sql: str) -> list[Any]:
    """The statements of ``sql``; every one must only read."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(describe_error(exc)) from None
    if not statements:
        raise QueryError('the query is empty. Example: ownloop sql "select * from sessions"')
    for statement in statements:
        if statement.type.name not in _READING:
            word = (statement.query.split() or [statement.type.name])[0].upper()
            raise QueryError(
                f"ownloop sql only reads: {word} statements are not allowed. The index is a "
                "projection of the journal; record or regrade to add events"
            )
    return list(statements)


def open_read_only(path: Path) -> duckdb.DuckDBPyConnection:
    """A connection to the index that can only read (see the module's docstring)."""
    try:
        con = duckdb.connect(
            str(path),
            read_only=True,
            config={"autoload_known_extensions": False, "autoinstall_known_extensions": False},
        )
        # Files stay out of reach but for the archived runs' Parquet (read by the index's
        # views): DuckDB takes allowed_directories only before external access is turned off.
        # Another connection of this process to the file (the viewer's kept one) shares its
        # database, already set up so and locked.
        # (fetchall: a result left unfetched would keep the connection busy)
        locked = con.execute("select current_setting('lock_configuration')").fetchall()
        if not locked[0][0]:
            archive = str(path.parent.resolve() / "archive") + os.sep
            con.execute("set allowed_directories = ?", [[archive]])
            con.execute("set enable_external_access = false")
            con.execute("set lock_configuration = true")
        return con
    except duckdb.Error as exc:
        raise QueryError(
            f"cannot open the index {path}: {describe_error(exc)}. Rebuild it with: "
            "ownloop index --rebuild"
        ) from None


def _run(
    con: duckdb.DuckDBPyConnection,
    statements: list[Any],
    arrow: bool,
    params: Sequence[Any] | Mapping[str, Any] | None,
    first: int | None = None,
) -> QueryResult | pa.Table:
    try:
        for statement in statements[:-1]:
            con.execute(statement.query)
        last = statements[-1].query
        if arrow:
            relation = con.sql(last, params=params)
            if relation is None:
                import pyarrow as pa

                return pa.table({})
            return relation.to_arrow_table()
        cursor = con.execute(last, params) if params is not None else con.execute(last)
        description = cursor.description or []
        names, types = [d[0] for d in description], [str(d[1]) for d in description]
        if first is None:
            return QueryResult(names, types, cursor.fetchall())
        rows = cursor.fetchmany(first)
        # Fewer rows than asked for: the result is done, with nothing left to count.
        rest = _count_rest(cursor) if len(rows) == first else 0
        return QueryResult(names, types, rows, len(rows) + rest)
    except duckdb.Error as exc:
        raise QueryError(describe_error(exc)) from None


def _count_rest(cursor: duckdb.DuckDBPyConnection) -> int:
    """The rows a result has left, counted in Arrow batches (no Python object a row)."""
    import warnings

    with warnings.catch_warnings():  # "an extra copy of the rows": a batch at a time
        warnings.simplefilter("ignore", UserWarning)
        reader = cursor.to_arrow_reader(65_536)
        return 0 if reader is None else sum(batch.num_rows for batch in reader)


class _Reader(NamedTuple):
    """A DuckDB database in memory that attaches one index read-only for each query."""

    lock: threading.Lock  # one query at a time: the index is attached under one name
    con: duckdb.DuckDBPyConnection


# Starting DuckDB (registering its functions, its buffer pool, its threads) costs 10-40 ms of
# CPU, more than opening the index file and most queries: a process starts it once per index
# and attaches the file for each query. The file is detached after it, so its lock is held no
# longer than a connection opened per query held it (other processes may sync meanwhile).
# The most recently used few are kept (a process that opens many stores, such as the tests,
# does not keep a DuckDB and its threads for each).
_readers: dict[tuple[int, str], _Reader] = {}
_readers_lock = threading.Lock()
_KEEP_READERS = 4


def _new_reader(path: Path) -> duckdb.DuckDBPyConnection:
    """The in-memory database, locked down as ``open_read_only``'s connection is: of the
    file system it may reach the index (its file and WAL) and the archived runs' Parquet."""
    con = duckdb.connect(
        ":memory:",
        config={"autoload_known_extensions": False, "autoinstall_known_extensions": False},
    )
    try:
        index = str(path.resolve())
        con.execute("set allowed_paths = ?", [[index, index + ".wal"]])
        con.execute(
            "set allowed_directories = ?", [[str(path.parent.resolve() / "archive") + os.sep]]
        )
        con.execute("set enable_external_access = false")
        con.execute("set lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


@contextmanager
def _attached(path: Path) -> Iterator[duckdb.DuckDBPyConnection | None]:
    """A connection on which ``path`` is the default database, attached read-only for as long
    as the block runs; None when it could not be attached (then open it: ``open_read_only``
    says why it cannot be read)."""
    key = (os.getpid(), str(path.resolve()))  # (a forked child starts its own DuckDB)
    evicted: list[_Reader] = []
    with _readers_lock:
        reader = _readers.pop(key, None)
        if reader is None:
            try:
                reader = _Reader(threading.Lock(), _new_reader(path))
            except duckdb.Error:
                reader = None
        if reader is not None:
            _readers[key] = reader  # the most recent last
            while len(_readers) > _KEEP_READERS:
                evicted.append(_readers.pop(next(iter(_readers))))
    for old in evicted:  # (a query still on one finishes first)
        with old.lock:
            old.con.close()
    if reader is None:
        yield None
        return
    with reader.lock:
        con = reader.con
        try:
            con.execute(f'attach {sql_literal(key[1])} as "index" (read_only)')
        except duckdb.Error:
            yield None
            return
        try:
            con.execute('use "index"')
            yield con
        finally:
            try:
                con.execute("use memory")
                con.execute('detach "index"')
            except duckdb.Error:  # never reuse a reader left in an unknown state
                with _readers_lock:
                    _readers.pop(key, None)
                con.close()


def run_read_only(
    path: Path,
    sql: str,
    *,
    arrow: bool = False,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    first: int | None = None,
) -> QueryResult | pa.Table:
    """Run ``sql`` (one or more reading statements) on the index; the last one's result.

    ``params`` are bound to the last statement's ``?`` (or ``$name``) placeholders: values never
    become SQL text. ``connection``: one of ``open_read_only`` to use (and leave open) instead
    of opening the index. ``first``: fetch only the first rows, and count the others
    (``QueryResult.total``).

    Raises:
        QueryError: a statement would change something, or DuckDB rejected the query.
    """
    statements = _reading_statements(sql)
    if connection is not None:
        return _run(connection, statements, arrow, params, first)
    with _attached(path) as attached:
        if attached is not None:
            return _run(attached, statements, arrow, params, first)
    con = open_read_only(path)
    try:
        return _run(con, statements, arrow, params, first)
    finally:
        con.close()


def run_read_only_many(
    path: Path,
    queries: Sequence[tuple[str, Sequence[Any] | Mapping[str, Any] | None]],
    connection: duckdb.DuckDBPyConnection | None = None,
) -> list[QueryResult]:
    """``run_read_only`` of each (sql, params) in turn over one connection (opening the index
    costs more than a small query: a page that asks several opens it once); ``connection`` as
    for ``run_read_only``."""
    checked = [(_reading_statements(sql), params) for sql, params in queries]

    def run_all(con: duckdb.DuckDBPyConnection) -> list[QueryResult]:
        results = []
        for statements, params in checked:
            result = _run(con, statements, False, params)
            assert isinstance(result, QueryResult)
            results.append(result)
        return results

    if connection is not None:
        return run_all(connection)
    with _attached(path) as attached:
        if attached is not None:
            return run_all(attached)
    con = open_read_only(path)
    try:
        return run_all(con)
    finally:
        con.close()
