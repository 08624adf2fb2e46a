"""The paired statistics of ``compare`` (ownloop/scoring/paired.py) held against independent
formulas written here: closed forms of Student's t, brute-force enumeration of sign patterns and
of splits, Holm's definition, and the paired interval's coverage on simulated runs whose true
difference is known."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from statistics import NormalDist, mean, stdev

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ownloop.scoring.paired import (
    TaskTable,
    fisher_exact,
    holm,
    paired_t,
    sign_flip_test,
    split_expected,
    t_quantile,
)
from ownloop.scoring.stats import clustered_bootstrap, paired_bootstrap, wilson


# ------------------------------------------------------------------ Student's t
def _t_cdf_by_integration(t: float, df: int) -> float:
    """P(T <= t) by Simpson's rule over the t density from 0 to |t| (independent of the
    incomplete beta function the module uses)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    steps = 4000
    h = abs(t) / steps
    total = 0.0
    for i in range(steps + 1):
        x = i * h
        weight = 1 if i in (0, steps) else 4 if i % 2 else 2
        total += weight * c * (1 + x * x / df) ** (-(df + 1) / 2)
    half = total * h / 3
    return 0.5 + half if t >= 0 else 0.5 - half


@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.995])
def test_t_quantiles_match_the_closed_forms_of_one_and_two_degrees(p: float) -> None:
    assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
    assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)
    assert t_quantile(1 - p, 2) == pytest.approx(-t_quantile(p, 2), rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(df=st.integers(3, 120), p=st.floats(0.55, 0.995))
def test_t_quantiles_invert_the_integrated_density(df: int, p: float) -> None:
    assert _t_cdf_by_integration(t_quantile(p, df), df) == pytest.approx(p, abs=1e-7)


def test_t_tends_to_the_normal() -> None:
    assert t_quantile(0.975, 100000) == pytest.approx(NormalDist().inv_cdf(0.975), abs=1e-4)
    assert t_quantile(0.975, 29) == pytest.approx(2.0452296421, abs=1e-8)  # printed tables


@settings(max_examples=50, deadline=None)
@given(st.lists(st.fractions(-1, 1, max_denominator=5), min_size=2, max_size=40))
def test_the_paired_t_interval_is_mean_plus_minus_t_times_s_over_root_n(
    raw: list[Fraction],
) -> None:
    d = [float(x) for x in raw]
    n = len(d)
    half = t_quantile(0.975, n - 1) * stdev(d) / math.sqrt(n)
    got = paired_t(d)
    assert got.estimate == pytest.approx(mean(d), abs=1e-12)
    assert got.low == pytest.approx(max(-1.0, mean(d) - half), abs=1e-9)
    assert got.high == pytest.approx(min(1.0, mean(d) + half), abs=1e-9)


# ------------------------------------------------------------------ the sign-flip test
def _sign_flip_by_enumeration(d: list[Fraction]) -> float:
    observed = abs(sum(d))
    signs = list(itertools.product((1, -1), repeat=len(d)))
    reaching = sum(
        1 for s in signs if abs(sum(x * y for x, y in zip(s, d, strict=True))) >= observed
    )
    return reaching / len(signs)


_DIFFERENCES = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 3)).map(lambda t: Fraction(t[1] - t[0], 3)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(_DIFFERENCES)
def test_the_sign_flip_p_is_the_share_of_sign_patterns_at_least_as_extreme(
    d: list[Fraction],
) -> None:
    p, exact = sign_flip_test(d)
    assert exact
    assert p == pytest.approx(_sign_flip_by_enumeration(d), abs=1e-12)


def test_the_sign_flip_test_sees_what_mcnemar_on_majorities_cannot() -> None:
    # 4 of 6 tasks better (by a third: one repeat more of three), none worse: McNemar on
    # "solved by a majority" saw p = 1; every pattern but the two all-same-sign ones is smaller
    d = [Fraction(1, 3)] * 4 + [Fraction(0)] * 2
    assert sign_flip_test(d) == (2 / 16, True)
    assert sign_flip_test([Fraction(0)] * 6) == (1.0, True)


def test_above_twenty_tasks_the_sign_flip_p_is_a_seeded_monte_carlo_estimate() -> None:
    rng = random.Random(5)
    d = [Fraction(rng.randint(-3, 3), 3) for _ in range(40)] + [Fraction(1, 3)] * 6
    p, exact = sign_flip_test(d)
    assert not exact and (p, False) == sign_flip_test(d)  # the same on every call
    # the exact p of the same differences, by the counting method the module uses below 20
    exact_p, _ = sign_flip_test(d, exact_up_to=100)
    assert abs(p - exact_p) < 0.02
    assert 0 < p <= 1


# ------------------------------------------------------------------ per task
def _splits_by_enumeration(t: TaskTable) -> list[tuple[int, ...]]:
    """Every way of handing n_a of the pooled outcomes to A: A's passes in each."""
    pooled = [1] * (t.passes_a + t.passes_b) + [0] * (t.n_a + t.n_b - t.passes_a - t.passes_b)
    return [tuple(c) for c in itertools.combinations(pooled, t.n_a)]


_TABLES = st.tuples(st.integers(1, 5), st.integers(1, 5)).flatmap(
    lambda n: st.tuples(st.integers(0, n[0]), st.just(n[0]), st.integers(0, n[1]), st.just(n[1]))
)


@settings(max_examples=60, deadline=None)
@given(_TABLES)
def test_fisher_p_is_the_share_of_splits_no_likelier_than_the_observed(
    cells: tuple[int, int, int, int],
) -> None:
    table = TaskTable(*cells)
    splits = [sum(c) for c in _splits_by_enumeration(table)]
    chance = {x: splits.count(x) / len(splits) for x in set(splits)}
    observed = chance[table.passes_a]
    expected = sum(p for p in chance.values() if p <= observed + 1e-12)
    assert fisher_exact(table) == pytest.approx(min(1.0, expected), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(_TABLES, min_size=1, max_size=6))
def test_the_split_tasks_expected_with_no_change_count_every_split(
    cells: list[tuple[int, int, int, int]],
) -> None:
    tables = [TaskTable(*c) for c in cells]
    expected = 0.0
    for t in tables:
        pooled = t.passes_a + t.passes_b
        ways = _splits_by_enumeration(t)
        split = sum(1 for c in ways if (2 * sum(c) > t.n_a) != (2 * (pooled - sum(c)) > t.n_b))
        expected += split / len(ways)
    assert split_expected(tables) == pytest.approx(expected, abs=1e-12)


def test_identical_agents_split_about_one_task_of_six_at_three_repeats() -> None:
    # six tasks the same agent solves always, never, or in some repeats: no change at all, and
    # yet about one of them is expected solved by one run only
    tables = [TaskTable(*c) for c in [(3, 3, 3, 3), (0, 3, 0, 3), (2, 3, 2, 3), (1, 3, 1, 3)]]
    tables += [TaskTable(3, 3, 2, 3), TaskTable(0, 3, 1, 3)]
    # 2+2 of 6 pooled: A's share of the passes is 1, 2 or 3 with chances 4, 12 and 4 in 20, and
    # 1 or 3 splits the task: 0.4 for it, and as much for 1+1 of 6; the others never split
    assert split_expected(tables) == pytest.approx(0.8)
    # and no single task can be significant at 3 repeats: the most extreme split has p 0.1
    assert fisher_exact(TaskTable(3, 3, 0, 3)) == pytest.approx(0.1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_holm_adjusts_by_the_definition(p: list[float]) -> None:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    expected = [0.0] * m
    for rank, i in enumerate(order):
        expected[i] = min(1.0, max((m - r) * p[order[r]] for r in range(rank + 1)))
    assert holm(p) == pytest.approx(expected)


# ------------------------------------------------------------------ intervals
def _coverage(n_tasks: int, trials: int, seed: int) -> tuple[float, float]:
    """How often the paired t interval and the paired bootstrap cover the true difference, on
    runs of ``n_tasks`` tasks x 3 repeats drawn from a population of tasks whose mean
    difference (B worse by about 0.1) is known."""
    rng = random.Random(seed)
    population = []
    for _ in range(4000):
        a = rng.random()
        population.append((a, min(1.0, max(0.0, a + rng.gauss(-0.1, 0.2)))))
    true = sum(b - a for a, b in population) / len(population)
    covered_t = covered_boot = 0
    for trial in range(trials):
        drawn = [population[rng.randrange(len(population))] for _ in range(n_tasks)]
        pairs = [
            ([rng.random() < a for _ in range(3)], [rng.random() < b for _ in range(3)])
            for a, b in drawn
        ]
        d = [sum(b) / 3 - sum(a) / 3 for a, b in pairs]
        t = paired_t(d)
        boot = paired_bootstrap(pairs, resamples=400, seed=trial)
        covered_t += t.low <= true <= t.high
        covered_boot += boot.low <= true <= boot.high
    return covered_t / trials, covered_boot / trials


@pytest.mark.slow
def test_the_paired_intervals_cover_the_true_difference_about_95_percent_of_the_time() -> None:
    t, boot = _coverage(30, 400, seed=2)
    assert 0.93 <= t <= 0.97
    assert 0.92 <= boot <= 0.97  # the percentile bootstrap runs a little short at 30 tasks


def test_a_run_against_itself_is_exactly_zero() -> None:
    rng = random.Random(1)
    tasks = [[rng.random() < 0.5 for _ in range(3)] for _ in range(12)]
    pairs = [(t, t) for t in tasks]
    assert tuple(paired_bootstrap(pairs)) == (0.0, 0.0, 0.0)
    assert tuple(paired_t([0.0] * 12)) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("tasks", "solved"), [([[False]] * 6, 0), ([[True]] * 2, 2), ([[True, True]] * 3, 3)]
)
def test_a_run_with_no_variation_gets_wilson_over_its_tasks_not_a_zero_width_interval(
    tasks: list[list[bool]], solved: int
) -> None:
    interval = clustered_bootstrap(tasks)
    assert interval.high > interval.low
    assert interval[1:] == wilson(solved, len(tasks))[1:]
