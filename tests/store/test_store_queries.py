"""The named queries of ``ownloop.store.queries``: values are bound, never SQL text (issue 10/12).

Every id here that could break a pasted query has a quote in it, and the user's own condition
(``regrade --where``) can neither leave its parentheses nor take the values bound beside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ownloop.store import QueryError, Store, open_store
from ownloop.store import events as E
from ownloop.store.queries import (
    RUN_COLUMNS,
    SESSION_COLUMNS,
    Page,
    Selection,
    has_run_started,
    has_session,
    imported_folders,
    journal_places,
    latest_session_of_task,
    run_choices,
    run_page,
    run_sessions,
    run_settings,
    session_choices,
    session_listing,
    sql_command,
    target_session,
    task_attempts,
    user_condition,
    user_query,
)
from ownloop.testing.synthetic import Session, agent_step, at, click, finish, write_sessions

RUN = "o'k run"  # a quote that ends a pasted literal
STEPS = (agent_step([click()]), agent_step([finish()]))
FOLDER = ("imported_folder", '{"sha256": "f00d"}')


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Read-only in these tests: built and indexed once."""
    store = open_store(tmp_path_factory.mktemp("store"), fsync=False)
    write_sessions(
        store,
        Session("s1", task_id="b-task", run_id=RUN, steps=STEPS, start=0),
        Session(
            "s2",
            task_id="a-task",
            run_id=RUN,
            steps=STEPS,
            start=10,
            status="fail",
            grades=(("answer:contains:x", 0.0, False),),
        ),
        Session("s3", task_id="b-task", run_id=RUN, steps=STEPS, start=20, evidence=(FOLDER,)),
        Session("s4", task_id="x' or '1'='1", run_id="r2", steps=STEPS, start=100),
    )
    task = E.Task(task_id="b-task", prompt="Do b", start_url="http://site.test/")
    with store.stream("extra") as stream:
        stream.append(
            [
                # an attempt still open, and a replay of s1 that shares the run id
                E.SessionStarted(at=at(30), run_id=RUN, session_id="s5", task=task, attempt=2),
                E.SessionStarted(
                    at=at(40), run_id=RUN, session_id="s6", task=task, parent_session_id="s1"
                ),
            ]
        )
    store.sync()
    return store


def test_run_sessions_leave_replays_out_in_start_or_task_order(store: Store) -> None:
    started = run_sessions(store, RUN)
    assert [s.session_id for s in started] == ["s1", "s2", "s3", "s5"]
    assert [(s.task_id, s.attempt, s.status) for s in started] == [
        ("b-task", 1, "finished"),
        ("a-task", 1, "fail"),
        ("b-task", 1, "finished"),
        ("b-task", 2, None),
    ]
    assert [s.session_id for s in run_sessions(store, RUN, by_task=True)] == [
        "s2",
        "s1",
        "s3",
        "s5",
    ]
    assert run_sessions(store, "o'k") == [] and run_sessions(store, "' or '1'='1") == []


def test_sessions_tasks_and_runs_by_id(store: Store) -> None:
    assert has_session(store, "s1") and not has_session(store, "s1' or '1'='1")
    assert latest_session_of_task(store, "b-task") == "s5"  # s6 is a replay
    assert latest_session_of_task(store, "x' or '1'='1") == "s4"
    assert latest_session_of_task(store, "nope") is None
    assert has_run_started(store, RUN) and not has_run_started(store, "x' or '1'='1")
    assert [row[0] for row in run_settings(store, [RUN, "r2", "nope", RUN])] == [RUN, "r2"]
    assert run_settings(store, []) == []
    assert task_attempts(store, RUN) == {"a-task": 1, "b-task": 2}
    assert imported_folders(store, RUN) == {"f00d"} and imported_folders(store, "r2") == set()


def test_a_target_is_a_session_then_a_task_and_quotes_are_data(store: Store) -> None:
    assert target_session(store, "s2") == "s2"
    assert target_session(store, "b-task") == "s5"  # its latest recorded session (s6 replays s1)
    assert target_session(store, "x' or '1'='1") == "s4"
    assert target_session(store, "x' or '1'='1", RUN) is None
    assert target_session(store, "' or '1'='1") is None
    assert target_session(store, "a-task", "") == "s2"  # an empty run is no run


def _sessions(store: Store, selection: Selection, kinds: list[str] | None = None) -> set[str]:
    places = journal_places(store, selection, kinds)
    return {line.partition(".")[0] for line in places.column("stream").to_pylist()}


def test_a_selection_binds_run_and_task_and_wraps_the_users_condition(store: Store) -> None:
    assert _sessions(store, Selection()) == {"s1", "s2", "s3", "s4", "extra"}
    assert _sessions(store, Selection(run_id=RUN, task_id="b-task")) == {"s1", "s3", "extra"}
    assert _sessions(store, Selection(where="status = 'fail'")) == {"s2"}
    assert _sessions(store, Selection(run_id="r2", where="true or true")) == {"s4"}
    # a line comment cannot swallow the closing parenthesis
    assert _sessions(store, Selection(where="status = 'fail' -- failures")) == {"s2"}
    assert _sessions(store, Selection(where="task_id = ')'")) == set()
    places = journal_places(store, Selection(run_id="r2"), ["session_started", "session_ended"])
    assert places.num_rows == 2


@pytest.mark.parametrize(
    "condition",
    [
        "true) or (true",  # balanced at the end, but closes the parentheses around it first
        "1=1) union select session_id from steps where (1",
        "status = 'fail')",
        "(status = 'fail'",
    ],
)
def test_a_condition_cannot_leave_its_parentheses(condition: str) -> None:
    with pytest.raises(QueryError) as caught:
        user_condition(condition)
    assert str(caught.value) == (
        f"the parentheses of the condition {condition!r} do not balance: give one SQL "
        "condition over the sessions view, e.g. status = 'fail'"
    )


@pytest.mark.parametrize(
    ("condition", "char"), [("run_id = $run", "$"), ("run_id = ?", "?"), ("true; select 1", ";")]
)
def test_a_condition_cannot_take_the_bound_values(store: Store, condition: str, char: str) -> None:
    with pytest.raises(QueryError) as caught:
        journal_places(store, Selection(run_id=RUN, where=condition))
    assert str(caught.value) == (
        f"the condition {condition!r} has {char!r}: give one SQL condition over the sessions "
        "view with values written in, e.g. status = 'fail'"
    )


def test_a_condition_is_parenthesised_with_strings_and_names_left_alone() -> None:
    assert user_condition("x = ')' and \"we(ird\" = 1") == "(\nx = ')' and \"we(ird\" = 1\n)"


def test_a_bad_condition_is_duckdbs_one_line_error(store: Store) -> None:
    with pytest.raises(QueryError, match="no_such_column"):
        journal_places(store, Selection(where="no_such_column = 1"))


def test_the_session_page_filters_sorts_and_pages(store: Store) -> None:
    def ids(
        filters: dict[str, str | None],
        sort: str = "started_at",
        descending: bool = True,
        limit: int = 10,
        offset: int = 0,
    ) -> list[str]:
        listed = session_listing(store, filters, Page(sort, descending, limit, offset))
        assert listed.page.columns == list(SESSION_COLUMNS)
        assert listed.total >= len(listed.page.rows)
        return [row[0] for row in listed.page.rows]

    assert ids({}) == ["s4", "s6", "s5", "s3", "s2", "s1"]
    assert ids({"run": RUN, "status": None}) == ["s6", "s5"]
    assert ids({"run": RUN, "passed": "no"}) == ["s2"]
    assert ids({"passed": "ungraded"}) == ["s6", "s5"]
    assert ids({"task": "X' OR"}) == ["s4"]
    assert ids({"status": "' or '1'='1"}) == []
    assert ids({"run": RUN}, sort="task_id", descending=False, limit=2, offset=1) == ["s1", "s3"]
    assert session_listing(store, {"run": RUN}, Page("task_id", False, 2, 1)).total == 5


def test_the_run_page_and_the_filter_choices(store: Store) -> None:
    result = run_page(store, {}, Page("run_id", False, 10, 0))
    assert result.columns == list(RUN_COLUMNS)
    assert [row[0] for row in result.rows] == [RUN, "r2"]
    assert run_page(store, {"agent": "uitars"}, Page("started_at", True, 10, 0)).rows[0][0] == "r2"
    assert run_page(store, {"model": None}, Page("run_id", False, 10, 0)).rows == []  # all have one
    assert run_page(store, {"agent": "' or '1'='1"}, Page("run_id", False, 10, 0)).rows == []
    choices = session_choices(store)
    assert choices["run"] == ["o'k run", "r2"] and choices["status"] == [None, "fail", "finished"]
    assert run_choices(store) == {"agent": ["uitars"], "model": [""]}


def test_a_command_to_show_quotes_its_values() -> None:
    assert sql_command("select * from sessions where run_id = $run", run=RUN) == (
        "ownloop sql \"select * from sessions where run_id = 'o''k run'\""
    )


def test_the_users_own_query_runs_as_typed(store: Store) -> None:
    assert user_query(store, "select count(*) from sessions where run_id = 'r2'").rows == [(1,)]
    with pytest.raises(QueryError, match="only reads"):
        user_query(store, "drop view sessions")


def test_an_empty_store_answers_empty(tmp_path: Path) -> None:
    store = open_store(tmp_path / "empty", fsync=False)
    assert run_sessions(store, "r") == [] and target_session(store, "t") is None
    assert journal_places(store, Selection(run_id="r")).num_rows == 0
