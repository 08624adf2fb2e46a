"""``ownloop sql`` and ``show`` start light: on an index that is up to date they load neither
pyarrow nor numpy, and open no database for writing (the sync is skipped when no journal file
changed)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from ownloop.store import Store, open_store
from ownloop.store import events as E

_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _imported(store: Path, *args: str) -> tuple[str, set[str]]:
    """The output of ``ownloop ARGS`` run with ``-X importtime`` and the top-level packages that
    it imported."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    packages = {
        line.split("|")[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    return result.stdout, packages


def _one_session(root: Path, prompt: str = "p") -> Store:
    """A store at ``root`` with run r1 and its session s1 started, its index up to date."""
    store = open_store(root, fsync=False)
    with store.stream() as stream:
        stream.append(
            [
                E.RunStarted(at=_AT, run_id="r1"),
                E.SessionStarted(
                    at=_AT,
                    run_id="r1",
                    session_id="s1",
                    task=E.Task(task_id="t", prompt=prompt, start_url="http://x/"),
                ),
            ]
        )
    store.sync()
    return store


def test_a_query_with_nothing_new_loads_no_pyarrow_and_no_numpy(tmp_path: Path) -> None:
    store = _one_session(tmp_path)
    index = (tmp_path / "index.duckdb").stat().st_mtime_ns
    out, packages = _imported(tmp_path, "sql", "--format", "csv", "select session_id from sessions")
    assert out.splitlines() == ["session_id", "s1"]
    assert "duckdb" in packages and not packages & {"pyarrow", "numpy", "pandas"}
    assert (tmp_path / "index.duckdb").stat().st_mtime_ns == index  # no sync wrote to it
    # New lines are ingested (with pyarrow) before the query sees them.
    with store.stream() as stream:
        stream.append(
            [
                E.SessionStarted(
                    at=_AT,
                    run_id="r1",
                    session_id="s2",
                    task=E.Task(task_id="t", prompt="p", start_url="x"),
                )
            ]
        )
    out, _ = _imported(
        tmp_path, "sql", "--format", "csv", "select session_id from sessions order by 1"
    )
    assert out.splitlines() == ["session_id", "s1", "s2"]


def test_a_table_that_fits_its_page_loads_no_pyarrow(tmp_path: Path) -> None:
    """The table view fetches its first rows and counts the rest in Arrow batches only when
    there may be a rest: a result shorter than the page is done."""
    store = open_store(tmp_path, fsync=False)
    with store.stream() as stream:
        stream.append([E.RunStarted(at=_AT, run_id="r1")])
    store.sync()
    out, packages = _imported(tmp_path, "sql", "select run_id from runs")
    assert "r1" in out and "1 row" in out
    assert "duckdb" in packages and not packages & {"pyarrow", "numpy", "pandas"}


def test_show_of_a_session_loads_no_pyarrow(tmp_path: Path) -> None:
    """A session's events are found through the index's rows as tuples: no Arrow table."""
    _one_session(tmp_path, prompt="Click OK")
    out, packages = _imported(tmp_path, "show", "s1")
    assert "Session s1" in out and "Click OK" in out
    assert "duckdb" in packages and not packages & {"pyarrow", "numpy", "pandas"}
