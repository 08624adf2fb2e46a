"""An ingest that decodes in worker processes builds the same index as one in this process.

From nothing (or with many new bytes) a sync starts worker processes that check and decode
shares of the streams and send their rows back as Arrow IPC bytes; every table must hold the
same rows as when everything is done in the syncing process, with damaged, undecodable and
half-written lines, and later syncs must go on from where the workers left each stream.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.errors import OwnloopError
from ownloop.store import Store
from ownloop.store import events as E
from ownloop.store.index import Index
from tests.store.conftest import at
from tests.store.test_ingest_fast_path import golden_lines, mutations


def _every_row(store: Store) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of the index (the views read them), in a stable order."""
    names = [
        (schema, name)
        for (schema, name) in store.sql(
            "select table_schema, table_name from information_schema.tables "
            "where table_type = 'BASE TABLE' order by all"
        ).rows
    ]
    # Over one connection: opening the index costs more than most of these queries.
    results = store.sql_many(
        [(f'select * from "{schema}"."{name}"', None) for schema, name in names]
    )
    return {
        f"{schema}.{name}": sorted(result.rows, key=repr)
        for (schema, name), result in zip(names, results, strict=True)
    }


def _views(store: Store) -> dict[str, list[tuple[object, ...]]]:
    names = [
        name
        for (name,) in store.sql(
            "select view_name from duckdb_views() where not internal and schema_name = 'main' "
            "order by all"
        ).rows
    ]
    results = store.sql_many([(f'select * from "{name}"', None) for name in names])
    return {
        name: sorted(result.rows, key=repr) for name, result in zip(names, results, strict=True)
    }


def _odd_journal(store: Store, record_session: Callable[..., str]) -> None:
    """Sessions in streams of their own, every event kind, an edited line (damaged), a line
    of a kind this ownloop cannot decode (skipped) and a half-written last line."""
    for n in range(12):
        record_session(f"s{n:02d}", run_id=f"r{n % 3}", steps=3 + n % 4, t=float(n))
    lines = golden_lines()
    odd = mutations(lines)
    journal = store.journal_dir
    (journal / "golden.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (journal / "edited.jsonl").write_bytes(b"\n".join(odd["edited byte"]) + b"\n")
    (journal / "foreign.jsonl").write_bytes(
        b"\n".join(odd["a kind this ownloop cannot decode"]) + b"\n"
    )
    torn = journal / "s05.jsonl"
    whole = torn.read_bytes()
    torn.write_bytes(whole + whole.split(b"\n")[-2][:40])  # a writer stopped mid-line


@pytest.mark.parametrize("accept_damaged", [False, True])
@pytest.mark.slow
def test_workers_build_the_same_index(
    store: Store, record_session: Callable[..., str], accept_damaged: bool
) -> None:
    _odd_journal(store, record_session)
    index = Index(store)
    here = index.rebuild(accept_damaged=accept_damaged, processes=0)
    assert (here.skipped, here.damaged) == (1, 1)
    rows, views = _every_row(store), _views(store)
    assert rows["hot.session_facts"] and rows["hot.damaged_lines"] and rows["hot.skipped_lines"]
    assert rows["main.score_bootstraps"] and views["sessions"]

    apart = index.rebuild(accept_damaged=accept_damaged, processes=2)
    assert apart == here
    assert _every_row(store) == rows
    assert _views(store) == views


@pytest.mark.slow
def test_a_sync_goes_on_from_where_the_workers_left(
    store: Store, record_session: Callable[..., str]
) -> None:
    _odd_journal(store, record_session)
    Index(store).rebuild(processes=3)
    # The torn line is finished, a stream grows, a new one appears, a session is graded
    # in a stream of its own: a small sync does this in the syncing process.
    torn = store.journal_dir / "s05.jsonl"
    data = torn.read_bytes()
    torn.write_bytes(data[: data.rfind(b"\n") + 1])
    record_session("s99", run_id="r1", steps=2, t=50.0)
    with store.stream("late") as stream:
        stream.append(
            [
                E.SessionGraded(
                    at=at(60.0),
                    run_id="r0",
                    session_id="s00",
                    score=0.25,
                    passed=False,
                    grader="late",
                )
            ]
        )
    later = store.sync()
    assert later.events > 0 and not later.rebuilt
    synced = _every_row(store)
    again = Index(store).rebuild(processes=0)
    assert again.events == len(synced["hot.journal"])
    assert _every_row(store) == synced


def test_a_stream_bigger_than_a_batch_is_read_by_the_syncing_process(
    store: Store, record_session: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ownloop.store import pipeline

    _odd_journal(store, record_session)
    here = Index(store).rebuild(processes=0)
    rows = _every_row(store)
    monkeypatch.setattr(pipeline, "_BATCH", 3000)  # the golden stream is bigger
    assert Index(store).rebuild(processes=2) == here
    assert _every_row(store) == rows


def test_a_worker_that_cannot_read_a_stream_fails_the_sync(
    store: Store, record_session: Callable[..., str]
) -> None:
    for n in range(4):
        record_session(f"s{n}")
    odd = store.journal_dir / "s2x.jsonl"
    odd.mkdir()  # a stream that cannot be read
    before = _children()
    with pytest.raises((OwnloopError, OSError)):
        Index(store).rebuild(processes=2)
    assert _children() == before
    odd.rmdir()
    assert Index(store).rebuild(processes=2).events > 0


def test_no_worker_outlives_a_rebuild(store: Store, record_session: Callable[..., str]) -> None:
    for n in range(4):
        record_session(f"s{n}")
    before = _children()
    Index(store).rebuild(processes=2)
    assert _children() == before


def _children() -> set[str]:
    import os

    own = str(os.getpid())
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == own:  # the parent's pid
            found.add(entry.name)
    return found
