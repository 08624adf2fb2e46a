"""``ownloop archive``: sealed runs moved out of the DuckDB file into Parquet folders.

Every view of the index (the named views and each event table's union view) must answer with
exactly the same rows before and after the move, after a rebuild that reads only the unsealed
streams, and after events that arrive later (a regrade against a seal).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ownloop.cli import cli
from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.store.archive import archive_runs, folder_name
from ownloop.store.seal import seal_run
from tests.store.conftest import at
from tests.store.test_seal import write_run

_TASKS = tuple(f"t{n}" for n in range(40))


def views(store: Store) -> list[str]:
    rows = store.sql(
        "select view_name from duckdb_views() where not internal and schema_name = 'main' "
        "order by 1"
    ).rows
    return [str(name) for (name,) in rows]


Snapshot = dict[str, list[tuple[Any, ...]]]


def snapshot(store: Store) -> Snapshot:
    """Every view's full row set, sorted (through the read-only query path, over one
    connection)."""
    names = views(store)
    results = store.sql_many([(f'select * from "{name}"', None) for name in names])
    return {
        name: sorted(result.rows, key=repr) for name, result in zip(names, results, strict=True)
    }


def ownloop(store: Store, *args: str) -> Result:
    """``ownloop --store STORE ARGS``, in this process (the CLI's output and exit code)."""
    argv = ["--store", str(store.root), *args]
    return CliRunner().invoke(cli, argv, prog_name="ownloop", catch_exceptions=False)


def journal_rows(store: Store, where: str = "true") -> int:
    return int(store.sql(f"select count(*) from journal where {where}").rows[0][0])


@pytest.fixture(scope="module")
def three_runs_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sealed runs of 40 tasks, one open run (no end), all in the index: made once."""
    store = open_store(tmp_path_factory.mktemp("three_runs") / "store", fsync=False)
    for run_id in ("r1", "r2"):
        write_run(store, run_id, _TASKS)
        assert seal_run(store, run_id).seal is not None
    write_run(store, "r3", ("t1", "t2"), end_run=False)
    store.sync()
    return store.root


@pytest.fixture
def three_runs(three_runs_made: Path, tmp_path: Path) -> Store:
    """A copy of ``three_runs_made`` of the test's own (the tests archive and rebuild it)."""
    shutil.copytree(three_runs_made, tmp_path / "store")
    return open_store(tmp_path / "store", fsync=False)


@pytest.fixture(scope="module")
def three_runs_views(three_runs_made: Path, tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    """Every view's rows in ``three_runs_made`` (read from a copy): what each test's copy answers
    before it changes anything, taken once."""
    copy = tmp_path_factory.mktemp("three_runs_views") / "store"
    shutil.copytree(three_runs_made, copy)
    return snapshot(open_store(copy, fsync=False))


def regrade_against_seal(store: Store, run_id: str, session: str) -> None:
    """What ``ownloop regrade`` appends for a sealed run: a grade against its seal."""
    seal = store.sql("select fingerprint from run_sealed where run_id = ?", [run_id]).rows[0][0]
    with store.stream() as writer:
        writer.append(
            [
                E.SessionGraded(
                    at=at(500),
                    run_id=run_id,
                    session_id=session,
                    grader="answer",
                    score=0.0,
                    passed=False,
                    against_seal=seal,
                )
            ]
        )


@pytest.mark.slow
def test_every_view_answers_the_same_after_archiving(
    three_runs: Store, three_runs_views: Snapshot
) -> None:
    store = three_runs
    before = three_runs_views
    assert {"sessions", "steps", "runs", "model_called", "journal"} <= before.keys()
    results = archive_runs(store, ["r1", "r2"])
    assert [(r.run_id, r.already) for r in results] == [("r1", False), ("r2", False)]
    assert results[0].events == journal_rows(store, "run_id = 'r1'")
    assert (store.root / "archive" / "r1" / "journal.parquet").exists()
    # The rows left the DuckDB file: only the open run's are hot.
    hot = store.sql("select distinct run_id from hot.journal").rows
    assert hot == [("r3",)]
    assert snapshot(store) == before
    assert [r.already for r in archive_runs(store, ["r1"])] == [True]


def test_the_index_file_shrinks(three_runs: Store) -> None:
    store = three_runs
    size = store.index_path.stat().st_size
    archive_runs(store, None)  # --all-sealed
    assert store.index_path.stat().st_size < size * 0.8


def test_rebuild_reads_only_the_unsealed_streams(
    three_runs: Store, three_runs_views: Snapshot
) -> None:
    store = three_runs
    before = three_runs_views
    total = journal_rows(store)
    archive_runs(store, ["r1", "r2"])
    result = store.rebuild_index()
    assert result.events == journal_rows(store, "run_id = 'r3'") < total / 10
    assert snapshot(store) == before
    # A later sync of the rebuilt index reads nothing again.
    assert store.sync().events == 0


def test_later_events_and_a_lost_archive_answer_as_the_journal_does(three_runs: Store) -> None:
    store = three_runs
    archive_runs(store, ["r1", "r2"])
    # Events after the move: a regrade against r1's seal, and r3 going on.
    regrade_against_seal(store, "r1", "r1-t3")
    write_run(store, "r4", ("t1",))
    after = snapshot(store)
    assert after["grades"] != [] and after["sessions"] != []
    # The archive is a cache of the journal: without it, a rebuild gives the same answers.
    twin = open_store(store.root.parent / "twin")
    shutil.copytree(store.journal_dir, twin.journal_dir)
    shutil.copytree(store.root / "blobs", twin.root / "blobs", dirs_exist_ok=True)
    twin.rebuild_index()
    assert snapshot(twin) == after
    # Archiving the twin's sealed runs, and rebuilding the store, still agree.
    archive_runs(twin, None)
    assert snapshot(twin) == after
    store.rebuild_index()
    assert snapshot(store) == after


def test_a_truncated_archived_stream_is_read_from_the_journal_again(three_runs: Store) -> None:
    store = three_runs
    archive_runs(store, ["r1"])
    stream = store.journal_dir / "r1-t1.jsonl"
    stream.write_bytes(stream.read_bytes().splitlines(keepends=True)[0])
    # The archive no longer matches its journal: a rebuild leaves it unused.
    result = store.rebuild_index()
    assert result.events == journal_rows(store)  # r2 was not archived, r1 no longer is
    assert journal_rows(store, "stream = 'r1-t1'") == 1


def test_archiving_an_unsealed_run_is_refused(three_runs: Store) -> None:
    done = ownloop(three_runs, "archive", "--run", "r3")
    assert done.exit_code == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: run r3 is not sealed, so it can still change: seal it first with: "
        f"ownloop --store {three_runs.root} seal --run r3"
    ]
    assert not (three_runs.root / "archive").exists()


def test_the_cli_archives_every_sealed_run(three_runs: Store, three_runs_views: Snapshot) -> None:
    before = three_runs_views
    done = ownloop(three_runs, "archive", "--all-sealed")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["archived run r1", "archived run r2"]
    assert "moved to archive/r1/" in lines[0]
    assert snapshot(three_runs) == before


def test_seal_archive_seals_then_archives(store: Store) -> None:
    write_run(store, "r1", ("t1", "t2"))
    done = ownloop(store, "seal", "--run", "r1", "--archive")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0].startswith("sealed run r1: 2 sessions")
    assert lines[-1].startswith("archived run r1: ")
    assert store.sql("select count(*) from hot.journal").rows == [(0,)]
    assert store.sql("select count(*), min(passed) from sessions").rows == [(2, True)]
    assert len(store.sql("select * from run_sealed").rows) == 1


def exported(store: Store, out: Path) -> dict[str, bytes]:
    done = ownloop(store, "export", "--run", "r1", "--format", "atif", "--out", str(out))
    assert done.exit_code == 0, done.output
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_export_and_a_sessions_events_are_the_same_after_archiving(
    three_runs: Store, tmp_path: Path
) -> None:
    store = three_runs
    before = exported(store, tmp_path / "before")
    events = store.index().session_events("r1-t7")
    archive_runs(store, ["r1"])
    assert exported(store, tmp_path / "after") == before != {}
    assert store.index().session_events("r1-t7") == events != []


@pytest.mark.parametrize("run_id", ["../up", "a/b", ".hidden", "x" * 101, "é"])
def test_a_run_id_that_is_no_plain_file_name_gets_a_hashed_folder(run_id: str) -> None:
    name = folder_name(run_id)
    assert name.startswith("run-") and len(name) == 20 and name == folder_name(run_id)


def test_a_removed_archive_folder_says_to_rebuild(
    three_runs: Store, three_runs_views: Snapshot
) -> None:
    store = three_runs
    before = three_runs_views
    archive_runs(store, ["r1"])
    shutil.rmtree(store.root / "archive" / "r1")
    done = ownloop(store, "sql", "select count(*) from sessions")
    assert done.exit_code == 1
    assert done.stderr.strip().endswith(
        ". An archived run's folder is gone or moved (the journal still holds the run): "
        f"rebuild the index with: ownloop --store {store.root} index --rebuild"
    )
    assert store.rebuild_index().events == journal_rows(store)
    assert snapshot(store) == before


def test_a_regrade_against_the_seal_made_before_archive_moves_with_the_run(
    three_runs: Store,
) -> None:
    """As docs/store.md says: the regrade's stream holds only the run's events, so `archive`
    moves it into archive/R/ with the rest, and its grade answers from there; one made after
    stays hot."""
    store = three_runs
    regrade_against_seal(store, "r1", "r1-t3")
    store.sync()
    before = snapshot(store)
    regraded = store.sql(
        "select distinct stream from session_graded where coalesce(against_seal, '') <> ''"
    ).rows
    [(stream,)] = regraded
    archive_runs(store, ["r1"])
    manifest = json.loads((store.root / "archive" / "r1" / "manifest.json").read_text())
    assert stream in json.dumps(manifest)
    assert store.sql("select count(*) from hot.journal where stream = ?", [stream]).rows == [(0,)]
    assert snapshot(store) == before
    regrade_against_seal(store, "r1", "r1-t2")  # after the archive: in the index (hot)
    store.sync()
    assert store.sql(
        "select count(*) from hot.journal where run_id = 'r1' and kind = 'session_graded'"
    ).rows == [(1,)]
