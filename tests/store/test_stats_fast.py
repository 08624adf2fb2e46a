"""The bootstraps drawn in bulk give exactly the numbers of the one-draw-at-a-time loops, and a
sync recomputes only the runs whose scored units changed."""

from __future__ import annotations

import random
from collections.abc import Callable

import duckdb
import pytest

from ownloop.scoring import stats
from ownloop.scoring.stats import Interval, clustered_bootstrap, paired_bootstrap
from ownloop.store import Store
from ownloop.store import events as E
from tests.store.conftest import at

np = pytest.importorskip("numpy")

# Outcomes of 40 tasks with 1 to 4 repeats, and the intervals the bootstraps gave for them
# before they drew in bulk (computed by the one-at-a-time loops, ownloop 0627d53).
TASKS = [
    [False],
    [False, False],
    [False, False, False],
    [True, False, False, False],
    [False],
    [True, True],
    [True, False, False],
    [True, True, True, False],
    [False],
    [True, False],
    [True, False, True],
    [True, False, True, True],
    [False],
    [False, True],
    [False, True, True],
    [True, False, False, False],
    [False],
    [True, True],
    [True, True, True],
    [True, False, True, False],
    [True],
    [False, False],
    [True, True, True],
    [False, True, False, True],
    [False],
    [False, True],
    [False, True, True],
    [True, True, True, False],
    [True],
    [False, False],
    [False, False, False],
    [False, False, True, False],
    [False],
    [False, True],
    [False, True, True],
    [True, False, True, False],
    [False],
    [True, True],
    [True, True, True],
    [False, False, True, True],
]
PAIRS = [(TASKS[i], TASKS[(i * 7) % 40]) for i in range(40)]


def test_the_intervals_are_the_ones_given_before_bulk_drawing() -> None:
    assert clustered_bootstrap(TASKS) == Interval(0.5, 0.37623535289308746, 0.6296296296296297)
    assert clustered_bootstrap(TASKS, seed=11, resamples=500, level=0.9) == Interval(
        0.5, 0.3978725452445129, 0.5937794811320755
    )
    # the paired bootstrap draws tasks only since issue 24 (pinned by the loop, ownloop stats)
    assert paired_bootstrap(PAIRS) == Interval(
        -2.7755575615628915e-18, -0.1375, 0.13958333333333334
    )
    assert paired_bootstrap(PAIRS, seed=3, resamples=700) == Interval(
        -2.7755575615628915e-18, -0.13026041666666663, 0.1396874999999999
    )


def _shapes(seed: int) -> list[list[list[bool]]]:
    """Runs of 1 to 60 tasks, each with its own pass rate; every other run has one repeat
    count for all tasks (the evenly spaced draws), the rest 1 to 7 repeats; and a skewed run."""
    rng = random.Random(seed)
    runs = []
    for n in range(24):
        even = rng.randint(1, 7) if n % 2 else 0
        runs.append(
            [
                [rng.random() < rate for _ in range(even or rng.randint(1, 7))]
                for rate in [rng.random() for _ in range(rng.randint(1, 60))]
            ]
        )
    # skewed: one task with many repeats among tasks with one (a chunk ends early)
    runs.append([[rng.random() < 0.5 for _ in range(300)]] + [[True], [False]] * 20)
    return runs


@pytest.mark.parametrize("chunk", [1 << 20, 5000, 64])
def test_bulk_replicates_equal_the_one_at_a_time_loops(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every replicate, bit for bit, also when a chunk holds a single replicate."""
    monkeypatch.setattr(stats, "_CHUNK", chunk)
    runs = _shapes(chunk)
    for n, tasks in enumerate(runs):
        seed = n * 13
        assert stats._clustered_replicates_numpy(
            np, tasks, 300, seed
        ) == stats._clustered_replicates(tasks, 300, seed)
        other = runs[(n + 2) % len(runs)]  # with one repeat count too when this run has
        differences = [
            sum(other[i % len(other)]) / len(other[i % len(other)]) - sum(a) / len(a)
            for i, a in enumerate(tasks)
        ]
        assert stats._paired_replicates_numpy(
            np, differences, 300, seed
        ) == stats._paired_replicates(differences, 300, seed)


def test_a_sync_recomputes_only_the_runs_whose_units_changed(
    store: Store, record_session: Callable[..., str]
) -> None:
    for run in ("r1", "r2"):
        for task in range(4):
            record_session(
                f"{run}-{task}", run_id=run, task=f"t{task}", score=float(task % 2), t=task
            )
    query = (
        "select run_id, ci_low, ci_high from run_scores where method = 'task_bootstrap' "
        "order by run_id"
    )
    before = store.sql(query).rows
    outcomes = [[False], [True], [False], [True]]
    assert before == [(run, *clustered_bootstrap(outcomes)[1:]) for run in ("r1", "r2")]
    # Mark r1's stored interval: a sync that recomputed r1 would overwrite it.
    con = duckdb.connect(str(store.index_path))
    con.execute("update score_bootstraps set ci_low = -1 where run_id = 'r1'")
    con.close()
    record_session("r2-new", run_id="r2", task="t4", score=1.0, t=10)
    after = dict((r, low) for r, low, _ in store.sql(query).rows)
    assert after["r1"] == -1  # untouched
    assert after["r2"] == clustered_bootstrap(outcomes + [[True]]).low


# How the units' digest was computed in SQL before a sync computed it in Python (ownloop
# 7b4728e): the stored units_md5 must stay this.
_SQL_DIGESTS = (
    "select run_id, md5(string_agg(task_id || chr(0) || repeat || chr(0) || scores_as "
    "|| chr(0) || errored, chr(1) order by task_id, repeat)) from unit_outcomes "
    "where scores_as is not null group by run_id"
)


def _bootstraps(store: Store) -> list[tuple[object, ...]]:
    return store.sql("select * from score_bootstraps order by run_id").rows


def test_a_sync_with_no_new_unit_recomputes_nothing_and_a_run_start_its_run(
    store: Store, record_session: Callable[..., str]
) -> None:
    for n in range(3):
        record_session(f"r1-{n}", task=f"t{n}", score=float(n % 2), t=n)
    assert [row[0] for row in _bootstraps(store)] == ["r1"]
    con = duckdb.connect(str(store.index_path))
    con.execute("update score_bootstraps set ci_low = -1")
    con.close()
    with store.stream("late-r1-0") as stream:  # a step's event: no session's facts change
        stream.append(
            [E.ScreenshotTaken(at=at(50), run_id="r1", session_id="r1-0", step=9, sha256="0" * 64)]
        )
    assert store.sync().events == 1
    assert [row[5] for row in _bootstraps(store)] == [-1]
    with store.stream("declared-r3") as stream:  # a run declaring two tasks: two errored units
        stream.append([E.RunStarted(at=at(60), run_id="r3", task_ids=("x", "y"))])
    assert store.sync().events == 1
    rows = {row[0]: row for row in _bootstraps(store)}
    assert rows["r1"][5] == -1  # untouched
    assert rows["r3"][2:5] == (2, 2, 0.0) and rows["r3"][9] == 2


def test_the_bootstraps_a_sync_keeps_are_the_ones_a_rebuild_computes(
    store: Store, record_session: Callable[..., str]
) -> None:
    with store.stream("declared-r3") as stream:
        stream.append([E.RunStarted(at=at(-10), run_id="r3", task_ids=("a", "b", "c", "d"))])
    store.sync()
    for n in range(4):
        record_session(f"r1-{n}", task=f"t{n % 2}", repeat=n // 2 + 1, score=float(n % 3 == 0))
        record_session(f"r3-{n}", run_id="r3", task="abc"[n % 3], score=float(n % 2), t=n)
        store.sync()
    record_session("r2-0", run_id="r2", task="t0", status="error", score=None)
    with store.stream("regrade") as stream:  # r1-1 failed; a regrade says it passed
        stream.append(
            [
                E.SessionGraded(
                    at=at(90),
                    run_id="r1",
                    session_id="r1-1",
                    grader="answer",
                    score=1.0,
                    passed=True,
                    source="regrade",
                )
            ]
        )
    kept = _bootstraps(store)
    assert [row[0] for row in kept] == ["r1", "r2", "r3"]
    digests = dict(store.sql(_SQL_DIGESTS).rows)
    assert {row[0]: row[1] for row in kept} == digests
    store.rebuild_index()
    assert _bootstraps(store) == kept
