"""``ownloop show``, ``replay``, ``regrade`` and ``diff`` through click's CliRunner.

The browser tests replay real sessions: MiniWoB tasks recorded with the expert endpoint in a real
Chromium once per test run (the replay tests' store); each test works on its own copy of it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.store import open_store
from ownloop.testing.synthetic import Session, agent_step, click, finish, scroll, write_sessions
from tests.replay.recordings import replay_store


def _run(store: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three MiniWoB tasks recorded with the expert, run 'rec': the replay tests' store, recorded
    once per test run (``tests.replay.recordings``)."""
    return replay_store(tmp_path_factory).path


@pytest.fixture
def store(recorded: Path, tmp_path: Path) -> Path:
    shutil.copytree(recorded, tmp_path / "store")
    return tmp_path / "store"


def _rows(store: Path, sql: str) -> list[tuple]:
    return open_store(store).sql(sql).rows


def _session_of(store: Path, task: str) -> str:
    return _rows(store, f"select session_id from sessions where task_id like '{task}-%'")[0][0]


@pytest.mark.browser
def test_show_and_replay_print_the_recorded_thoughts_and_actions(store: Path) -> None:
    code, out = _run(store, "show", "enter-text")
    assert code == 0, out
    sid = _session_of(store, "enter-text")
    assert f"Session {sid}" in out
    for thought, kind, text in _rows(
        store,
        "select s.thought, a.kind, a.text from steps s join "
        f"actions a using (session_id, step) where session_id = "
        f"'{sid}' order by step",
    ):
        assert f"Thought: {thought}" in out
        assert f"action 0: {kind}(" in out
        if text:
            assert repr(text) in out
    assert "on input#tt" in out and "Outcome: finished" in out and "pass 1.00  miniwob" in out
    code, replayed = _run(store, "replay", sid, "--run", "rec")
    assert code == 0 and replayed == out


@pytest.mark.browser
def test_replay_json_is_the_folded_session(store: Path) -> None:
    code, out = _run(store, "replay", "click-button", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["session_id"] == _session_of(store, "click-button")
    steps = _rows(store, f"select count(*) from steps where session_id = '{data['session_id']}'")
    assert len(data["steps"]) == steps[0][0] == 2
    assert data["steps"][0]["effects"][0]["op"]["op"] == "mouse.click"
    assert data["grades"][0]["grader"] == "miniwob"


@pytest.mark.browser
def test_regrade_with_a_stricter_grader_flips_and_is_idempotent(store: Path) -> None:
    before = _rows(store, "select session_id, passed from sessions order by session_id")
    assert all(passed for _, passed in before)
    code, out = _run(store, "regrade", "--run", "rec", "--grader", r"answer:regex:\S")
    assert code == 0, out
    focus = _session_of(store, "focus-text")  # it answers nothing: the stricter grader fails it
    assert "passed before: 3   passed after: 2   flipped: 1" in out
    assert f"  {focus}  focus-text-" in out and "pass 1.00 -> fail 0.00" in out
    after = _rows(
        store, "select session_id, passed, score, grader from sessions order by session_id"
    )
    assert [(s, p) for s, p, _, _ in after] == [(s, s != focus) for s, _ in before]
    grades = _rows(store, "select source, count(*) from grades group by all order by source")
    assert grades == [("record", 3), ("regrade", 3)]  # the old grades are kept
    code, out = _run(store, "regrade", "--run", "rec", "--grader", r"answer:regex:\S")
    assert code == 0 and "passed before: 2   passed after: 2   flipped: 0" in out
    assert (
        _rows(store, "select session_id, passed, score, grader from sessions order by session_id")
        == after
    )


@pytest.mark.browser
def test_regrade_with_graders_from_a_tasks_file(store: Path, tmp_path: Path) -> None:
    button = _rows(store, "select task_id from sessions where task_id like 'click-button-%'")[0][0]
    path = tmp_path / "tasks.json"
    path.write_text(
        json.dumps(
            [
                {
                    "task_id": button,
                    "prompt": "p",
                    "start": "{BASE}/x",
                    "grader": "answer:exact:surely not",
                }
            ]
        )
    )
    code, out = _run(store, "regrade", "--tasks", str(path))
    assert code == 0, out
    assert "regraded 1 of 3 sessions" in out and "flipped: 1" in out and button in out


@pytest.mark.browser
def test_reparse_of_a_run_without_scrolls_changes_nothing(store: Path) -> None:
    steps = _rows(store, "select count(*) from steps")[0][0]
    code, out = _run(store, "replay", "--run", "rec", "--reparse", "-o", "notch_px=50")
    assert code == 0, out
    assert out == (
        f"0 of {steps} steps changed (0 of {steps} responses) in 3 sessions; nothing was written\n"
    )


@pytest.mark.browser
def test_diff_of_a_session_with_itself_and_with_another(store: Path) -> None:
    code, out = _run(store, "diff", "click-button", _session_of(store, "click-button"))
    assert code == 0 and "identical: 2 steps" in out, out
    code, out = _run(store, "diff", "click-button", "enter-text")
    assert code == 1 and "different: " in out and "first at step 1" in out


@pytest.mark.browser
def test_bad_targets_are_one_line(store: Path) -> None:
    for command in (["show", "nope"], ["replay", "nope"], ["diff", "click-button", "nope"]):
        code, out = _run(store, *command)
        assert (code, out) == (
            1,
            f"Error: no session or task 'nope' in {store}. List them with: ownloop --store "
            f"{store} sessions\n",
        )
    code, out = _run(store, "replay", "click-button", "--run", "r9")
    assert out == (
        f"Error: no session or task 'click-button' in run 'r9' of {store}. "
        f"List them with: ownloop --store {store} sessions --run r9\n"
    )


# ---------------------------------------------------------------- synthetic, no browser


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    store = open_store(tmp_path / "syn", fsync=False)
    write_sessions(
        store,
        Session(
            "s1", steps=(agent_step([click()]), agent_step([scroll()]), agent_step([finish()]))
        ),
    )
    return store.root


def test_reparse_lists_exactly_the_changed_steps(synthetic: Path) -> None:
    code, out = _run(synthetic, "replay", "--run", "r1", "--reparse", "-o", "scroll_notches=3")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "s1  task-1  step 2  call s1-2-1: actions and ops"
    assert lines[-1] == (
        "1 of 3 steps changed (1 of 3 responses) in 1 sessions; nothing was written"
    )
    code, out = _run(synthetic, "replay", "s1", "--reparse", "--json", "-o", "notch_px=50")
    assert code == 0 and [c["step"] for c in json.loads(out)["changes"]] == [2]


def test_cli_errors_are_one_line(synthetic: Path) -> None:
    code, out = _run(synthetic, "replay", "--run", "r1", "--reparse", "-o", "bogus=1")
    assert code == 1 and out.startswith("Error: agent 'uitars' has no option 'bogus'")
    assert out.count("\n") == 1
    code, out = _run(synthetic, "replay")
    assert out == (
        "Error: give a TARGET: a session id or a task id. List them with: "
        f"ownloop --store {synthetic} sessions\n"
    )
    code, out = _run(synthetic, "regrade", "--grader", "answer:nope:1")
    assert code == 1 and out.startswith("Error: bad grader spec") and out.count("\n") == 1


def test_replay_declares_the_execute_options() -> None:
    code, out = _run(Path("unused"), "replay", "--help")
    for option in (
        "--reparse",
        "--execute [ops|actions|responses]",
        "--fork-at",
        "--endpoint",
        "--model",
        "--api-key",
        "--settle",
        "--chromium",
        "-o, --agent-option",
        "--on-miss [stop|forward|force]",
        "--json",
        "--run",
    ):
        assert option in out, option
