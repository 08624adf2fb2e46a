"""How much a score can be trusted: intervals, pass@k and pass^k, bootstraps, McNemar's test.

Pure functions over pass/fail outcomes: no I/O, no clock. The bootstraps take a seed and draw
from ``random.Random(seed)``, whose stream Python documents as reproducible for a given seed, so
the same outcomes give the same interval on every call, machine and version. (DuckDB's
``random()`` cannot be seeded inside a view, and its ``hash()`` may change between releases: the
index stores the Python bootstrap's interval at sync instead, see ``scores.py``.)

A run's outcomes are grouped by task: ``tasks[i]`` holds task i's repeats, each True (passed) or
False. Intervals are two-sided at ``level`` (95% by default).

When numpy is installed the bootstraps draw the same numbers in bulk: numpy's legacy
``RandomState`` is the same Mersenne Twister with the same 53-bit doubles as ``random.random``,
so started from ``random.Random(seed)``'s state it gives exactly the stream the loops below read,
and every replicate comes out bit for bit the same (tests/store/test_stats_fast.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from functools import cache
from statistics import NormalDist
from types import ModuleType
from typing import Any, NamedTuple

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
    "warm_up",
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


def clustered_bootstrap(
    tasks: Sequence[Outcomes],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> Interval:
    """The pass rate over all sessions with a task-clustered percentile bootstrap interval.

    Each replicate draws len(tasks) tasks with replacement, then, within each drawn task, its
    repeats with replacement; the replicate's score is its passes over its sessions. Tasks
    without outcomes are left out. When every session has the same outcome no replicate
    differs: the interval is then Wilson's over the number of tasks, never zero-width.
    """
    groups = [[bool(o) for o in t] for t in tasks if len(t)]
    sessions = sum(map(len, groups))
    if not groups:
        return Interval(0.0, 0.0, 1.0)
    estimate = sum(map(sum, groups)) / sessions
    np = _numpy()
    replicates = (
        _clustered_replicates(groups, resamples, seed)
        if np is None
        else _clustered_replicates_numpy(np, groups, resamples, seed)
    )
    interval = _interval(estimate, replicates, level)
    if interval.low == interval.high:
        # every session alike (0/6, 2/2): no replicate varies, and [0, 0] would claim
        # certainty from a handful of tasks. Wilson's interval over the tasks instead.
        solved = sum(1 for g in groups if all(g))
        return wilson(solved, len(groups), level)._replace(estimate=estimate)
    return interval


def _clustered_replicates(groups: list[list[bool]], resamples: int, seed: int) -> list[float]:
    """The clustered bootstrap's replicates, one draw of ``random.Random(seed)`` at a time."""
    rng = random.Random(seed)
    replicates = []
    for _ in range(resamples):
        drawn = [groups[int(rng.random() * len(groups))] for _ in groups]
        replicates.append(sum(_resample(rng, g) for g in drawn) / sum(map(len, drawn)))
    return replicates


@cache
def _numpy() -> ModuleType | None:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def warm_up() -> None:
    """Load what the bootstraps use (numpy, when installed) now, e.g. while a server starts,
    so the first interval asked for does not pay for the import (about 0.1 s)."""
    _numpy()


_CHUNK = 1 << 20  # doubles drawn at a time by the bulk bootstraps


class _Stream:
    """The doubles ``random.Random(seed).random()`` returns, drawn in bulk with numpy."""

    def __init__(self, np: Any, seed: int) -> None:
        words = random.Random(seed).getstate()[1]  # 624 words of state, then the position
        self._np = np
        self._twister = np.random.RandomState()
        self._twister.set_state(("MT19937", np.array(words[:624], dtype=np.uint32), words[624]))
        self._ahead = np.empty(0)

    def peek(self, n: int) -> Any:
        """The next ``n`` doubles, not consumed."""
        if len(self._ahead) < n:
            more = self._twister.random_sample(n - len(self._ahead))
            self._ahead = self._np.concatenate((self._ahead, more))
        return self._ahead[:n]

    def consume(self, n: int) -> None:
        self._ahead = self._ahead[n:]


def _clustered_replicates_numpy(
    np: Any, groups: list[list[bool]], resamples: int, seed: int
) -> list[float]:
    """``_clustered_replicates`` with numpy: the same draws, so the same replicates.

    A replicate reads len(groups) doubles for its tasks, then, task after task, one double per
    repeat. Only where each replicate starts needs a loop; the repeats' draws of a whole chunk
    of replicates are taken at once.
    """
    k = len(groups)
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    outcomes = np.array([o for g in groups for o in g], dtype=np.int64)
    stream = _Stream(np, seed)
    ahead_size = max(_CHUNK, k + k * int(sizes.max()))  # at least one replicate's draws
    replicates: list[float] = []
    if int(sizes.min()) == int(sizes.max()):  # every task has n repeats: replicates sit evenly
        n, grid = int(sizes[0]), outcomes.reshape(k, int(sizes[0]))
        while len(replicates) < resamples:
            count = min(resamples - len(replicates), ahead_size // (k + k * n))
            block = stream.peek(count * (k + k * n)).reshape(count, k + k * n)
            stream.consume(count * (k + k * n))
            pick = (block[:, :k] * k).astype(np.int64)
            within = (block[:, k:].reshape(count, k, n) * n).astype(np.int64)
            passes = grid[pick[:, :, None], within].sum(axis=(1, 2))
            replicates += (passes / (k * n)).tolist()
        return replicates
    while len(replicates) < resamples:
        ahead = stream.peek(ahead_size)
        picks, spans, at = [], [], 0
        totals: list[int] = []
        while len(replicates) + len(totals) < resamples and at + k <= ahead_size:
            pick = (ahead[at : at + k] * k).astype(np.int64)
            total = int(sizes[pick].sum())
            if at + k + total > ahead_size:
                break  # the next chunk starts with this replicate
            picks.append(pick)
            spans.append(ahead[at + k : at + k + total])
            totals.append(total)
            at += k + total
        stream.consume(at)
        pick = np.concatenate(picks)
        drawn = sizes[pick]
        within = (np.concatenate(spans) * np.repeat(drawn, drawn)).astype(np.int64)
        passes = outcomes[np.repeat(starts[pick], drawn) + within]
        bounds = np.cumsum(totals) - np.array(totals)
        sums = np.add.reduceat(passes, bounds)  # integers: any order gives the same sums
        replicates += (sums / np.array(totals, dtype=np.int64)).tolist()
    return replicates


def _rate(outcomes: Outcomes) -> float:
    return sum(outcomes) / len(outcomes)


def paired_bootstrap(
    pairs: Sequence[tuple[Outcomes, Outcomes]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> Interval:
    """The mean over tasks of B's pass rate minus A's, with a paired percentile bootstrap.

    ``pairs[i]`` is task i's (A outcomes, B outcomes); task i's difference is B's observed pass
    rate minus A's. Each replicate draws len(pairs) tasks with replacement (a drawn task keeps
    its A and B together: that is the pairing) and averages their differences. The repeats are
    not drawn again within a task: their noise is already in how the observed rates vary from
    task to task, and drawing them again counts it twice (an interval about a quarter too wide).
    Pairs where a side has no outcomes are left out.
    """
    kept = [(a, b) for a, b in pairs if len(a) and len(b)]
    if not kept:
        return Interval(0.0, -1.0, 1.0)
    differences = [_rate(b) - _rate(a) for a, b in kept]
    estimate = sum(differences) / len(differences)
    np = _numpy()
    replicates = (
        _paired_replicates(differences, resamples, seed)
        if np is None
        else _paired_replicates_numpy(np, differences, resamples, seed)
    )
    return _interval(estimate, replicates, level)


def _paired_replicates(differences: list[float], resamples: int, seed: int) -> list[float]:
    """The paired bootstrap's replicates, one draw of ``random.Random(seed)`` at a time."""
    rng = random.Random(seed)
    k = len(differences)
    replicates = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(k):
            total += differences[int(rng.random() * k)]
        replicates.append(total / k)
    return replicates


def _paired_replicates_numpy(
    np: Any, differences: list[float], resamples: int, seed: int
) -> list[float]:
    """``_paired_replicates`` with numpy: the same draws, and each replicate's differences
    added left to right (a cumulative sum) as the loop adds them, so the same replicates."""
    k = len(differences)
    values = np.array(differences, dtype=np.float64)
    stream = _Stream(np, seed)
    replicates: list[float] = []
    while len(replicates) < resamples:
        count = min(resamples - len(replicates), max(1, _CHUNK // k))
        pick = (stream.peek(count * k) * k).astype(np.int64).reshape(count, k)
        stream.consume(count * k)
        replicates += (np.cumsum(values[pick], axis=1)[:, -1] / k).tolist()
    return replicates


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """McNemar's exact two-sided p-value from the discordant counts: tasks only A solved and
    tasks only B solved. Under no difference each discordant task is a fair coin:
    p = min(1, 2 * P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2); 1.0 with none."""
    m = only_a + only_b
    if m == 0:
        return 1.0
    tail: float = sum(math.comb(m, i) for i in range(min(only_a, only_b) + 1)) / 2**m
    return min(1.0, 2 * tail)
