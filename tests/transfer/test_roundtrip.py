"""Export a recorded run as harness folders and as Parquet; importing the folders gives it back.

The run is recorded once per module with the MiniWoB expert over HTTP; its first four answers are
garbage, so one task ends in parse_error and is re-run (an error attempt in the export).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver.endpoint import make_server
from ownloop.store import Store, open_store
from ownloop.transfer import export_run, import_dir
from tests.pixels import blob_pixels

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("recorded")
    with make_server("miniwob", "uitars", "garbage:4") as url:
        result = CliRunner().invoke(
            cli,
            [
                "--store",
                str(root),
                "record",
                "uitars",
                "--model",
                "ownloop-miniwob-uitars",
                "--settle",
                "0.1",
                "--suite",
                "miniwob:click-button,enter-text",
                "--endpoint",
                url,
                "--run",
                "r1",
                "--workers",
                "1",
                "--error-retries",
                "1",
                "--retry-wait",
                "0.1",
            ],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
    return open_store(root)


def _sessions(store: Store, run: str) -> list[tuple]:
    return store.sql(
        "select task_id, attempt, status, agent_status, answer, steps, parse_failures, "
        f"action_errors from sessions where run_id = '{run}' order by task_id, attempt"
    ).rows


def _steps(store: Store, run: str) -> list[tuple]:
    return store.sql(
        "select s.task_id, s.attempt, t.step, t.response, t.screenshot_sha256 from steps t "
        f"join sessions s using (session_id) where s.run_id = '{run}' "
        "order by s.task_id, s.attempt, t.step"
    ).rows


def test_session_dirs_have_the_harness_layout(recorded: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = export_run(recorded, "r1", "session-dir", out)
    assert result.skipped == []
    sessions = _sessions(recorded, "r1")
    assert len(sessions) == 3 and sessions[0][1:3] == (1, "parse_error")  # the garbage answers
    retried = sessions[0][0]
    assert sessions[1][:2] == (retried, 2)
    assert sorted(p.name for p in out.iterdir()) == sorted({s[0] for s in sessions})
    for task, _attempt, status, *_ in sessions[1:]:
        failed = status in ("endpoint_error", "crashed", "interrupted")
        name = "session_failed.json" if failed else "session.json"
        assert sorted(p.name for p in (out / task).glob("session*.json")) == [name]
        top = json.loads((out / task / name).read_text())
        assert list(top) == [
            "task_id",
            "base",
            "answer",
            "status",
            "rounds",
            "error",
            "record",
            "log",
            "seconds",
            "parse_fails",
            "action_errors",
        ]
        assert (top["task_id"], top["status"]) == (task, "crash" if status == "crashed" else status)
        assert top["base"].startswith("http://127.0.0.1:") and top["base"].count("/") == 2
    attempt = json.loads((out / retried / "error_attempt_1" / "attempt.json").read_text())
    assert list(attempt) == ["status", "rounds", "error", "seconds", "parse_fails", "action_errors"]
    assert (attempt["status"], attempt["parse_fails"]) == ("parse_error", 4)
    failed_lines = [
        json.loads(line)
        for line in (out / retried / "error_attempt_1" / "steps.jsonl").read_text().splitlines()
    ]
    assert len(failed_lines) == 1
    assert list(failed_lines[0]) == ["step", "url", "raw", "fails"]
    assert failed_lines[0]["raw"] is None and len(failed_lines[0]["fails"]) == 4
    other = sessions[2][0]
    lines = [json.loads(line) for line in (out / other / "steps.jsonl").read_text().splitlines()]
    assert lines and lines[0]["raw"].startswith("Thought:")
    assert list(lines[0]) == ["step", "url", "raw", "actions", "notes", "fails"]
    assert lines[0]["actions"][0]["kind"] == "click"
    shots = _steps(recorded, "r1")
    for task, number, step, _, sha in shots:
        folder = out / task / "error_attempt_1" if (task, number) == (retried, 1) else out / task
        if sha is not None:
            assert (folder / "screens" / f"step_{step:02d}.png").read_bytes() == recorded.get_blob(
                sha
            )
    written = sum(1 for _ in out.rglob("step_*.png"))
    assert written == sum(1 for s in shots if s[4] is not None)


def test_import_of_an_export_gives_back_the_run(recorded: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_run(recorded, "r1", "session-dir", out)
    imported = import_dir(recorded, out, "uitars", run_id="back")
    assert imported.skipped == []
    assert _sessions(recorded, "back") == _sessions(recorded, "r1")
    # Same responses per step, the same screenshots: by their pixels, since the recorded ones are
    # compacted (lossless WebP; the export writes PNGs made from those pixels, which the import
    # stores under their own sha256), then byte for byte from the export on.
    assert _by_pixels(recorded, _steps(recorded, "back")) == _by_pixels(
        recorded, _steps(recorded, "r1")
    )
    again = tmp_path / "again"
    export_run(recorded, "back", "session-dir", again)
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for name in files:
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def _by_pixels(store: Store, rows: list[tuple]) -> list[tuple]:
    """Step rows with their screenshot's sha256 (last) replaced by its pixels' hash."""
    return [(*row[:-1], blob_pixels(store, row[-1]) if row[-1] else None) for row in rows]


def test_parquet_files_have_every_view_and_its_rows(recorded: Store, tmp_path: Path) -> None:
    views = [
        v for (v,) in recorded.sql("select view_name from duckdb_views() where not internal").rows
    ]
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            str(recorded.root),
            "export",
            "--format",
            "parquet",
            "--out",
            str(tmp_path / "all"),
        ],
    )
    assert result.exit_code == 0, result.output
    for view in views:
        path = tmp_path / "all" / f"{view}.parquet"
        expected = recorded.sql(f"select count(*) from {view}").rows[0][0]
        assert duckdb.sql(f"select count(*) from '{path}'").fetchall() == [(expected,)], view
        assert f"{path} ({expected} rows)" in result.output
    export_run(recorded, "r1", "parquet", tmp_path / "r1")
    sessions = duckdb.sql(
        f"select run_id, count(*) from '{tmp_path / 'r1' / 'sessions.parquet'}' group by all"
    ).fetchall()
    assert sessions == [("r1", 3)]
    steps = duckdb.sql(f"select count(*) from '{tmp_path / 'r1' / 'steps.parquet'}'").fetchall()
    assert steps == [(len(_steps(recorded, "r1")),)]
