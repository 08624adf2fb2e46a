"""Statistics against values computed by hand, and the views that carry them in the index."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ownloop.scoring.stats import (
    clustered_bootstrap,
    mcnemar_exact,
    paired_bootstrap,
    pass_at_k,
    pass_hat_k,
    percentile,
    wilson,
)
from ownloop.store import Store
from ownloop.store import events as E
from tests.store.conftest import at


# ------------------------------------------------------------------ pure functions
@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 2 / 5),  # 1 - C(3,1)/C(5,1) = 1 - 3/5
        (5, 2, 2, 7 / 10),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 9 / 10),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # fewer than 4 failures: some sample of 4 always passes
        (4, 0, 2, 0.0),
        (10, 3, 5, 1 - 21 / 252),  # C(7,5) = 21, C(10,5) = 252
    ],
)
def test_pass_at_k_matches_the_hand_computed_value(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 2 / 5),
        (5, 2, 2, 1 / 10),  # C(2,2)/C(5,2)
        (5, 2, 3, 0.0),
        (4, 3, 2, 3 / 6),  # C(3,2)/C(4,2)
        (4, 4, 4, 1.0),
        (10, 6, 3, 20 / 120),  # C(6,3)/C(10,3)
    ],
)
def test_pass_hat_k_matches_the_hand_computed_value(
    n: int, c: int, k: int, expected: float
) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected)


def test_k_outside_one_to_n_is_refused() -> None:
    with pytest.raises(ValueError, match="between 1 and n=3"):
        pass_at_k(3, 1, 4)


def test_wilson_matches_the_hand_computed_interval() -> None:
    # 8 of 10, z = 1.96: centre (0.8 + 0.19208) / 1.38416 = 0.716738; half-width
    # 1.96 / 1.38416 * sqrt(0.016 + 0.009604) = 0.226581
    low, high = wilson(8, 10)[1:]
    assert low == pytest.approx(0.490162, abs=1e-5)
    assert high == pytest.approx(0.943318, abs=1e-5)
    assert wilson(0, 10).low == 0.0 and wilson(10, 10).high == 1.0
    assert wilson(0, 0) == (0.0, 0.0, 1.0)


@pytest.mark.parametrize(
    ("only_a", "only_b", "expected"),
    [
        (0, 0, 1.0),
        (5, 0, 2 / 32),  # 2 * (1/2)^5
        (1, 4, 2 * 6 / 32),  # 2 * (C(5,0) + C(5,1)) / 2^5
        (3, 3, 1.0),
        (9, 1, 2 * 11 / 1024),  # 2 * (1 + 10) / 2^10
    ],
)
def test_mcnemar_exact_matches_the_binomial_tail(only_a: int, only_b: int, expected: float) -> None:
    assert mcnemar_exact(only_a, only_b) == pytest.approx(expected)


def test_percentile_interpolates_between_order_statistics() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.25) == 2.0


_TASKS = [[True, True, False], [False, False, False], [True, True, True], [True, False, True]]


def test_the_clustered_bootstrap_is_reproducible_under_a_seed() -> None:
    one = clustered_bootstrap(_TASKS, seed=7)
    assert one == clustered_bootstrap(_TASKS, seed=7)
    assert one.estimate == pytest.approx(7 / 12)
    assert 0.0 <= one.low < one.estimate < one.high <= 1.0
    # pinned: a change of algorithm or random stream would change published intervals
    assert clustered_bootstrap(_TASKS, seed=7, resamples=101) == (7 / 12, 1 / 6, 1.0)
    assert clustered_bootstrap(_TASKS, seed=8, resamples=101).high == pytest.approx(23 / 24)


def test_the_clustered_bootstrap_resamples_tasks_not_only_sessions() -> None:
    # Two tasks, one always passing, one always failing: resampling only sessions within tasks
    # would give no spread at all; resampling tasks gives replicates of 0, 0.5 and 1.
    interval = clustered_bootstrap([[True] * 4, [False] * 4], seed=0)
    assert (interval.low, interval.estimate, interval.high) == (0.0, 0.5, 1.0)


def test_the_paired_bootstrap_centres_on_the_mean_difference() -> None:
    pairs = [
        ([True, True], [False, False]),
        ([True, False], [True, False]),
        ([False, False], [False, False]),
        ([True, True], [True, False]),
    ]
    interval = paired_bootstrap(pairs, seed=3)
    assert interval.estimate == pytest.approx((-1 + 0 + 0 - 0.5) / 4)
    # tasks drawn, not their repeats: no replicate can rise above the largest difference, 0
    assert interval[1:] == (-0.75, 0.0)  # pinned under the seed
    assert interval == paired_bootstrap(pairs, seed=3)
    # identical runs with constant outcomes: no difference in any replicate
    same = [([True], [True]), ([False], [False])]
    assert paired_bootstrap(same) == (0.0, 0.0, 0.0)


# ------------------------------------------------------------------ the views
@pytest.fixture
def repeats(store: Store, record_session: Callable[..., str]) -> Store:
    """Run r1: task a passes 2 of 5 repeats, task b 3 of 3 (ledger-counted), task c 0 of 1
    (no SessionCounted: an imported run's unit). A retried loser of a/1 is not counted."""
    t = 0.0
    for task, outcomes in (("a", [1, 0, 1, 0, 0]), ("b", [1, 1, 1])):
        for repeat, passed in enumerate(outcomes, start=1):
            record_session(
                f"{task}{repeat}", task=task, repeat=repeat, counted=True, score=float(passed), t=t
            )
            t += 10
    record_session("a1-late", task="a", repeat=1, counted=False, score=0.0, t=t)
    record_session("c1", task="c", score=0.0, t=t + 10)
    return store


def test_scored_units_take_the_counted_session_else_the_first_scored(repeats: Store) -> None:
    rows = repeats.sql(
        "select task_id, repeat, session_id, passed, counted from scored_units "
        "order by task_id, repeat"
    ).rows
    assert [r[:3] for r in rows if r[0] == "a"] == [
        ("a", 1, "a1"),
        ("a", 2, "a2"),
        ("a", 3, "a3"),
        ("a", 4, "a4"),
        ("a", 5, "a5"),
    ]
    assert rows[-1] == ("c", 1, "c1", False, False)
    assert len(rows) == 9


def test_task_outcomes_give_pass_at_k_and_pass_hat_k_per_k(repeats: Store) -> None:
    rows = repeats.sql(
        "select task_id, n, passes, pass_rate, k, pass_at_k, pass_hat_k "
        "from task_outcomes order by task_id, k"
    ).rows
    a = [r for r in rows if r[0] == "a"]
    assert [r[4] for r in a] == [1, 2, 3, 4, 5]
    assert [r[1:4] for r in a][0] == (5, 2, 0.4)
    assert [r[5] for r in a] == pytest.approx([0.4, 0.7, 0.9, 1.0, 1.0])
    assert [r[6] for r in a] == pytest.approx([0.4, 0.1, 0.0, 0.0, 0.0])
    assert [(r[5], r[6]) for r in rows if r[0] == "b"] == [(1.0, 1.0)] * 3
    assert [(r[5], r[6]) for r in rows if r[0] == "c"] == [(0.0, 0.0)]
    # the SQL agrees with the Python for every row
    for _, n, c, _, k, at_k, hat_k in rows:
        assert (at_k, hat_k) == pytest.approx((pass_at_k(n, c, k), pass_hat_k(n, c, k)))


@pytest.mark.slow
def test_run_scores_give_wilson_and_a_reproducible_task_bootstrap(repeats: Store) -> None:
    rows = repeats.sql(
        "select run_id, agent, model, tasks, sessions, score, ci_low, ci_high, "
        "method from run_scores order by method"
    ).rows
    assert [r[8] for r in rows] == ["task_bootstrap", "wilson"]
    boot, wil = rows
    assert wil[:6] == ("r1", "uitars", "m1", 3, 9, pytest.approx(5 / 9))
    assert wil[6:8] == pytest.approx(wilson(5, 9)[1:])
    outcomes = [[True, False, True, False, False], [True, True, True], [False]]
    assert boot[3:8] == (3, 9, *clustered_bootstrap(outcomes))  # stored as computed
    # the same numbers after a rebuild of the index
    repeats.rebuild_index()
    assert repeats.sql("select * from run_scores order by method").rows[0][6:8] == boot[6:8]


@pytest.mark.slow
def test_new_sessions_and_regrades_recompute_the_bootstrap(
    repeats: Store, record_session: Callable[..., str]
) -> None:
    query = "select tasks, sessions, score from run_scores where method = 'task_bootstrap'"
    assert repeats.sql(query).rows == [(3, 9, pytest.approx(5 / 9))]
    record_session("d1", task="d", score=1.0, t=500)
    assert repeats.sql(query).rows == [(4, 10, pytest.approx(6 / 10))]
    with repeats.stream("regrade") as stream:  # a2 failed; a regrade says it passed
        stream.append(
            [
                E.SessionGraded(
                    at=at(600),
                    run_id="r1",
                    session_id="a2",
                    grader="answer",
                    score=1.0,
                    passed=True,
                    source="regrade",
                )
            ]
        )
    assert repeats.sql(query).rows == [(4, 10, pytest.approx(7 / 10))]
    assert repeats.sql("select passes from task_outcomes where task_id = 'a' and k = 1").rows == [
        (3,)
    ]


def test_flips_list_tasks_whose_repeats_disagree_and_the_flip_rate(repeats: Store) -> None:
    assert repeats.sql("select run_id, task_id, n, passes, outcomes from flips").rows == [
        ("r1", "a", 5, 2, [True, False, True, False, False])
    ]
    assert repeats.sql("select run_id, tasks, flipped, flip_rate from flip_rates").rows == [
        ("r1", 3, 1, pytest.approx(1 / 3))
    ]
