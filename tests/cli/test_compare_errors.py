"""Issue 24 through the CLI on stores built with the store's test helpers (no browser): errored
units count as failures (``--errors``), the gate refuses an incomplete run, disjoint runs and
too few shared tasks, and a run against itself is exactly [0, 0]."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from ownloop.cli import cli
from ownloop.store import Store, open_store
from ownloop.store import events as E
from tests.store.conftest import at, session_recorder

_TASKS = [f"t{n}" for n in range(10)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """A passes all ten tasks. B passes t0-t4 and its endpoint failed on t5-t9. C ran other
    tasks, D only t0-t2 (passing), E declared the ten tasks and ran t0-t7 (passing). Built
    once: the tests only read it."""
    store = open_store(tmp_path_factory.mktemp("compare-errors") / "store", fsync=False)
    record_session = session_recorder(store)
    with store.stream("run-E-declared") as stream:
        stream.append([E.RunStarted(at=at(-100), run_id="E", task_ids=tuple(_TASKS))])
    t = 0.0
    for number, task in enumerate(_TASKS):
        record_session(f"A-{task}", run_id="A", task=task, counted=True, score=1.0, t=t)
        if number < 5:
            record_session(f"B-{task}", run_id="B", task=task, counted=True, score=1.0, t=t + 1)
        else:
            record_session(
                f"B-{task}", run_id="B", task=task, status="endpoint_error", score=None, t=t + 1
            )
        if number < 3:
            record_session(f"C-{task}", run_id="C", task=f"u{number}", counted=True, t=t + 2)
            record_session(f"D-{task}", run_id="D", task=task, counted=True, t=t + 3)
        if number < 8:
            record_session(f"E-{task}", run_id="E", task=task, counted=True, t=t + 4)
        t += 10
    return store


def _compare(store: Store, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", str(store.root), "compare", *args])


def test_errored_units_count_as_failures_and_every_summary_says_how_many(runs: Store) -> None:
    table = _compare(runs, "A", "B")
    assert table.exit_code == 0, table.output
    assert "B B: 5/10 units passed (0.500) over 10 tasks; one repeat per task" in table.output
    assert "B: 5 of 10 units ended endpoint_error, counted as failures" in table.output
    assert "B - A: -0.500, 95% paired t -0.877 to -0.123" in table.output
    assert "McNemar exact over tasks: solved only by A 5, only by B 0, p = 0.0625" in table.output
    data = json.loads(_compare(runs, "A", "B", "--format", "json").output)
    assert data["side_b"]["errored"] == {"endpoint_error": 5}
    assert [t["errored_b"] for t in data["tasks"]] == [0] * 5 + [1] * 5
    # the index's scores count them the same way
    rows = runs.sql(
        "select method, sessions, errored, graded, score from run_scores where run_id = 'B' "
        "order by method"
    ).rows
    assert rows == [("task_bootstrap", 10, 5, 5, 0.5), ("wilson", 10, 5, 5, 0.5)]
    outcomes = runs.sql(
        "select status, count(*) from unit_outcomes where run_id = 'B' and errored group by 1"
    ).rows
    assert outcomes == [("endpoint_error", 5)]


def test_the_gate_fails_an_errored_candidate_unless_errors_are_excluded(runs: Store) -> None:
    failed = _compare(runs, "A", "B", "--fail-if-worse", "0")
    assert failed.exit_code == 1
    assert "B is worse than A by more than 0.0 with confidence" in failed.output
    assert (
        "B B would fail the seal's completeness audit: task t5 has 0 counted sessions, not 1: "
        "resume the run to record it (and 4 more)" in failed.output
    )
    # B's errors left out: five shared tasks, all passed in both
    excluded = _compare(runs, "A", "B", "--fail-if-worse", "0", "--errors", "exclude")
    assert excluded.exit_code == 0, excluded.output
    assert "B: 5 of 10 units ended endpoint_error, left out (--errors exclude)" in excluded.output
    assert "B - A: +0.000, 95% paired t +0.000 to +0.000 (no variation over 5 tasks)" in (
        excluded.output
    )
    refused = _compare(runs, "A", "B", "--errors", "refuse")
    assert refused.exit_code == 1
    assert refused.output.startswith(
        "Error: run 'B' has 5 of 10 units with no graded session (5 endpoint_error) and "
        "--errors refuse was given"
    )
    assert refused.output.count("\n") == 1


def test_a_declared_task_never_run_is_a_failure_too(runs: Store) -> None:
    result = _compare(runs, "A", "E")
    assert "B: 2 of 10 units were never run, counted as failures" in result.output
    assert "B E: 8/10 units passed (0.800)" in result.output
    assert _compare(runs, "A", "E", "--fail-if-worse", "0.9").exit_code == 1


def test_runs_without_shared_tasks_or_too_few_refuse(runs: Store) -> None:
    disjoint = _compare(runs, "A", "C", "--fail-if-worse", "0.5")
    assert disjoint.exit_code == 1
    assert disjoint.output == (
        "Error: runs 'A' and 'C' share no scored task (A: 10 tasks, C: 3 tasks): compare runs "
        "of the same tasks\n"
    )
    few = _compare(runs, "A", "D", "--fail-if-worse", "0.5")
    assert few.exit_code == 1
    assert "only 3 shared tasks, fewer than --min-tasks 5" in few.output
    assert "7 tasks scored in one run only are left out of B - A" in few.output
    assert _compare(runs, "A", "D", "--fail-if-worse", "0.5", "--min-tasks", "3").exit_code == 0


def test_a_run_against_itself_is_exactly_zero(runs: Store) -> None:
    data = json.loads(_compare(runs, "A", "A", "--format", "json").output)
    assert data["difference"] == {"estimate": 0.0, "low": 0.0, "high": 0.0}
    assert data["paired_t"] == {"estimate": 0.0, "low": 0.0, "high": 0.0}
    assert (data["p_value"], data["split_expected"], data["flipped"]) == (1.0, 0.0, [])
