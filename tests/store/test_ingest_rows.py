"""Every row an ingest writes is the line's event as decoded one line at a time.

The ingest builds its rows in bulk (one batch decode, columns turned into Arrow arrays a few C
calls each, e.g. times parsed from their JSON text by Arrow); this module builds the rows it
must give the slow way instead: each line checked with ``check_chain``, decoded alone, each
field read from the event and converted by hand. Both must agree, row by row, on the golden
journals (bytes older ownloops wrote, every event kind), an edited line (quarantined or, with
``--accept-damaged``, projected), a line of an unknown kind (skipped), a torn last line and
times in other zones with microseconds, in this process and in worker processes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ownloop.store import Store
from ownloop.store import events as E
from ownloop.store.index import Index
from ownloop.store.journal import ChainState, StreamWriter, check_chain, decode_lines
from ownloop.store.schema import TABLE_BY_TYPE, TABLES, Column
from tests.store.test_ingest_fast_path import golden_lines, mutations

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
Rows = dict[str, list[tuple[Any, ...]]]


def _cell(column: Column, value: Any) -> Any:
    """What the index holds for ``value`` in ``column``, worked out by hand."""
    if value is None:
        return None
    if column.sql_type == "JSON":
        return msgspec.json.encode(value).decode()
    if column.sql_type == "TIMESTAMP":  # UTC, without a zone
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    return value


def _expected(journal: Path, accept_damaged: bool) -> Rows:
    """The rows of every event table, ``journal``, ``damaged_lines`` and ``skipped_lines``."""
    rows: Rows = {name: [] for name in [t.name for t in TABLES] + ["journal"]}
    rows["damaged_lines"], rows["skipped_lines"] = [], []
    for path in sorted(journal.glob("*.jsonl")):
        stream, data = path.stem, path.read_bytes()
        raw_lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]  # not a torn tail
        offsets = [sum(len(raw) + 1 for raw in raw_lines[:i]) for i in range(len(raw_lines))]
        damaged, _ = check_chain(raw_lines, ChainState())
        for i, kind, detail in damaged:
            length = len(raw_lines[i]) + 1
            rows["damaged_lines"].append((stream, offsets[i], length, kind, detail, accept_damaged))
        quarantined = {i for i, _, _ in damaged} if not accept_damaged else set()
        for i, raw in enumerate(raw_lines):
            if i in quarantined:
                continue
            decoded = decode_lines([raw])
            if decoded.errors:
                rows["skipped_lines"].append((stream, offsets[i], decoded.errors[0][1]))
                continue
            (event,), (seq,) = decoded.events, decoded.seqs
            table = TABLE_BY_TYPE[type(event)]
            lead: tuple[Any, ...] = (stream, seq, offsets[i]) if table.placed else (stream, seq)
            fields = table.columns[len(lead) :]
            cells = tuple(
                _cell(c, getattr(event, f))
                for c, f in zip(fields, event.__struct_fields__, strict=True)
            )
            rows[table.name].append(lead + cells)
            time = _cell(fields[[c.name for c in fields].index("time")], event.at)
            rows["journal"].append(
                (
                    stream,
                    offsets[i],
                    len(raw) + 1,
                    seq,
                    table.name,
                    event.session_id,
                    getattr(event, "run_id", None),
                    time,
                )
            )
    return {name: sorted(found, key=repr) for name, found in rows.items()}


def _indexed(store: Store) -> Rows:
    names = [t.name for t in TABLES] + ["journal", "damaged_lines", "skipped_lines"]
    results = store.sql_many([(f'select * from hot."{name}"', None) for name in names])
    return {
        name: sorted(result.rows, key=repr) for name, result in zip(names, results, strict=True)
    }


def _write_journal(store: Store) -> None:
    journal = store.journal_dir
    journal.mkdir(parents=True, exist_ok=True)
    for name in ("journal-v1", "journal-v2"):
        (journal / f"{name}.jsonl").write_bytes((GOLDEN / f"{name}.jsonl").read_bytes())
    odd = mutations(golden_lines())
    (journal / "edited.jsonl").write_bytes(b"\n".join(odd["edited byte"]) + b"\n")
    (journal / "foreign.jsonl").write_bytes(
        b"\n".join(odd["a kind this ownloop cannot decode"]) + b"\n"
    )
    zones = _zoned_stream(store.root / "zones.jsonl")
    last = zones.rstrip(b"\n").rfind(b"\n") + 1
    (journal / "zones.jsonl").write_bytes(zones[: last + 40])  # a writer stopped mid-line


def _zoned_stream(path: Path) -> bytes:
    """A stream's bytes whose times are as a recorder in another zone might give them, with
    microseconds, and one naive."""
    zones = [timezone(timedelta(hours=h, minutes=m)) for h, m in ((2, 0), (-5, -30), (0, 0))]
    times = [datetime(2026, 3, 1, 12, 0, 0, n * 12_345, tzinfo=zones[n % 3]) for n in range(6)]
    times.append(datetime(2026, 3, 1, 12, 0, 7, 654_321))  # noqa: DTZ001 - naive on purpose
    with StreamWriter(path, fsync=False) as stream:
        stream.append(
            [
                E.SessionGraded(
                    at=moment,
                    run_id="r9",
                    session_id="z",
                    score=n / 7,
                    passed=n % 2 == 0,
                    grader="g",
                )
                for n, moment in enumerate(times)
            ]
        )
    return path.read_bytes()


@pytest.mark.parametrize("processes", [0, 2])
@pytest.mark.parametrize("accept_damaged", [False, True])
def test_the_index_holds_each_line_as_decoded_alone(
    store: Store, accept_damaged: bool, processes: int
) -> None:
    _write_journal(store)
    result = Index(store).rebuild(accept_damaged=accept_damaged, processes=processes)
    expected = _expected(store.journal_dir, accept_damaged)
    assert (result.damaged, result.skipped) == (1, 1)
    assert result.events == len(expected["journal"])
    assert len(expected["session_graded"]) > 7 and expected["model_called"]
    assert _indexed(store) == expected


def test_a_sync_after_appended_lines_holds_them_as_decoded_alone(store: Store) -> None:
    _write_journal(store)
    Index(store).rebuild(processes=0)
    # The torn line is finished and a new stream appears: a sync from each stream's mark.
    (store.journal_dir / "zones.jsonl").write_bytes((store.root / "zones.jsonl").read_bytes())
    moment = datetime(2026, 3, 2, 1, 2, 3, 456_789, tzinfo=timezone(timedelta(hours=9)))
    with store.stream("later") as stream:
        stream.append(
            [E.SessionGraded(at=moment, run_id="r9", session_id="z", score=0.5, grader="g")]
        )
    assert store.sync().events == 2
    assert _indexed(store) == _expected(store.journal_dir, accept_damaged=False)


def test_a_column_of_one_repeated_value_holds_what_each_row_alone_would() -> None:
    # Fields left at their defaults decode as the default object itself, in every row: such a
    # column is built once and repeated. Every table built from the golden journal's events of
    # a kind, in bulk, equals the rows built one event at a time.
    decoded = decode_lines(golden_lines())
    by_kind: dict[type, list[E.Event]] = {}
    for event in decoded.events:
        by_kind.setdefault(type(event), []).append(event)
    repeated = 0
    for kind, events in by_kind.items():
        table = TABLE_BY_TYPE[kind]
        # the same decoded events twice over: a kind of one event has only columns of one
        # repeated object (its time, its strings, its nested values), the others some
        events = events + events
        n = len(events)
        streams, seqs, offsets = ["s"] * n, list(range(n)), list(range(0, 10 * n, 10))
        whole = table.arrow_table(streams, seqs, events, offsets)
        alone = [
            table.arrow_table(
                streams[i : i + 1], seqs[i : i + 1], events[i : i + 1], offsets[i : i + 1]
            )
            for i in range(n)
        ]
        assert whole.to_pylist() == [row for rows in alone for row in rows.to_pylist()]
        assert whole.schema == alone[0].schema
        columns = zip(*map(msgspec.structs.astuple, events), strict=True)
        repeated += sum(len(set(map(id, column))) == 1 for column in columns)
    assert repeated > len(by_kind)
