"""Two runs' pass rates over the same tasks compared: the tests and intervals ``compare`` prints.

Pure functions, no I/O. A task's **difference** is B's pass rate over its repeats minus A's.
With n tasks and differences d_1..d_n (see docs/statistics.md for the reasons):

- the **paired t interval** (Miller 2024, "Adding Error Bars to Evals"): the mean difference
  d̄ ± t(n-1) · s / √n, s the sample standard deviation of the d_i (n - 1 in its denominator);
- the **sign-flip permutation test**: under no difference each task's difference is as likely
  to have either sign, so p is the share of the 2^n sign assignments whose |Σ ±d_i| is at least
  the observed |Σ d_i|; exact up to ``EXACT_TASKS`` tasks with a difference, a seeded Monte
  Carlo over ``SIGN_FLIP_DRAWS`` assignments above;
- per task, **Fisher's exact test** on its 2×2 table (A/B × pass/fail): the permutation of the
  task's pooled outcomes between the runs, and the **Holm** step-down correction over tasks;
- the number of tasks **expected** to be solved (passed in most repeats) by one run only when
  nothing changed: the same within-task permutation, summed over tasks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from fractions import Fraction
from functools import reduce

from ownloop.scoring.stats import Interval

__all__ = [
    "EXACT_TASKS",
    "SIGN_FLIP_DRAWS",
    "SIGN_FLIP_SEED",
    "TaskTable",
    "fisher_exact",
    "holm",
    "paired_t",
    "sign_flip_test",
    "split_expected",
    "t_quantile",
]

EXACT_TASKS = 20
SIGN_FLIP_DRAWS = 10000
SIGN_FLIP_SEED = 0


# ------------------------------------------------------------------ Student's t
def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: int) -> float:
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on its CDF)."""
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError(f"need 0 < p < 1 and df >= 1, not p={p}, df={df}")
    low, high = -1.0, 1.0
    while _t_cdf(low, df) > p:
        low *= 2.0
    while _t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if _t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-13 * max(1.0, abs(middle)):
            break
    return (low + high) / 2.0


def paired_t(differences: Sequence[float], level: float = 0.95) -> Interval:
    """The mean of ``differences`` with the paired t interval: d̄ ± t(n-1) · s / √n, clipped
    to [-1, 1] (a difference of pass rates). Fewer than 2 tasks: the whole of [-1, 1]."""
    n = len(differences)
    if n == 0:
        return Interval(0.0, -1.0, 1.0)
    mean = math.fsum(differences) / n
    if n < 2:
        return Interval(mean, -1.0, 1.0)
    variance = math.fsum((d - mean) ** 2 for d in differences) / (n - 1)
    half = t_quantile(0.5 + level / 2, n - 1) * math.sqrt(variance / n)
    return Interval(mean, max(-1.0, mean - half), min(1.0, mean + half))


# ------------------------------------------------------------------ the sign-flip test
def _scaled(differences: Sequence[Fraction]) -> list[int]:
    """The non-zero differences scaled to integers by their denominators' least common
    multiple."""
    kept = [d for d in differences if d != 0]
    scale = reduce(math.lcm, (d.denominator for d in kept), 1)
    return [int(d * scale) for d in kept]


def sign_flip_test(
    differences: Sequence[Fraction],
    *,
    exact_up_to: int = EXACT_TASKS,
    draws: int = SIGN_FLIP_DRAWS,
    seed: int = SIGN_FLIP_SEED,
) -> tuple[float, bool]:
    """The two-sided sign-flip permutation p-value of the paired differences and whether it is
    exact. Tasks with no difference flip to themselves and are left out; with none, p = 1.

    Exact: the number of sign assignments reaching each sum is counted (all 2^n of them,
    without listing them one by one). Above ``exact_up_to`` tasks with a difference: ``draws``
    assignments drawn from ``random.Random(seed)``, p = (1 + reaching) / (1 + draws), never 0.
    """
    signed = _scaled(differences)
    if not signed:
        return 1.0, True
    observed = abs(sum(signed))
    values = [abs(v) for v in signed]
    if len(values) <= exact_up_to:
        counts: dict[int, int] = {0: 1}
        for v in values:
            following: dict[int, int] = {}
            for total, ways in counts.items():
                for reached in (total + v, total - v):
                    following[reached] = following.get(reached, 0) + ways
            counts = following
        reaching = sum(ways for total, ways in counts.items() if abs(total) >= observed)
        return reaching / 2 ** len(values), True
    rng = random.Random(seed)
    reaching = 0
    for _ in range(draws):
        total = sum(v if rng.random() < 0.5 else -v for v in values)
        reaching += abs(total) >= observed
    return (1 + reaching) / (1 + draws), False


# ------------------------------------------------------------------ per task
class TaskTable:
    """One task's outcomes in both runs: passes and repeats of A and of B."""

    __slots__ = ("n_a", "n_b", "passes_a", "passes_b")

    def __init__(self, passes_a: int, n_a: int, passes_b: int, n_b: int) -> None:
        self.passes_a, self.n_a, self.passes_b, self.n_b = passes_a, n_a, passes_b, n_b

    def splits(self) -> list[tuple[int, float]]:
        """Each number of A's passes a random split of the pooled outcomes can give (n_a of
        them to A, the rest to B), with its hypergeometric probability."""
        total, pooled = self.n_a + self.n_b, self.passes_a + self.passes_b
        ways = math.comb(total, self.n_a)
        low, high = max(0, pooled - self.n_b), min(pooled, self.n_a)
        return [
            (x, math.comb(pooled, x) * math.comb(total - pooled, self.n_a - x) / ways)
            for x in range(low, high + 1)
        ]


def fisher_exact(table: TaskTable) -> float:
    """Fisher's exact two-sided p-value: the probability of the splits no likelier than the
    observed one (with a relative tolerance of 1e-9 for ties)."""
    splits = dict(table.splits())
    observed = splits[table.passes_a]
    return min(1.0, math.fsum(p for p in splits.values() if p <= observed * (1 + 1e-9)))


def split_expected(tables: Sequence[TaskTable]) -> float:
    """How many tasks are expected to be solved (passed in more than half of the repeats) by
    one run only when the runs do not differ: each task's pooled outcomes split at random."""
    expected = 0.0
    for t in tables:
        pooled = t.passes_a + t.passes_b
        expected += math.fsum(
            p for x, p in t.splits() if (2 * x > t.n_a) != (2 * (pooled - x) > t.n_b)
        )
    return expected


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest of m is
    multiplied by m - i (i from 0), made non-decreasing, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
