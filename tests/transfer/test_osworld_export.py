"""``ownloop export --format osworld``: an imported OSWorld run is written back file for file,
and a run ownloop recorded in a browser goes out in OSWorld's layout and comes back in with its
steps, screenshots and scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ownloop.cli import cli
from ownloop.replay.fold import fold
from ownloop.store import open_store
from tests.transfer.osworld_tree import OPENCUA_MODEL, UITARS_MODEL, write_tree


def _run(store: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)


def _show_result(folder: Path) -> dict[str, float]:
    """What OSWorld's show_result.py reads: each example's result.txt as a number."""
    return {p.parent.name: float(p.read_text()) for p in folder.glob("*/*/result.txt")}


def test_an_imported_run_is_written_back_file_for_file(tmp_path: Path) -> None:
    results = write_tree(tmp_path / "results", damaged=False)
    store = tmp_path / "store"
    assert _run(store, "import", str(results), "--format", "osworld").exit_code == 0
    out = tmp_path / "out"
    for run in ("osworld-ByteDance-Seed-UI-TARS-1.5-7B", "osworld-opencua-7b"):
        done = _run(store, "export", "--run", run, "--format", "osworld", "--out", str(out / run))
        assert done.exit_code == 0, done.output
    for run, model in (
        ("osworld-ByteDance-Seed-UI-TARS-1.5-7B", UITARS_MODEL),
        ("osworld-opencua-7b", OPENCUA_MODEL),
    ):
        source = results / "pyautogui/screenshot" / model
        written = out / run / "pyautogui/screenshot" / model
        files = sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(written) for p in written.rglob("*") if p.is_file())
        for name in files:
            assert (written / name).read_bytes() == (source / name).read_bytes(), name
        assert _show_result(written) == _show_result(source)
        summary = json.loads((out / run / "summary" / "results.json").read_text())
        assert {e["task_id"]: e["score"] for e in summary} == _show_result(source)


@pytest.mark.browser
@pytest.mark.slow
def test_a_recorded_browser_run_goes_out_and_comes_back(uitars_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _run(uitars_store, "export", "--run", "r1", "--format", "osworld", "--out", str(out))
    assert done.exit_code == 0, done.output
    assert len(_show_result(out / "pyautogui" / "screenshot" / "expert")) == 2
    store = tmp_path / "back"
    done = _run(store, "import", str(out), "--format", "osworld", "--run", "back")
    assert done.exit_code == 0, done.output
    assert "parsed" in done.output and "(100%)" in done.output
    old, new = open_store(uitars_store), open_store(store)
    query = "select task_id, session_id, score from sessions where run_id = $run order by task_id"
    before = old.sql(query, {"run": "r1"}).rows
    after = new.sql(query, {"run": "back"}).rows
    assert [(t, s) for t, _, s in before] == [(t, s) for t, _, s in after]
    for (_, a, _), (_, b, _) in zip(before, after, strict=True):
        one, two = fold(old.session_events(a), a), fold(new.session_events(b), b)
        assert [s.response for s in one.steps] == [s.response for s in two.steps]
        assert [s.actions for s in one.steps] == [s.actions for s in two.steps]
        shots_one = [old.get_blob(s.screenshot.sha256) for s in one.steps if s.screenshot]
        shots_two = [new.get_blob(s.screenshot.sha256) for s in two.steps if s.screenshot]
        assert shots_one == shots_two
        assert two.task is not None and one.task is not None
        assert two.task.prompt == one.task.prompt
