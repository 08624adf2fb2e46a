"""A run's charts label their axes with the values they stand at: a count axis up to 1 reads
0, 0.5, 1 (not 0, 0, 1), and whole counts stay whole."""

from __future__ import annotations

from ownloop.store.queries import RunFigures
from ownloop.view.charts import run_charts


def _axis(sessions: int) -> list[str]:
    figures = RunFigures(steps=[("pass", 2, sessions)], per_step=[], operations=[], errors=[])
    chart = next(c for c in run_charts([("t1", 1, 1)], figures) if c.key == "steps")
    return [tick.text for tick in chart.ticks if tick.anchor == "end"]


def test_a_count_axis_up_to_one_has_distinct_true_labels() -> None:
    assert _axis(1) == ["0", "0.5", "1"]


def test_whole_counts_keep_whole_labels() -> None:
    assert _axis(2) == ["0", "1", "2"]
    assert _axis(9) == ["0", "5", "10"]
    assert _axis(4) == ["0", "2.5", "5"]  # the middle of 5 is 2.5, where the tick stands
