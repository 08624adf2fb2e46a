"""The sessions view reads ``session_facts``, a table every sync keeps for the sessions its new
events touch. It must give exactly the rows the view gave when it ranked the events on every
query: the old definition is kept here as the oracle and compared after every sync."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ownloop.store import Store, pipeline
from ownloop.store import events as E
from tests.store.conftest import at

# The sessions view as it was before session_facts: each query ranked every session's events.
OLD_SESSIONS = """
with started as (
    select * from session_started
    qualify row_number() over (partition by session_id order by time, stream, seq) = 1
),
ended as (
    select * from session_ended
    qualify row_number() over (partition by session_id order by time desc, stream desc, seq desc)
        = 1
),
graded as (
    select * from session_graded where coalesce(against_seal, '') = ''
    qualify row_number() over (partition by session_id order by time desc, stream desc, seq desc)
        = 1
),
counted as (
    select * from session_counted
    qualify row_number() over (partition by session_id order by time desc, stream desc, seq desc)
        = 1
),
run as (
    select run_id, arg_min(agent, time) as agent, arg_min(model, time) as model,
        arg_min(max_steps, time) as budget, count(distinct max_steps) as declared_budgets
    from run_started group by run_id
),
run_budgets as (
    select run_id, count(distinct budget) as budgets
    from session_started where parent_session_id is null group by run_id
)
select st.session_id, st.run_id,
    st.task ->> 'task_id' as task_id,
    coalesce(nullif(st.agent, ''), r.agent, '') as agent,
    coalesce(nullif(st.model, ''), r.model, '') as model,
    st.attempt,
    en.status, en.agent_status, en.answer, en.steps, en.seconds,
    gr.score, gr.passed, gr.grader,
    st.parent_session_id, st.replay_mode, st.fork_step,
    st.time as started_at, en.time as ended_at,
    coalesce(st.task ->> 'suite', '') as suite,
    st.task ->> 'prompt' as prompt,
    st.task ->> 'start_url' as start_url,
    en.parse_failures, en.action_errors, en.error,
    st.viewport,
    st.budget, coalesce(st.repeat, 1) as repeat, cn.counted,
    coalesce(st.budget = r.budget and r.declared_budgets = 1 and rb.budgets = 1, false)
        as comparable
from started st
left join ended en on en.session_id = st.session_id
left join graded gr on gr.session_id = st.session_id
left join counted cn on cn.session_id = st.session_id
left join run r on r.run_id = st.run_id
left join run_budgets rb on rb.run_id = st.run_id
"""


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)


def assert_same_as_the_old_view(store: Store) -> int:
    """The sessions view equals the old definition: columns, types and rows."""
    new, old = store.sql_many(
        [("select * from sessions", None), (f"select * from ({OLD_SESSIONS})", None)]
    )
    assert new.columns == old.columns
    assert new.types == old.types
    assert _sorted(new.rows) == _sorted(old.rows)
    return len(new.rows)


def _started(run_id: str, session_id: str, t: float, task: str, **fields: Any) -> E.Event:
    return E.SessionStarted(
        at=at(t),
        run_id=run_id,
        session_id=session_id,
        task=E.Task(
            task_id=task, prompt=f"do {task}", start_url="http://x/", suite=fields.pop("suite", "")
        ),
        **fields,
    )


def _ended(
    run_id: str, session_id: str, t: float, status: str = "finished", **fields: Any
) -> E.Event:
    return E.SessionEnded(at=at(t), run_id=run_id, session_id=session_id, status=status, **fields)  # type: ignore[arg-type]


def _graded(run_id: str, session_id: str, t: float, passed: bool, **fields: Any) -> E.Event:
    return E.SessionGraded(
        at=at(t),
        run_id=run_id,
        session_id=session_id,
        grader="answer",
        score=float(passed),
        passed=passed,
        **fields,
    )


def _counted(
    run_id: str, session_id: str, t: float, task: str, repeat: int, counted: bool
) -> E.Event:
    return E.SessionCounted(
        at=at(t), run_id=run_id, session_id=session_id, task_id=task, repeat=repeat, counted=counted
    )


def _append(store: Store, stream: str, events: list[E.Event]) -> None:
    with store.stream(stream) as s:
        s.append(events)


def _write_runs(store: Store, record_session: Callable[..., str]) -> None:
    """Repeats with a ledger, a retried loser, a crash, a resumed session, replays, a budget
    that differs, an imported run with no RunStarted, runs with budgets left out, and ties broken
    by stream and sequence."""
    _append(
        store,
        "r1-start",
        [
            E.RunStarted(
                at=at(-1), run_id="r1", agent="uitars", model="m1", max_steps=10, suite="bench"
            )
        ],
    )
    for repeat, passed in enumerate([True, False, True], start=1):
        record_session(
            f"a{repeat}",
            task="a",
            repeat=repeat,
            counted=True,
            score=float(passed),
            t=10.0 * repeat,
        )
    record_session("a1-late", task="a", repeat=1, counted=False, score=0.0, t=50)
    # crashed: started, never ended
    _append(store, "crashed", [_started("r1", "crashed", 60, "b", agent="uitars", budget=10)])
    # resumed: two starts and two ends in two streams; the first start and last end count
    _append(
        store,
        "resumed",
        [
            _started("r1", "resumed", 70, "c", budget=10, viewport=(800, 600)),
            _ended("r1", "resumed", 75, "timeout", steps=3),
            _graded("r1", "resumed", 75.5, False),
        ],
    )
    _append(
        store,
        "resumed-2",
        [
            _started("r1", "resumed", 80, "c-other", budget=10),
            _ended(
                "r1",
                "resumed",
                85,
                "finished",
                steps=5,
                answer="x",
                parse_failures=1,
                action_errors=2,
                error="e",
            ),
            _graded("r1", "resumed", 85.5, True),
            _counted("r1", "resumed", 86, "c", 1, True),
        ],
    )
    # a tie at the same time in two streams: stream and seq decide
    _append(
        store,
        "tie-a",
        [
            _started("r1", "tie", 90, "d", budget=10, attempt=2),
            _ended("r1", "tie", 95, "fail", steps=1),
        ],
    )
    _append(
        store,
        "tie-b",
        [
            _ended("r1", "tie", 95, "max_steps", steps=2),
            _ended("r1", "tie", 95, "no_action", steps=3),
        ],
    )
    # a session under another budget (the run is no longer comparable at one budget)
    _append(
        store,
        "other-budget",
        [_started("r1", "other-budget", 100, "e", budget=20), _ended("r1", "other-budget", 101)],
    )
    # replays of a1: no agent of their own, the run's is used
    for mode, n in (("ops", 1), ("responses", 2)):
        _append(
            store,
            f"replay-{n}",
            [
                _started(
                    "r1",
                    f"replay-{n}",
                    110 + n,
                    "a",
                    parent_session_id="a1",
                    replay_mode=mode,
                    fork_step=n if mode == "responses" else None,
                ),
                _ended("r1", f"replay-{n}", 112 + n),
                _graded("r1", f"replay-{n}", 112.5 + n, True),
            ],
        )
    # an imported run: no RunStarted, grades from the import
    for n in range(3):
        _append(
            store,
            f"imp-{n}",
            [
                _started(
                    "imp",
                    f"imp-{n}",
                    200 + n,
                    f"t{n}",
                    agent="other",
                    model="m9",
                    suite="imported",
                    repeat=n + 1,
                ),
                _ended("imp", f"imp-{n}", 200.5 + n),
                _graded("imp", f"imp-{n}", 200.6 + n, n % 2 == 0, source="import"),
            ],
        )
    # a run with two declared budgets
    _append(
        store,
        "run-r2",
        [
            E.RunStarted(at=at(300), run_id="r2", max_steps=5),
            E.RunStarted(at=at(301), run_id="r2", max_steps=6, agent="late"),
        ],
    )
    _append(store, "r2-s", [_started("r2", "r2-s", 302, "a", budget=5), _ended("r2", "r2-s", 303)])
    # budgets left out: a run that declares none, and one whose sessions give one or none
    _append(store, "run-r3", [E.RunStarted(at=at(310), run_id="r3", agent="a3")])
    _append(store, "r3-s", [_started("r3", "r3-s", 311, "a"), _ended("r3", "r3-s", 312)])
    _append(store, "run-r4", [E.RunStarted(at=at(320), run_id="r4", max_steps=4)])
    _append(store, "r4-a", [_started("r4", "r4-a", 321, "a", budget=4)])
    _append(store, "r4-b", [_started("r4", "r4-b", 322, "b")])


def test_the_sessions_view_equals_its_old_definition_after_every_sync(
    store: Store, record_session: Callable[..., str]
) -> None:
    _write_runs(store, record_session)
    assert assert_same_as_the_old_view(store) == 17
    rows = store.sql("select session_id, comparable from sessions where run_id in ('r3', 'r4')")
    assert sorted(rows.rows) == [("r3-s", False), ("r4-a", True), ("r4-b", False)]
    # later events about sessions already indexed: a regrade, one against a seal (the sealed
    # grade stays), the crashed session ending, a late counted verdict, an end before its start
    _append(
        store,
        "regrade",
        [
            _graded("r1", "a2", 500, True, source="regrade"),
            _graded("r1", "a3", 501, False, source="regrade", against_seal="abc"),
            _counted("r1", "a1-late", 502, "a", 1, True),
        ],
    )
    _append(store, "crashed-end", [_ended("r1", "crashed", 503, "error", error="browser died")])
    _append(store, "early", [_ended("r1", "early", 504, "finished")])
    assert assert_same_as_the_old_view(store) == 17
    rows = dict(store.sql("select session_id, passed from sessions").rows)
    assert rows["a2"] is True and rows["a3"] is True  # a3's regrade was against a seal
    _append(store, "early-start", [_started("r1", "early", 505, "f", budget=10)])
    assert assert_same_as_the_old_view(store) == 18
    assert store.sql("select status from sessions where session_id = 'early'").rows == [
        ("finished",)
    ]
    # a run's RunStarted written after its sessions: agent, model and comparable change
    _append(
        store,
        "run-imp",
        [E.RunStarted(at=at(600), run_id="imp", agent="", model="m0", max_steps=7)],
    )
    assert assert_same_as_the_old_view(store) == 18
    store.rebuild_index()
    assert assert_same_as_the_old_view(store) == 18


def test_a_session_split_across_ingest_batches_gets_one_row(
    store: Store, record_session: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With batches of a few hundred bytes, a session's start and its end land in different
    transactions of one sync: its row is recomputed by each."""
    monkeypatch.setattr(pipeline, "_BATCH", 300)
    _write_runs(store, record_session)
    result = store.sync()
    assert result.events > 50
    assert assert_same_as_the_old_view(store) == 17
    assert store.sql("select count(*), count(distinct session_id) from session_facts").rows == [
        (17, 17)
    ]


@pytest.mark.parametrize("fresh", [True, False])
def test_the_scores_read_through_the_new_view_are_unchanged(
    store: Store, record_session: Callable[..., str], fresh: bool
) -> None:
    _write_runs(store, record_session)
    if not fresh:
        store.sync()
        _append(store, "regrade", [_graded("r1", "a2", 500, True, source="regrade")])
    units = store.sql("select * from scored_units order by run_id, task_id, repeat").rows
    old = store.sql(
        f"with s as ({OLD_SESSIONS}) select run_id, task_id, repeat, session_id, passed from s "
        "where parent_session_id is null and counted order by run_id, task_id, repeat"
    ).rows
    assert [u[:5] for u in units if u[7]] == old
