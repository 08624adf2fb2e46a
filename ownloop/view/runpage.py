"""One run's page: its row of the runs table, each task's outcomes with an interval, and charts."""

from __future__ import annotations

from typing import Any, NamedTuple

from ownloop.replay.agreement import JudgeReport, reports_of
from ownloop.scoring.stats import Interval, wilson
from ownloop.store import Store
from ownloop.store.queries import Citation, run_citation, run_judge_verdicts, run_overview
from ownloop.view.charts import Chart, run_charts
from ownloop.view.listing import counts_text

__all__ = ["RunView", "TaskRow", "build_run"]


class TaskRow(NamedTuple):
    task_id: str
    n: int
    passes: int
    interval: Interval  # Wilson's over the task's repeats

    @property
    def mixed(self) -> bool:
        return 0 < self.passes < self.n


class RunView(NamedTuple):
    run: dict[str, Any]
    tasks: list[TaskRow]
    charts: list[Chart]
    judges: list[JudgeReport] = []  # each model judge that judged the run (ownloop judge)
    citation: Citation | None = None  # a sealed run: what to cite


def build_run(store: Store, run_id: str) -> RunView | None:
    """The page of ``run_id``, or None when the store has no such run."""
    overview = run_overview(store, run_id)
    if overview.row is None:
        return None
    run = dict(overview.row)
    run["statuses"] = counts_text(run["statuses"])
    run["counts"] = counts_text(run["counts"])
    rates = [(task, n, passes) for _, task, n, passes in overview.rates]
    tasks = [TaskRow(task, n, passes, wilson(passes, n)) for task, n, passes in rates]
    tasks.sort(key=lambda t: (t.interval.estimate, t.task_id))
    judges = reports_of(run_judge_verdicts(store, run_id))
    citation = run_citation(store, run_id) if run.get("sealed") else None
    charts = run_charts(rates, overview.figures, run_id)
    return RunView(run, tasks, charts, judges, citation)
