"""TARGET resolution: session ids, task ids (latest session of the latest run), seeds, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownloop.replay.target import TargetNotFound, load_session, resolve_target
from ownloop.store import Store, open_store
from ownloop.testing.synthetic import Session, agent_step, click, finish, write_sessions

STEPS = (agent_step([click()]), agent_step([finish()]))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Read-only in these tests: built and indexed once."""
    store = open_store(tmp_path_factory.mktemp("store"), fsync=False)
    write_sessions(
        store,
        # run r1 (older): two attempts of click-button-7, one of enter-text-3
        Session("a1", task_id="click-button-7", run_id="r1", steps=STEPS, start=0),
        Session("a2", task_id="click-button-7", run_id="r1", steps=STEPS, start=100),
        Session("b1", task_id="enter-text-3", run_id="r1", steps=STEPS, start=50),
        # run r2 (newer): click-button-7 once, and a task whose id is another session's id
        Session("c1", task_id="click-button-7", run_id="r2", steps=STEPS, start=1000),
        Session("c2", task_id="a1", run_id="r2", steps=STEPS, start=1100),
    )
    store.sync()
    return store


def test_a_session_id_is_that_session(store: Store) -> None:
    assert resolve_target(store, "a1") == "a1"
    assert resolve_target(store, "b1") == "b1"


def test_a_session_id_wins_over_a_task_with_the_same_id(store: Store) -> None:
    assert resolve_target(store, "a1") == "a1"  # c2's task id is "a1" too


def test_a_task_id_is_its_latest_session_in_the_latest_run_that_has_it(store: Store) -> None:
    assert resolve_target(store, "click-button-7") == "c1"
    assert resolve_target(store, "enter-text-3") == "b1"  # only r1 has it


def test_run_narrows_to_that_runs_latest_attempt(store: Store) -> None:
    assert resolve_target(store, "click-button-7", "r1") == "a2"
    assert resolve_target(store, "click-button-7", "r2") == "c1"


def test_a_miniwob_task_name_without_its_seed(store: Store) -> None:
    assert resolve_target(store, "click-button") == "c1"
    assert resolve_target(store, "enter-text", "r1") == "b1"
    with pytest.raises(TargetNotFound):
        resolve_target(store, "click")  # a prefix that is not NAME-SEED


def test_unknown_target_is_one_line_with_the_fix(store: Store) -> None:
    with pytest.raises(TargetNotFound) as caught:
        resolve_target(store, "x")
    assert str(caught.value) == (
        f"no session or task 'x' in {store.root}. List them with: ownloop sessions"
    )


def test_unknown_in_a_run_names_the_run(store: Store) -> None:
    with pytest.raises(TargetNotFound) as caught:
        resolve_target(store, "enter-text-3", "r2")
    assert str(caught.value) == (
        f"no session or task 'enter-text-3' in run 'r2' of {store.root}. "
        "List them with: ownloop sessions --run r2"
    )


def test_quotes_in_a_target_are_data_not_sql(store: Store) -> None:
    with pytest.raises(TargetNotFound):
        resolve_target(store, "x' or '1'='1")


def test_load_session_folds_the_resolved_session(store: Store) -> None:
    session = load_session(store, "click-button-7", "r1")
    assert session.session_id == "a2"
    assert [len(step.actions) for step in session.steps] == [1, 1]
    assert session.status == "finished"


def test_load_session_needs_a_target(store: Store) -> None:
    with pytest.raises(TargetNotFound, match="give a TARGET"):
        load_session(store, None)


def test_an_empty_store(tmp_path: Path) -> None:
    store = open_store(tmp_path / "empty")
    with pytest.raises(TargetNotFound, match="no session or task 'a1'"):
        resolve_target(store, "a1")
