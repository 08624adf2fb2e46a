"""``export`` then ``import`` keeps each session's task, grades and evidence (in ``ownloop.json``
beside the harness files), so the imported run reads ``passed`` as recorded and regrades it.

Everything goes through the real CLI in subprocesses; the run is recorded with the MiniWoB expert
served over HTTP on two tasks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _ownloop(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    return done


def _grades(store: Path, run: str) -> list[dict[str, object]]:
    out = _ownloop(
        store,
        "sql",
        "--format",
        "json",
        f"select task_id, attempt, status, passed, score from sessions "
        f"where run_id = '{run}' order by task_id, attempt",
    ).stdout
    return json.loads(out)


@pytest.fixture
def recorded(uitars_store: Path, tmp_path: Path) -> Path:
    """A copy of the run r1 of two tasks recorded by uitars (tests/conftest.py): the test imports
    into it."""
    shutil.copytree(uitars_store, tmp_path / "store")
    return tmp_path / "store"


def test_export_then_import_keeps_grades_and_evidence(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _ownloop(recorded, "export", "--run", "r1", "--out", str(out))
    sidecars = sorted(out.rglob("ownloop.json"))
    assert len(sidecars) == 2
    kept = json.loads(sidecars[0].read_text())
    assert kept["task"]["grader"] == "miniwob" and kept["grades"][0]["source"] == "record"
    assert {e["name"] for e in kept["evidence"]} >= {"final_url", "miniwob_reward"}

    _ownloop(recorded, "import", str(out), "--agent", "uitars", "--run", "back")
    before = _grades(recorded, "r1")
    assert [row["passed"] for row in before] == [True, True]
    assert _grades(recorded, "back") == before

    evidence = (
        "select s.task_id, e.name, e.value::varchar as v, e.sha256, e.source from "
        "evidence e join sessions s using (session_id) where s.run_id = '{run}' "
        "and e.name not like 'import%' order by all"
    )
    rows = {
        run: json.loads(
            _ownloop(recorded, "sql", "--format", "json", evidence.format(run=run)).stdout
        )
        for run in ("r1", "back")
    }
    assert rows["back"] == rows["r1"] and rows["r1"]

    regraded = _ownloop(recorded, "regrade", "--run", "back").stdout
    assert regraded.startswith("regraded 2 of 2 sessions") and "0 skipped" in regraded

    again = tmp_path / "again"
    _ownloop(recorded, "export", "--run", "back", "--out", str(again))
    for sidecar in sidecars:
        kept_again = json.loads((again / sidecar.relative_to(out)).read_text())
        assert kept_again["task"] == json.loads(sidecar.read_text())["task"]
