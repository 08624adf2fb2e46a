"""The index's tables, derived from the event Structs: one source of truth for the schema.

Every event kind gets a table named by its tag (``model_called``, ``browser_acted`` ...). Its
columns are ``stream`` and ``seq`` (where the event sits in the journal; ``model_called`` also
keeps its line's ``byte_offset``, what other calls' message references name), then the
Struct's fields in order. Scalar fields get SQL types; anything nested (tuples, dicts, Structs,
unions such as ``actions``, ``op``, ``element`` or ``messages``) is a JSON column holding the
field's msgspec encoding, so SQL sees exactly what the journal holds.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from ownloop.store.events import EVENT_TYPES, EventBase

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "BOOKKEEPING_DDL",
    "Column",
    "SESSION_FACTS_REFRESH",
    "SESSION_FACT_KINDS",
    "EventTable",
    "SQL_NAMES",
    "TABLES",
    "TABLE_BY_TYPE",
    "fingerprint",
]

_encoder = msgspec.json.Encoder()
_encode = _encoder.encode
_encode_lines = _encoder.encode_lines
_astuple = msgspec.structs.astuple

# AT is a reserved word in DuckDB's SQL: the events' ``at`` is the column ``time``.
SQL_NAMES = {"at": "time"}


class Column(NamedTuple):
    """One column: its name, its SQL type, its Arrow type (by name: pyarrow loads only when an
    ingest builds a table) and how a Python value becomes one."""

    name: str
    sql_type: str
    arrow_type: str  # a pyarrow type factory: "string", "int64", ...; "timestamp" is UTC µs
    to_cell: Callable[[Any], Any] | None  # None: the value is used as is
    get: Callable[[Any], Any] | None = None  # reads the value from an event
    nullable: bool = True


class EventTable(NamedTuple):
    """The table of one event kind."""

    name: str  # the event's tag
    event_type: type[EventBase]
    columns: tuple[Column, ...]
    placed: bool = False  # a ``byte_offset`` column follows ``seq``

    def ddl(self) -> str:
        cols = ",\n  ".join(f'"{c.name}" {c.sql_type}' for c in self.columns)
        return f'create table "{self.name}" (\n  {cols}\n)'

    def arrow_table(
        self,
        stream: Sequence[str],
        seq: Sequence[int],
        events: Sequence[EventBase],
        offsets: Sequence[int] = (),
    ) -> pa.Table:
        """Build the Arrow table of ``events`` (all of this kind) column by column
        (``offsets``: their lines' byte offsets, for a ``placed`` table)."""
        import pyarrow as pa

        arrays = [pa.array(stream, pa.string()), pa.array(seq, pa.int64())]
        if self.placed:
            arrays.append(pa.array(offsets, pa.int64()))
        lead = len(arrays)
        # One C call per event (_astuple) and one transpose (zip) give every field's column at
        # once: cheaper than a getattr pass per column.
        fields = (
            list(zip(*map(_astuple, events), strict=True))
            if events
            else [() for _ in self.columns[lead:]]
        )
        for column, values in zip(self.columns[lead:], fields, strict=True):
            if len(values) > 1 and all(map(operator.is_, values, repeat(values[0]))):
                # The same object in every row (a field left at its default, decoded as the
                # default itself): its cell built once and repeated, in C.
                arrays.append(pa.repeat(_column_array(column, values[:1])[0], len(values)))
            else:
                arrays.append(_column_array(column, values))
        return pa.Table.from_arrays(arrays, names=[c.name for c in self.columns])


def _column_array(column: Column, values: Sequence[Any]) -> pa.Array:
    """The Arrow array of one column's values (a field of each event)."""
    import pyarrow as pa

    cells: Any = values
    if column.to_cell is not None:
        if column.to_cell is _encode and values:
            fast = _json_column(values, column.nullable)
            if len(fast) == len(values):
                return fast
        if column.nullable and None in values:
            cells = [None if v is None else column.to_cell(v) for v in values]
        else:
            cells = list(map(column.to_cell, values))  # the encoder, in C
    if column.sql_type == "TIMESTAMP":
        # DuckDB's TIMESTAMPTZ needs the ICU extension, which may not be installable
        # offline; every time is UTC by contract, so store plain TIMESTAMPs of UTC.
        return _timestamp_column(cells)
    return pa.array(cells, _arrow_type(column.arrow_type))


def _json_column(values: Sequence[Any], nullable: bool) -> pa.Array:
    """Each value's msgspec JSON as an Arrow string array (None: null), in a few C calls: the
    values encoded as JSON lines, then cut at the newlines (JSON text escapes its own; a value
    that holds a raw one gives more pieces than values, and the caller encodes them one by
    one). Only None encodes as a bare ``null``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lines = _encode_lines(values)
    cells = pc.split_pattern(pa.array([lines[:-1]], pa.string()), "\n").flatten()
    if nullable:
        cells = pc.if_else(pc.equal(cells, "null"), pa.scalar(None, pa.string()), cells)
    return cells


def _timestamp_column(values: Sequence[Any]) -> pa.Array:
    """Aware datetimes as an Arrow array of their UTC times (no zone), in a few C calls: the
    values encoded as JSON lines (ISO 8601 with their offset), cut at the newlines, unquoted
    and parsed by Arrow, 15 times cheaper than Arrow reading each datetime object. Anything
    else (a naive datetime, a None) is read object by object, as Arrow turns an aware datetime
    into its UTC time there too."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if values and None not in values:
        lines = _encode_lines(values)
        texts = pc.split_pattern(pa.array([lines[:-1]], pa.string()), "\n").flatten()
        try:
            zoned = pc.cast(pc.utf8_slice_codeunits(texts, 1, -1), pa.timestamp("us", tz="UTC"))
        except pa.ArrowInvalid:  # no zone offset: a naive datetime, kept as it is
            pass
        else:
            if len(zoned) == len(values):
                return zoned.cast(pa.timestamp("us"))
    return pa.array(values, pa.timestamp("us"))


def _arrow_type(name: str) -> pa.DataType:
    import pyarrow as pa

    return pa.timestamp("us", tz="UTC") if name == "timestamp" else getattr(pa, name)()


def _scalar(kind: msgspec.inspect.Type) -> tuple[str, str] | None:
    if isinstance(kind, msgspec.inspect.StrType):
        return "VARCHAR", "string"
    if isinstance(kind, msgspec.inspect.LiteralType) and all(
        isinstance(v, str) for v in kind.values
    ):
        return "VARCHAR", "string"
    if isinstance(kind, msgspec.inspect.BoolType):
        return "BOOLEAN", "bool_"
    if isinstance(kind, msgspec.inspect.IntType):
        return "BIGINT", "int64"
    if isinstance(kind, msgspec.inspect.FloatType):
        return "DOUBLE", "float64"
    if isinstance(kind, msgspec.inspect.DateTimeType):
        return "TIMESTAMP", "timestamp"
    return None


def _column(name: str, attr: str, kind: msgspec.inspect.Type) -> Column:
    nullable = False
    if isinstance(kind, msgspec.inspect.UnionType):
        others = [t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType)]
        nullable = len(others) < len(kind.types)
        if len(others) == 1:  # Optional[X]: X's column, nullable
            kind = others[0]
    scalar = _scalar(kind)
    get = operator.attrgetter(attr)
    if scalar is None:
        return Column(name, "JSON", "string", _encode, get, nullable)
    return Column(name, scalar[0], scalar[1], None, get, nullable)


# The tables whose rows keep their line's byte offset: a model call's message references name
# the line holding each message by it, and model_calls resolves them without a join (views.sql).
_PLACED = frozenset({"model_called"})


def _table(event_type: type[EventBase]) -> EventTable:
    info = msgspec.inspect.type_info(event_type)
    assert isinstance(info, msgspec.inspect.StructType)
    columns = [Column("stream", "VARCHAR", "string", None), Column("seq", "BIGINT", "int64", None)]
    placed = str(info.tag) in _PLACED
    if placed:
        columns.append(Column("byte_offset", "BIGINT", "int64", None))
    for field in info.fields:
        name = SQL_NAMES.get(field.encode_name, field.encode_name)
        if (
            name in ("stream", "seq", "byte_offset")
            or name in SQL_NAMES.values()
            and name != SQL_NAMES.get(field.encode_name)
        ):
            raise TypeError(f"{event_type.__name__}.{field.name} clashes with another column")
        columns.append(_column(name, field.name, field.type))
    return EventTable(str(info.tag), event_type, tuple(columns), placed)


TABLES: tuple[EventTable, ...] = tuple(_table(t) for t in EVENT_TYPES)
TABLE_BY_TYPE: dict[type, EventTable] = {t.event_type: t for t in TABLES}

BOOKKEEPING_DDL = (
    # Per stream: bytes ingested so far (always the end of a complete line) and the file size
    # seen then (larger when a torn tail follows), so a no-change sync reads nothing.
    # last_sum and last_seq are the hash chain's head at ``ingested``: the next line must link.
    "create table streams (stream VARCHAR primary key, ingested BIGINT, size BIGINT, "
    "last_sum VARCHAR, last_seq BIGINT)",
    # One row per ingested line: where it is, so a session's events can be read back in order.
    "create table journal (stream VARCHAR, byte_offset BIGINT, byte_length BIGINT, seq BIGINT, "
    "kind VARCHAR, session_id VARCHAR, run_id VARCHAR, time TIMESTAMP)",
    # Complete lines that did not decode (edited bytes, or a kind newer than this ownloop).
    "create table skipped_lines (stream VARCHAR, byte_offset BIGINT, error VARCHAR)",
    # Complete lines whose checksum or chain link failed: quarantined, not projected (unless
    # the index was rebuilt with --accept-damaged: then projected = true).
    "create table damaged_lines (stream VARCHAR, byte_offset BIGINT, byte_length BIGINT, "
    "kind VARCHAR, detail VARCHAR, projected BOOLEAN)",
    "create table meta (key VARCHAR primary key, value VARCHAR)",
)


# The rows of ``session_facts`` (views.sql) for the sessions named in the registered table
# ``_touched`` (a column session_id), recomputed from every event of theirs: what the sessions
# view used to rank on each query. Run by each ingest after its old rows are deleted. It reads
# ``main``'s views, so the events of archived runs count too (see archive.py).
SESSION_FACTS_REFRESH = """
insert into session_facts
with touched as (select distinct session_id from _touched),
started as (
    select * from main.session_started where session_id in (select session_id from touched)
    qualify row_number() over (partition by session_id order by time, stream, seq) = 1
),
ended as (
    select * from main.session_ended where session_id in (select session_id from touched)
    qualify row_number() over (partition by session_id order by time desc, stream desc, seq desc)
        = 1
),
graded as (
    -- a regrade of a sealed run is recorded against the seal: the sealed grade stays; a
    -- model judge's verdicts (ownloop judge) are the judge_grades view's, never the session's
    select * from main.session_graded
    where coalesce(against_seal, '') = '' and coalesce(source, '') <> 'judge'
        and session_id in (select session_id from touched)
    qualify row_number() over (partition by session_id order by time desc, stream desc, seq desc)
        = 1
),
counted as (
    select * from main.session_counted where session_id in (select session_id from touched)
    qualify row_number() over (partition by session_id order by time desc, stream desc, seq desc)
        = 1
)
select st.session_id, st.run_id,
    st.task ->> 'task_id', st.agent, st.model, st.attempt,
    en.status, en.agent_status, en.answer, en.steps, en.seconds,
    gr.score, gr.passed, gr.grader,
    st.parent_session_id, st.replay_mode, st.fork_step,
    st.time, en.time,
    coalesce(st.task ->> 'suite', ''), st.task ->> 'prompt', st.task ->> 'start_url',
    en.parse_failures, en.action_errors, en.error,
    st.viewport, st.budget, coalesce(st.repeat, 1), cn.counted
from started st
left join ended en on en.session_id = st.session_id
left join graded gr on gr.session_id = st.session_id
left join counted cn on cn.session_id = st.session_id
"""

# The event kinds whose rows make a session's facts: ingesting one refreshes its session.
SESSION_FACT_KINDS = frozenset(
    {"session_started", "session_ended", "session_graded", "session_counted"}
)


def fingerprint(views_sql: str) -> str:
    """A hash of every table and view definition: when it changes, the index is rebuilt."""
    h = hashlib.sha256()
    for statement in BOOKKEEPING_DDL:
        h.update(statement.encode())
    for table in TABLES:
        h.update(table.ddl().encode())
    h.update(views_sql.encode())
    h.update(SESSION_FACTS_REFRESH.encode())
    return h.hexdigest()[:16]
