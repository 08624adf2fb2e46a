"""Re-parse: today's parser and translator over recorded responses list exactly what changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownloop.agents import make_agent
from ownloop.agents.options import parse_overrides
from ownloop.errors import OwnloopError
from ownloop.replay.reparse import reparse, reparse_target
from ownloop.replay.target import load_session
from ownloop.store import Store, open_store
from ownloop.store.events import Click
from ownloop.testing.synthetic import (
    Session,
    agent_step,
    click,
    drag,
    finish,
    scroll,
    write_sessions,
)

# s1: click, scroll, drag, scroll, finish.  s2: click, finish (nothing there scrolls or drags).
S1 = Session(
    "s1",
    steps=(
        agent_step([click()]),
        agent_step([scroll()]),
        agent_step([drag()]),
        agent_step([scroll("up")]),
        agent_step([finish()]),
    ),
)
S2 = Session(
    "s2", task_id="task-2", steps=(agent_step([click()]), agent_step([finish()])), start=100
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Read-only in these tests: built and indexed once."""
    store = open_store(tmp_path_factory.mktemp("store"), fsync=False)
    write_sessions(store, S1, S2)
    store.sync()
    return store


def _changed(store: Store, **options: object) -> list[tuple[str, int, str]]:
    report = reparse(store, run_id="r1", overrides=options)
    return [(c.session_id, c.step, c.change) for c in report.changes]


def test_same_code_same_options_changes_nothing(store: Store) -> None:
    report = reparse(store, run_id="r1")
    assert report.changes == ()
    assert (report.sessions, report.steps, report.responses) == (2, 7, 7)
    assert report.lines()[-1] == (
        "0 of 7 steps changed (0 of 7 responses) in 2 sessions; nothing was written"
    )


def test_scroll_notches_changes_exactly_the_scroll_steps_actions_and_ops(store: Store) -> None:
    assert _changed(store, scroll_notches=3) == [
        ("s1", 2, "actions and ops"),
        ("s1", 4, "actions and ops"),
    ]
    change = reparse(store, run_id="r1", overrides={"scroll_notches": 3}).changes[0]
    assert "amount=5" in change.old_actions and "amount=3" in change.new_actions
    assert change.old_ops.count("mouse.wheel") == 5 and change.new_ops.count("mouse.wheel") == 3


def test_notch_px_changes_only_the_scroll_steps_ops(store: Store) -> None:
    assert _changed(store, notch_px=50) == [("s1", 2, "ops"), ("s1", 4, "ops")]
    change = reparse(store, run_id="r1", overrides={"notch_px": 50}).changes[1]
    assert change.old_actions == change.new_actions
    assert "dy=-100" in change.old_ops and "dy=-50" in change.new_ops  # step 4 scrolls up


def test_drag_steps_changes_only_the_drag_step(store: Store) -> None:
    assert _changed(store, drag_steps=5) == [("s1", 3, "ops")]
    change = reparse(store, run_id="r1", overrides={"drag_steps": 5}).changes[0]
    assert "steps=20" in change.old_ops and "steps=5" in change.new_ops


def test_the_recorded_settings_are_the_base(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    spec = Session(
        "s3", run_id="r3", steps=(agent_step([scroll()]),), agent_options={"scroll_notches": 3}
    )
    write_sessions(store, spec)
    assert reparse(store, run_id="r3").changes == ()  # recorded with 3, re-parsed with 3
    changed = reparse(store, run_id="r3", overrides={"scroll_notches": 5}).changes
    assert [(c.step, c.change) for c in changed] == [(1, "actions and ops")]


def test_a_parser_fix_shows_up_as_now_parses_and_changed_actions(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    old_click = Click(x=1, y=2)  # what an older parser read from the same response
    spec = Session(
        "s4",
        run_id="r4",
        steps=(
            agent_step([click()], parse_error="old parser failed"),
            agent_step([click(10, 20)], recorded_actions=[old_click]),
            agent_step([click()], failed_first="Thought: hmm\nAction: no_such_thing("),
            agent_step([finish()]),
        ),
    )
    write_sessions(store, spec)
    report = reparse(store, run_id="r4")
    assert [(c.step, c.change) for c in report.changes] == [
        (1, "now parses"),
        (2, "actions and ops"),
    ]
    first, second = report.changes
    assert first.old_actions == "parse error: old parser failed"
    assert first.new_actions.startswith("click(x=6") and first.new_ops.startswith("mouse.click")
    assert second.old_actions == "click(x=1, y=2)" and "x=1" not in second.new_actions
    assert report.responses == 5  # the failed first response of step 3 was parsed again too


def test_one_session_by_target(store: Store) -> None:
    report = reparse(store, session=load_session(store, "s2"), overrides={"scroll_notches": 3})
    assert report.changes == () and report.sessions == 1
    report = reparse_target(store, "s1", None, ("scroll_notches=3",))
    assert [c.step for c in report.changes] == [2, 4]


def test_nothing_is_written(store: Store) -> None:
    before = sorted(p.name for p in store.journal_dir.iterdir())
    reparse(store, run_id="r1", overrides={"scroll_notches": 3})
    assert sorted(p.name for p in store.journal_dir.iterdir()) == before


def test_lines_show_old_and_new(store: Store) -> None:
    lines = reparse(store, run_id="r1", overrides={"drag_steps": 5}).lines()
    assert lines[0].startswith("s1  task-1  step 3  call s1-3-1: ops")
    assert lines[1].startswith("  ops:     mouse.move") and lines[2].startswith("       ->  ")
    assert lines[-1] == (
        "1 of 7 steps changed (1 of 7 responses) in 2 sessions; nothing was written"
    )


def test_overrides_are_read_like_record_options() -> None:
    # Values stay text; the agent's options Struct reads each as its option's type.
    assert parse_overrides(["notch_px=50", "drag-steps=3", "language=Chinese", "x=true"]) == {
        "notch_px": "50",
        "drag_steps": "3",
        "language": "Chinese",
        "x": "true",
    }
    agent = make_agent("uitars", **parse_overrides(["notch_px=50", "drag-steps=3"]))
    assert (agent.options()["notch_px"], agent.options()["drag_steps"]) == (50.0, 3)
    with pytest.raises(OwnloopError, match="is not KEY=VALUE"):
        parse_overrides(["notch_px"])


def test_bad_options_and_missing_runs_are_one_line(store: Store) -> None:
    with pytest.raises(OwnloopError, match="has no option 'nope'"):
        reparse(store, run_id="r1", overrides={"nope": 1})
    with pytest.raises(OwnloopError, match="notch_px must be a number"):
        reparse(store, run_id="r1", overrides={"notch_px": "wide"})
    with pytest.raises(OwnloopError, match="no sessions in run 'r9'"):
        reparse(store, run_id="r9")
    with pytest.raises(OwnloopError, match="give a TARGET"):
        reparse(store)
