"""The compare page: two or more runs as a task × run grid, and the paired difference of each run
with the first.

A cell is a run's passes over its repeats of the task. A task **flipped** between runs when some
run solved it (passed in more than half of its repeats) and another did not, as ``ownloop
compare`` says; those rows come first, then tasks whose repeats disagree within a run, then the
rest. Each cell links to a pair of sessions side by side: the first run's representative and
this run's (the solving run's first passing repeat, the other's first failing one, as
``compare`` picks them), opened at their first divergent step.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

from ownloop.errors import OwnloopError
from ownloop.scoring.paired import sign_flip_test
from ownloop.scoring.stats import Interval, mcnemar_exact, paired_bootstrap
from ownloop.store import Store
from ownloop.store.queries import run_units_sessions

__all__ = [
    "Cell",
    "Difference",
    "Grid",
    "GridRow",
    "GridUnits",
    "build_grid",
    "grid_of",
    "grid_units",
]


class Cell(NamedTuple):
    run_id: str
    n: int
    passes: int
    representative: str | None  # the session a click pairs with the first run's
    pair_url: str | None

    @property
    def rate(self) -> float | None:
        return self.passes / self.n if self.n else None

    @property
    def solved(self) -> bool:
        return 2 * self.passes > self.n

    @property
    def shade(self) -> int:
        """The rate in tenths (0..10), the cell's colour class; -1 with no outcome."""
        return -1 if self.rate is None else round(self.rate * 10)


class GridRow(NamedTuple):
    task_id: str
    cells: list[Cell]
    flipped: bool  # the runs disagree on whether it is solved
    mixed: bool  # some run's repeats disagree


class Difference(NamedTuple):
    """A run against the first: mean over shared tasks of the pass-rate difference, and its
    paired bootstrap interval (None until computed: the page asks for it apart)."""

    run_id: str
    shared: int
    estimate: float
    interval: Interval | None
    only_first: int
    only_this: int
    p_value: float


class Grid(NamedTuple):
    runs: list[str]
    rows: list[GridRow]
    differences: list[Difference]


def _representative(units: Sequence[tuple[int, str, bool]], solved: bool) -> str | None:
    """The first repeat whose outcome is the run's verdict on the task."""
    return next(
        (session for _, session, passed in units if passed == solved and session),
        next((session for _, session, _ in units if session), None),
    )


Pairs = tuple[tuple[tuple[bool, ...], tuple[bool, ...]], ...]
# Intervals by the outcomes they came from: the paired bootstrap (2000 resamples, pure Python
# for its seeded stream) takes about a second on 250 tasks, so the grid is shown first and the
# interval asked for apart, then kept while the outcomes stay the same.
_INTERVALS: OrderedDict[Pairs, Interval] = OrderedDict()
_INTERVALS_KEPT = 256
_LOCK = threading.Lock()


def _interval(pairs: Pairs, compute: bool) -> Interval | None:
    with _LOCK:
        if pairs in _INTERVALS:
            _INTERVALS.move_to_end(pairs)
            return _INTERVALS[pairs]
    if not compute:
        return None
    interval = paired_bootstrap(pairs)
    with _LOCK:
        _INTERVALS[pairs] = interval
        while len(_INTERVALS) > _INTERVALS_KEPT:
            _INTERVALS.popitem(last=False)
    return interval


class GridUnits(NamedTuple):
    """What a grid is drawn from: the runs in the order they started, and each run's graded
    scored units by task, (repeat, session id, passed) each."""

    runs: list[str]
    units: dict[str, dict[str, list[tuple[int, str, bool]]]]


def build_grid(store: Store, run_ids: Sequence[str], *, intervals: bool = False) -> Grid:
    """The grid of ``run_ids``, in the order they started: the first is the one the others are
    compared with. ``intervals``: compute the paired bootstrap intervals not computed before
    (else they are None).

    Raises:
        OwnloopError: fewer than two runs, or a run without graded scored sessions.
    """
    return grid_of(grid_units(store, run_ids), intervals=intervals)


def grid_units(store: Store, run_ids: Sequence[str]) -> GridUnits:
    """What the grid of ``run_ids`` is drawn from (the store's part of ``build_grid``).

    Raises:
        OwnloopError: fewer than two runs, or a run without graded scored sessions.
    """
    runs = list(dict.fromkeys(r for r in run_ids if r))
    if len(runs) < 2:
        raise OwnloopError("pick two or more runs to compare (tick them on the runs page)")
    found = run_units_sessions(store, runs)
    started = {run: index for index, run in enumerate(found.runs)}
    runs.sort(key=lambda run: started.get(run, len(started)))
    units: dict[str, dict[str, list[tuple[int, str, bool]]]] = {r: {} for r in runs}
    for run, task, repeat, session, passed in found.units:
        units[run].setdefault(task, []).append((repeat, session, passed))
    for run in runs:
        if not units[run]:
            raise OwnloopError(f"run '{run}' has no graded scored sessions in {store.root}")
    return GridUnits(runs, units)


def _p_value(pairs: Pairs, only_first: int, only_this: int) -> float:
    """``compare``'s test: the sign-flip test of the tasks' differences when a run has repeats,
    McNemar's on the tasks solved by one run only when every task has one."""
    if all(len(a) <= 1 and len(b) <= 1 for a, b in pairs):
        return mcnemar_exact(only_first, only_this)
    return sign_flip_test([Fraction(sum(b), len(b)) - Fraction(sum(a), len(a)) for a, b in pairs])[
        0
    ]


def grid_of(found: GridUnits, *, intervals: bool = False) -> Grid:
    """The grid drawn from ``found`` (``build_grid`` without the store: no query)."""
    runs, units = found
    first = runs[0]
    rows = []
    for task in sorted(set().union(*(u.keys() for u in units.values()))):
        outcomes = {run: units[run].get(task, []) for run in runs}
        solved = {run: 2 * sum(p for *_, p in o) > len(o) for run, o in outcomes.items() if o}
        base = _representative(outcomes[first], solved.get(first, False))
        cells = []
        for index, run in enumerate(runs):
            mine = outcomes[run]
            rep = _representative(mine, solved.get(run, False)) if mine else None
            other = rep if index else _representative(outcomes[runs[1]], solved.get(runs[1], False))
            left = base if index else rep
            url = f"/pair/{left}/{other}" if left and other else None
            cells.append(Cell(run, len(mine), sum(p for *_, p in mine), rep, url))
        mixed = any(0 < c.passes < c.n for c in cells)
        rows.append(GridRow(task, cells, len(set(solved.values())) > 1, mixed))
    rows.sort(key=lambda row: (not row.flipped, not row.mixed, row.task_id))
    differences = []
    for run in runs[1:]:
        shared = sorted(units[first].keys() & units[run].keys())
        pairs = tuple(
            (tuple(p for *_, p in units[first][t]), tuple(p for *_, p in units[run][t]))
            for t in shared
        )
        solved_first = [2 * sum(a) > len(a) for a, _ in pairs]
        solved_this = [2 * sum(b) > len(b) for _, b in pairs]
        only_first = sum(a and not b for a, b in zip(solved_first, solved_this, strict=True))
        only_this = sum(b and not a for a, b in zip(solved_first, solved_this, strict=True))
        estimate = (
            sum(sum(b) / len(b) - sum(a) / len(a) for a, b in pairs) / len(pairs) if pairs else 0.0
        )
        differences.append(
            Difference(
                run,
                len(pairs),
                estimate,
                _interval(pairs, intervals),
                only_first,
                only_this,
                _p_value(pairs, only_first, only_this),
            )
        )
    return Grid(runs, rows, differences)
