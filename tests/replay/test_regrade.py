"""Regrade synthetic sessions: flips, kept grades, idempotence, selection, tasks files, skips."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ownloop.errors import OwnloopError
from ownloop.grading import GraderSpecError
from ownloop.replay.regrade import graders_from_tasks_file, regrade
from ownloop.store import QueryError, Store, open_store
from ownloop.testing.synthetic import Session, agent_step, finish, write_sessions

STEPS = (agent_step([finish()]),)
PASS = (("answer:contains:done", 1.0, True),)


def _spec(sid: str, answer: str | None, **kw: object) -> Session:
    return Session(
        sid,
        task_id=f"task-{sid}",
        answer=answer,
        steps=STEPS,  # type: ignore[arg-type]
        **kw,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sessions below, written and indexed once; each test regrades its own copy."""
    root = tmp_path_factory.mktemp("regrade") / "store"
    store = open_store(root, fsync=False)
    write_sessions(
        store,
        _spec("p1", "done"),
        _spec("p2", "all done"),
        _spec("p3", "Done."),
        _spec("f1", "nothing", grades=(("answer:contains:done", 0.0, False),)),
        _spec("e1", None, status="endpoint_error", grades=()),
        _spec("n1", "done", grader=None, grades=()),
        _spec("q1", "done", run_id="r2", start=500),
    )
    store.sync()
    return root


@pytest.fixture
def store(built: Path, tmp_path: Path) -> Store:
    shutil.copytree(built, tmp_path / "store")
    return open_store(tmp_path / "store", fsync=False)


def _sessions(store: Store) -> list[tuple]:
    return store.sql(
        "select session_id, score, passed, grader from sessions order by session_id"
    ).rows


def test_stricter_grader_flips_the_expected_sessions_and_keeps_old_grades(store: Store) -> None:
    result = regrade(store, run_id="r1", grader="answer:exact:done")
    assert result.selected == 6 and result.graded == 5  # not e1: endpoint_error
    flips = {f.session_id: (f.before, f.after) for f in result.flips}
    assert flips == {"p2": (True, False), "p3": (True, False), "n1": (None, True)}
    assert (result.passed_before, result.passed_after) == (3, 2)  # p1 p2 p3 -> p1 n1
    rows = dict((r[0], r[1:]) for r in _sessions(store))
    assert rows["p2"] == (0.0, False, "answer:exact:done")
    assert rows["q1"] == (1.0, True, "answer:contains:done")  # other run untouched
    grades = store.sql(
        "select session_id, grader, source, latest from grades "
        "where session_id = 'p2' order by graded_at"
    ).rows
    assert grades == [
        ("p2", "answer:contains:done", "record", False),
        ("p2", "answer:exact:done", "regrade", True),
    ]


def test_regrading_twice_with_the_same_grader_is_idempotent_in_sessions(store: Store) -> None:
    first = regrade(store, grader="answer:exact:done")
    after_first = _sessions(store)
    second = regrade(store, grader="answer:exact:done")
    assert _sessions(store) == after_first
    assert second.flips == () and second.passed_before == second.passed_after == first.passed_after
    # every regrade is kept: record + 2 regrades for each graded session
    counts = store.sql("select count(*) from grades where session_id = 'p2'").rows
    assert counts == [(3,)]


def test_each_sessions_own_grader_by_default(store: Store) -> None:
    result = regrade(store, run_id="r1")
    assert result.graded == 4  # e1: endpoint_error; n1: no grader
    assert result.flips == ()
    assert result.skipped == 2


def test_one_new_stream_per_regrade(store: Store) -> None:
    before = {p.stem for p in store.journal_dir.glob("*.jsonl")}
    result = regrade(store, grader="answer:exact:done")
    new = {p.stem for p in store.journal_dir.glob("*.jsonl")} - before
    assert new == {result.stream}
    lines = (store.journal_dir / f"{result.stream}.jsonl").read_text().splitlines()
    assert len(lines) == result.graded == 6  # all but e1
    events = [json.loads(line)["event"] for line in lines]
    assert {(e["kind"], e["source"]) for e in events} == {("session_graded", "regrade")}


def test_ungraded_statuses_are_skipped(store: Store) -> None:
    result = regrade(store, where="session_id = 'e1'", grader="answer:exact:done")
    assert (result.selected, result.graded, result.stream) == (1, 0, None)


def test_task_and_where_select(store: Store) -> None:
    assert regrade(store, task_id="task-p1", grader="none").selected == 1
    result = regrade(store, where="answer like '%done%'", grader="answer:exact:done")
    assert result.selected == result.graded == 4  # p1 p2 n1 q1 (like is case-sensitive)
    assert sorted(f.session_id for f in result.flips) == ["n1", "p2"]


def test_flip_from_fail_to_pass_and_from_ungraded(store: Store) -> None:
    result = regrade(store, where="session_id in ('f1', 'n1')", grader="answer:regex:.")
    flips = {f.session_id: (f.before, f.after) for f in result.flips}
    assert flips == {"f1": (False, True), "n1": (None, True)}
    assert "ungraded - -> pass" in "\n".join(result.lines())


def test_graders_from_a_tasks_file(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(
        json.dumps(
            {
                "tasks": [
                    {
                        "task_id": "task-p1",
                        "prompt": "p",
                        "start": "{BASE}/a",
                        "grader": "answer:exact:x",
                    },
                    {
                        "task_id": "task-p2",
                        "prompt": "p",
                        "start": "{BASE}/b",
                        "grader": {"type": "answer", "contains": "all"},
                    },
                ]
            }
        )
    )
    graders = graders_from_tasks_file(path)
    assert graders == {"task-p1": "answer:exact:x", "task-p2": '{"contains":"all","type":"answer"}'}
    result = regrade(store, tasks=graders)
    assert result.graded == 2  # the other tasks are not in the file
    assert [f.session_id for f in result.flips] == ["p1"]


def test_bad_input_is_one_line(store: Store, tmp_path: Path) -> None:
    with pytest.raises(GraderSpecError, match="bad grader spec"):
        regrade(store, grader="answer:nope:1")
    with pytest.raises(QueryError):
        regrade(store, where="no_such_column = 1")
    with pytest.raises(OwnloopError, match="cannot read tasks file"):
        graders_from_tasks_file(tmp_path / "missing.json")
    with pytest.raises(OwnloopError, match="not both"):
        regrade(store, grader="none", tasks={})
    assert len(list(store.journal_dir.glob("*.jsonl"))) == 9  # nothing was appended
