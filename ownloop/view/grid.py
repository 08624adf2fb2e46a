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

import functools
from collections.abc import Sequence
from typing import NamedTuple

from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.queries import run_units_sessions
from ownloop.store.stats import Interval, mcnemar_exact, paired_bootstrap

__all__ = ["Cell", "Difference", "Grid", "GridRow", "build_grid"]


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
    """A run against the first: mean over shared tasks of the pass-rate difference."""

    run_id: str
    shared: int
    interval: Interval
    only_first: int
    only_this: int
    p_value: float


class Grid(NamedTuple):
    runs: list[str]
    rows: list[GridRow]
    differences: list[Difference]


def _representative(units: Sequence[tuple[int, str, bool]], solved: bool) -> str | None:
    """The first repeat whose outcome is the run's verdict on the task."""
    return next((session for _, session, passed in units if passed == solved),
                units[0][1] if units else None)


@functools.lru_cache(maxsize=64)
def _difference(run_id: str, pairs: tuple[tuple[tuple[bool, ...], tuple[bool, ...]], ...],
                only_first: int, only_this: int) -> Difference:
    # Cached by the outcomes themselves: the bootstrap is the costly part of the page.
    return Difference(run_id, len(pairs), paired_bootstrap(pairs), only_first, only_this,
                      mcnemar_exact(only_first, only_this))


def build_grid(store: Store, run_ids: Sequence[str]) -> Grid:
    """The grid of ``run_ids``, in the order they started: the first is the one the others are
    compared with.

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
            other = rep if index else _representative(outcomes[runs[1]],
                                                      solved.get(runs[1], False))
            left = base if index else rep
            url = f"/pair/{left}/{other}" if left and other else None
            cells.append(Cell(run, len(mine), sum(p for *_, p in mine), rep, url))
        mixed = any(0 < c.passes < c.n for c in cells)
        rows.append(GridRow(task, cells, len(set(solved.values())) > 1, mixed))
    rows.sort(key=lambda row: (not row.flipped, not row.mixed, row.task_id))
    differences = []
    for run in runs[1:]:
        shared = sorted(units[first].keys() & units[run].keys())
        pairs = tuple((tuple(p for *_, p in units[first][t]), tuple(p for *_, p in units[run][t]))
                      for t in shared)
        solved_first = [2 * sum(a) > len(a) for a, _ in pairs]
        solved_this = [2 * sum(b) > len(b) for _, b in pairs]
        only_first = sum(a and not b for a, b in zip(solved_first, solved_this, strict=True))
        only_this = sum(b and not a for a, b in zip(solved_first, solved_this, strict=True))
        differences.append(_difference(run, pairs, only_first, only_this))
    return Grid(runs, rows, differences)
