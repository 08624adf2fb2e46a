"""How much a score can be trusted: intervals, pass@k and pass^k, bootstraps, McNemar's test.

Pure functions over pass/fail outcomes: no I/O, no clock. The bootstraps take a seed and draw
from ``random.Random(seed)``, whose stream Python documents as reproducible for a given seed, so
the same outcomes give the same interval on every call, machine and version. (DuckDB's
``random()`` cannot be seeded inside a view, and its ``hash()`` may change between releases: the
index stores the Python bootstrap's interval at sync instead, see ``scores.py``.)

A run's outcomes are grouped by task: ``tasks[i]`` holds task i's repeats, each True (passed) or
False. Intervals are two-sided at ``level`` (95% by default).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import NormalDist
from typing import NamedTuple

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "Interval",
    "clustered_bootstrap",
    "mcnemar_exact",
    "paired_bootstrap",
    "pass_at_k",
    "pass_hat_k",
    "percentile",
    "wilson",
]

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0

Outcomes = Sequence[bool]


class Interval(NamedTuple):
    """A point estimate with its interval."""

    estimate: float
    low: float
    high: float


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(passes: int, n: int, level: float = 0.95) -> Interval:
    """The Wilson score interval of a proportion ``passes / n`` (n = 0: the whole of [0, 1])."""
    if n == 0:
        return Interval(0.0, 0.0, 1.0)
    z = _z(level)
    p = passes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # exactly 0 and 1 at the ends (rounding would leave 1e-17 there)
    low = 0.0 if passes == 0 else max(0.0, centre - half)
    high = 1.0 if passes == n else min(1.0, centre + half)
    return Interval(p, low, high)


def pass_at_k(n: int, passes: int, k: int) -> float:
    """Unbiased pass@k from ``passes`` of ``n`` samples: 1 - C(n-c, k) / C(n, k), the chance
    that at least one of k samples drawn without replacement passes."""
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and n={n}, not {k}")
    return 1.0 - math.comb(n - passes, k) / math.comb(n, k)


def pass_hat_k(n: int, passes: int, k: int) -> float:
    """pass^k from ``passes`` of ``n`` samples: C(c, k) / C(n, k), the chance that all k samples
    drawn without replacement pass (an unbiased estimate of p^k)."""
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and n={n}, not {k}")
    return math.comb(passes, k) / math.comb(n, k)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, linearly interpolated between order statistics."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def _resample(rng: random.Random, outcomes: Outcomes) -> int:
    """Passes among ``len(outcomes)`` repeats drawn with replacement from ``outcomes``."""
    n = len(outcomes)
    return sum(outcomes[int(rng.random() * n)] for _ in range(n))


def _interval(estimate: float, replicates: list[float], level: float) -> Interval:
    tail = (1 - level) / 2
    return Interval(estimate, percentile(replicates, tail), percentile(replicates, 1 - tail))


def clustered_bootstrap(tasks: Sequence[Outcomes], *, resamples: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED, level: float = 0.95) -> Interval:
    """The pass rate over all sessions with a task-clustered percentile bootstrap interval.

    Each replicate draws len(tasks) tasks with replacement, then, within each drawn task, its
    repeats with replacement; the replicate's score is its passes over its sessions. Tasks
    without outcomes are left out.
    """
    groups = [list(t) for t in tasks if len(t)]
    sessions = sum(map(len, groups))
    if not groups:
        return Interval(0.0, 0.0, 1.0)
    estimate = sum(map(sum, groups)) / sessions
    rng = random.Random(seed)
    replicates = []
    for _ in range(resamples):
        drawn = [groups[int(rng.random() * len(groups))] for _ in groups]
        replicates.append(sum(_resample(rng, g) for g in drawn) / sum(map(len, drawn)))
    return _interval(estimate, replicates, level)


def _rate(outcomes: Outcomes) -> float:
    return sum(outcomes) / len(outcomes)


def paired_bootstrap(pairs: Sequence[tuple[Outcomes, Outcomes]], *,
                     resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                     level: float = 0.95) -> Interval:
    """The mean over tasks of B's pass rate minus A's, with a paired percentile bootstrap.

    ``pairs[i]`` is task i's (A outcomes, B outcomes). Each replicate draws tasks with
    replacement (a drawn task keeps its A and B together: that is the pairing), then each side's
    repeats with replacement. Pairs where a side has no outcomes are left out.
    """
    kept = [(list(a), list(b)) for a, b in pairs if len(a) and len(b)]
    if not kept:
        return Interval(0.0, -1.0, 1.0)
    estimate = sum(_rate(b) - _rate(a) for a, b in kept) / len(kept)
    rng = random.Random(seed)
    replicates = []
    for _ in range(resamples):
        total = 0.0
        for _ in kept:
            a, b = kept[int(rng.random() * len(kept))]
            total += _resample(rng, b) / len(b) - _resample(rng, a) / len(a)
        replicates.append(total / len(kept))
    return _interval(estimate, replicates, level)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """McNemar's exact two-sided p-value from the discordant counts: tasks only A solved and
    tasks only B solved. Under no difference each discordant task is a fair coin:
    p = min(1, 2 * P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2); 1.0 with none."""
    m = only_a + only_b
    if m == 0:
        return 1.0
    tail: float = sum(math.comb(m, i) for i in range(min(only_a, only_b) + 1)) / 2**m
    return min(1.0, 2 * tail)
