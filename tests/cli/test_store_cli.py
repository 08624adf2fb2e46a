"""``ownloop sql``, ``ownloop verify`` and ``ownloop index`` through click's CliRunner."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.store import events as E
from ownloop.store import open_store
from ownloop.store.locks import hold_lock

_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A store with one run and one graded session of one step."""
    store = open_store(tmp_path / "store", fsync=False)
    sha = store.put_blob(b"not really a png")
    with store.stream("s1") as stream:
        stream.append(
            [
                E.RunStarted(at=_AT, run_id="r1", agent="uitars", model="m"),
                E.SessionStarted(
                    at=_AT,
                    run_id="r1",
                    session_id="a",
                    task=E.Task(task_id="t", prompt="p", start_url="http://x/"),
                ),
                E.ScreenshotTaken(at=_AT, run_id="r1", session_id="a", step=1, sha256=sha),
                E.SessionEnded(at=_AT, run_id="r1", session_id="a", status="finished", steps=1),
                E.SessionGraded(at=_AT, run_id="r1", session_id="a", grader="g", score=0.5),
            ]
        )
    return store.root


def run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", str(root), *args])
    return result.exit_code, result.output


def test_sql_prints_a_table(root: Path) -> None:
    code, out = run(root, "sql", "select session_id, status, score from sessions")
    assert code == 0
    assert "session_id" in out and "finished" in out and "0.5" in out and "1 row" in out


def test_sql_prints_csv(root: Path) -> None:
    assert run(root, "sql", "--format", "csv", "select session_id, score, model from sessions") == (
        0,
        "session_id,score,model\na,0.5,m\n",
    )


def test_sql_prints_json_with_json_columns_embedded(root: Path) -> None:
    code, out = run(root, "sql", "--format", "json", "select run_id, argv, started_at from runs")
    assert code == 0
    assert json.loads(out) == [{"run_id": "r1", "argv": [], "started_at": "2026-03-01T12:00:00"}]


def test_sql_store_from_the_environment(root: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["sql", "--format", "csv", "select count(*) from journal"],
        env={"OWNLOOP_STORE": str(root)},
    )
    assert (result.exit_code, result.output) == (0, "count_star()\n5\n")


@pytest.mark.parametrize(
    "query, word",
    [
        ("create table t (a int)", "CREATE"),
        ("insert into meta values ('a', 'b')", "INSERT"),
        ("copy journal to 'x.csv'", "COPY"),
        ("attach 'x.duckdb'", "ATTACH"),
    ],
)
def test_sql_refuses_changes_in_one_line(root: Path, query: str, word: str) -> None:
    assert run(root, "sql", query) == (
        1,
        (
            f"Error: ownloop sql only reads: {word} statements are not allowed. The index is a "
            "projection of the journal; record or regrade to add events\n"
        ),
    )


def test_sql_errors_are_one_line(root: Path) -> None:
    code, out = run(root, "sql", "select nope from sessions")
    assert code == 1
    assert out.startswith('Error: Binder Error: Referenced column "nope" not found')
    assert out.count("\n") == 1


def test_sql_waits_for_a_busy_index_then_says_so(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OWNLOOP_LOCK_TIMEOUT", "0.2")
    with hold_lock(root / "index.lock", exclusive=True):
        assert run(root, "sql", "select 1") == (
            1,
            (
                f"Error: the index is busy: another ownloop command held {root / 'index.lock'} for "
                "over 0.2 s. Try again when it ends, or set OWNLOOP_LOCK_TIMEOUT\n"
            ),
        )


def test_verify_clean(root: Path) -> None:
    assert run(root, "verify") == (
        0,
        "verify: 1 streams, 5 events, 1 blobs: 0 errors, 0 warnings\n",
    )


def test_verify_reports_an_edited_blob_and_exits_1(root: Path) -> None:
    [blob] = [p for p in (root / "blobs").rglob("*") if p.is_file()]
    blob.write_bytes(b"Not really a png")
    assert run(root, "verify") == (
        1,
        (
            f"error: blob {blob.name}: bad blob: bytes do not match the name (referenced by "
            "journal/s1.jsonl:3)\n"
            "verify: 1 streams, 5 events, 1 blobs: 1 error, 0 warnings\n"
        ),
    )


def test_verify_torn_tail_is_a_warning_unless_strict(root: Path) -> None:
    path = root / "journal" / "s1.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-40])  # the last line, cut short by a killed writer
    torn = len(data) - 40 - data.rindex(b"\n", 0, len(data) - 1) - 1
    expected = (
        f"warning: journal/s1.jsonl:5: torn tail: {torn} bytes without a newline "
        "(a writer stopped mid-write); readers skip them\n"
        "verify: 1 streams, 4 events, 1 blobs: 0 errors, 1 warning\n"
    )
    assert run(root, "verify") == (0, expected)
    assert run(root, "verify", "--strict") == (1, expected)


def test_index_and_rebuild(root: Path) -> None:
    assert run(root, "index") == (0, "index rebuilt: 5 new events from 1 streams\n")
    assert run(root, "index") == (0, "index up to date: 0 new events from 0 streams\n")
    assert run(root, "index", "--rebuild") == (0, "index rebuilt: 5 new events from 1 streams\n")
