"""What a run's page and the compare grid show: task rates, scored units, the charts' figures,
the run's row, its seal and its judges' verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from ownloop.store.queries.listing import Query, run_row_query

if TYPE_CHECKING:
    from ownloop.store import Store
    from ownloop.store.query import QueryResult

__all__ = [
    "Citation",
    "RunFigures",
    "RunOverview",
    "RunUnits",
    "run_citation",
    "run_figures",
    "run_judge_verdicts",
    "run_overview",
    "run_units_sessions",
    "task_rates",
]


def _rates_query(run_ids: Sequence[str]) -> Query:
    return (
        "select run_id, task_id, count(*), count(*) filter (where scores_as) from unit_outcomes "
        "where scores_as is not null and list_contains($runs, run_id) group by run_id, task_id "
        "order by task_id, run_id",
        {"runs": list(run_ids)},
    )


def _rates(result: QueryResult) -> list[tuple[str, str, int, int]]:
    return [(str(r), str(t), int(n), int(p)) for r, t, n, p in result.rows]


def task_rates(store: Store, run_ids: Sequence[str]) -> list[tuple[str, str, int, int]]:
    """(run id, task id, scored units, passes) of these runs' scored units (an errored unit
    counts as a failed one, see ``unit_outcomes``)."""
    return _rates(store.sql(*_rates_query(run_ids)))


class RunUnits(NamedTuple):
    """Runs' scored units, (run id, task id, repeat, session id, passed) each (an errored unit
    failed, its session id "" when it has none), and the runs in the order they started (their
    first session)."""

    units: list[tuple[str, str, int, str, bool]]
    runs: list[str]


def run_units_sessions(store: Store, run_ids: Sequence[str]) -> RunUnits:
    """The graded scored units of these runs, over one connection."""
    runs = {"runs": list(run_ids)}
    units, order = store.sql_many(
        [
            (
                # errored units count as failed ones, as in compare (session '' when none)
                "select run_id, task_id, repeat, coalesce(session_id, ''), scores_as "
                "from unit_outcomes where scores_as is not null and list_contains($runs, run_id) "
                "order by task_id, run_id, repeat",
                runs,
            ),
            (
                "select run_id from sessions where list_contains($runs, run_id) group by run_id "
                "order by min(started_at), run_id",
                runs,
            ),
        ]
    )
    return RunUnits(
        [(str(r), str(t), int(k), str(s), bool(p)) for r, t, k, s, p in units.rows],
        [str(r) for (r,) in order.rows],
    )


class RunFigures(NamedTuple):
    """What a run's charts draw, each a list of rows."""

    steps: list[tuple[str, int, int]]  # (outcome: pass, fail or ungraded; steps; sessions)
    per_step: list[tuple[int, float, float, float, int]]  # (step, mean latency ms, mean tokens
    # in, mean tokens out, calls)
    operations: list[tuple[str, int, float, float, float]]  # (op, count, median, p90, max ms)
    errors: list[tuple[str, int]]  # (kind, e.g. "session timeout" or "parse error"; count)


def _figures_query(run_id: str) -> Query:
    # The run's own sessions read once (the sessions view is not cached between its uses).
    own = "(select session_id from s)"
    return (
        "with s as materialized (select session_id, passed, steps, status from sessions "
        "where run_id = $run and parent_session_id is null) "
        "select 'steps', case when passed then 'pass' when not passed then 'fail' "
        "else 'ungraded' end, steps, count(*), null, null, null from s "
        "where steps is not null group by all "
        "union all "
        "select 'call', null, step, avg(latency_ms), avg(prompt_tokens), avg(completion_tokens), "
        f"count(*) from model_called where session_id in {own} group by step "
        "union all "
        "select 'op', op ->> 'op', count(*), median(duration_ms), quantile_cont(duration_ms, 0.9), "
        f"max(duration_ms), null from browser_acted where session_id in {own} group by all "
        "union all "
        "select 'error', 'session ' || status, null, count(*), null, null, null from s "
        "where status is not null and status <> 'finished' group by status "
        "union all "
        "select 'error', 'parse error', null, count(*), null, null, null from action_parsed "
        f"where error is not null and session_id in {own} "
        "union all "
        "select 'error', 'operation failed', null, count(*), null, null, null from browser_acted "
        f"where not ok and session_id in {own} "
        "union all "
        "select 'error', 'model call error', null, count(*), null, null, null from model_called "
        f"where error is not null and session_id in {own}",
        {"run": run_id},
    )


def _figures(result: QueryResult) -> RunFigures:
    figures = RunFigures([], [], [], [])
    for kind, name, a, b, c, d, e in result.rows:
        if kind == "steps":
            figures.steps.append((str(name), int(a), int(b)))
        elif kind == "call":
            figures.per_step.append((int(a), float(b or 0), float(c or 0), float(d or 0), int(e)))
        elif kind == "op":
            figures.operations.append(
                (str(name), int(a), float(b or 0), float(c or 0), float(d or 0))
            )
        elif kind == "error" and int(b):
            figures.errors.append((str(name), int(b)))
    figures.steps.sort(key=lambda row: (row[0], row[1]))
    figures.per_step.sort()
    figures.operations.sort(key=lambda row: -row[1])
    figures.errors.sort(key=lambda row: -row[1])
    return figures


def run_figures(store: Store, run_id: str) -> RunFigures:
    """The figures of ``run_id``'s own sessions (replays left out), one query."""
    return _figures(store.sql(*_figures_query(run_id)))


class RunOverview(NamedTuple):
    """A run's row of ``run_page`` (None: no such run), its task rates and figures."""

    row: dict[str, Any] | None
    rates: list[tuple[str, str, int, int]]
    figures: RunFigures


def run_overview(store: Store, run_id: str) -> RunOverview:
    """What the run's page shows, over one connection."""
    row, rates, figures = store.sql_many(
        [
            run_row_query(run_id),
            _rates_query([run_id]),
            _figures_query(run_id),
        ]
    )
    found = dict(zip(row.columns, row.rows[0], strict=True)) if row.rows else None
    return RunOverview(found, _rates(rates), _figures(figures))


class Citation(NamedTuple):
    """What a sealed run's page gives to cite it."""

    fingerprint: str
    sealed_at: datetime
    ownloop_version: str  # the ownloop that recorded the run (its first RunStarted)
    git_commit: str


def run_citation(store: Store, run_id: str) -> Citation | None:
    """The seal and versions of ``run_id``, or None when it is not sealed."""
    rows = store.sql(
        "select s.fingerprint, s.time, coalesce(r.versions ->> 'ownloop', ''), "
        "coalesce(r.versions ->> 'git_commit', '') from run_sealed s "
        "left join (select run_id, arg_min(versions, time) as versions from run_started "
        "group by run_id) r using (run_id) where s.run_id = $run order by s.time limit 1",
        {"run": run_id},
    ).rows
    return Citation(*rows[0]) if rows else None


def run_judge_verdicts(
    store: Store, run_id: str
) -> list[tuple[str, str, str | None, int | None, bool, bool | None]]:
    """Every model judge's verdict on the run's sessions, oldest first: (judge, session id,
    control, repeat, passed, the session's rule grade ``passed``)."""
    return [
        (str(j), str(s), c, r, bool(p), rule)
        for j, s, c, r, p, rule in store.sql(
            "select j.judge, j.session_id, j.control, j.repeat, j.passed, s.passed "
            "from judge_grades j left join sessions s using (session_id) "
            "where j.run_id = $run order by j.judged_at, j.session_id",
            {"run": run_id},
        ).rows
    ]
