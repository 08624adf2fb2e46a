"""The viewer's tables of sessions and runs: a page sorted and cut in SQL, its row count and the
values its filters offer, over one connection.

A column is asked for by its name in a fixed list (``SESSION_COLUMNS``, ``RUN_COLUMNS``), the
only sort keys accepted; filter values are bound parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

if TYPE_CHECKING:
    from ownloop.store import Store
    from ownloop.store.query import QueryResult

__all__ = [
    "RUN_COLUMNS",
    "SESSION_CHOICES",
    "SESSION_COLUMNS",
    "Listed",
    "Page",
    "Query",
    "run_choices",
    "run_listing",
    "run_page",
    "run_row_query",
    "session_choices",
    "session_choices_of",
    "session_listing",
]

Query = tuple[str, dict[str, Any]]
"""A query's SQL text and the values bound to its ``$name`` placeholders."""


class Page(msgspec.Struct, frozen=True):
    """Which rows of a table: sorted by the column named ``sort`` (nulls last), ``limit`` rows
    from row ``offset``."""

    sort: str
    descending: bool
    limit: int
    offset: int


# Column name -> SQL expression; the names are the only sort keys accepted.
_SESSION_COLUMNS: dict[str, str] = {
    "session_id": "session_id",
    "run_id": "run_id",
    "task_id": "task_id",
    "agent": "agent",
    "model": "model",
    "attempt": "attempt",
    "repeat": "repeat",
    "status": "status",
    "passed": "passed",
    "score": "score",
    "steps": "steps",
    "seconds": "round(seconds, 1)",
    "started_at": "started_at",
    "replay_of": "parent_session_id",
    "answer": "answer",
    # the grader's first failed check, or the error (see the view failure_reasons)
    "reason": "(select f.reason from failure_reasons f where f.session_id = sessions.session_id)",
}
_RUN_COLUMNS: dict[str, str] = {
    "run_id": "i.run_id",
    "agent": "coalesce(r.agent, p.agent)",
    "model": "coalesce(r.model, p.model)",
    "suite": "r.suite",
    "started_at": "coalesce(r.started_at, p.started_at)",
    "ended_at": "r.ended_at",
    "starts": "coalesce(r.starts, 0)",
    "sessions": "coalesce(p.sessions, 0)",
    "passed": "coalesce(p.passed, 0)",
    "counts": "r.counts",
    "tasks": "coalesce(p.tasks, 0)",
    "repeats": "coalesce(p.repeats, 1)",
    "replays": "coalesce(p.replays, 0)",
    "imported": "coalesce(starts_with(r.suite, 'import:'), false)",
    "score": "u.score",
    "errored": "coalesce(u.errored, 0)",
    "ci_low": "u.ci_low",
    "ci_high": "u.ci_high",
    "boot_low": "b.ci_low",
    "boot_high": "b.ci_high",
    "flip_rate": "case when p.repeats > 1 then u.flip_rate end",
    "sealed": "sl.run_id is not null",
    "budget": "r.budget",
    "statuses": "p.statuses",
}
SESSION_COLUMNS: tuple[str, ...] = tuple(_SESSION_COLUMNS)
"""The columns of ``session_listing``'s page: the only sort keys it accepts."""
RUN_COLUMNS: tuple[str, ...] = tuple(_RUN_COLUMNS)
"""The columns of ``run_page``: the only sort keys it accepts."""

# Runs with a RunStarted, and runs known only from their sessions (e.g. imported ones). The
# scores are run_scores' and flip_rates' (the same formulas over unit_outcomes), computed here
# from one read of unit_outcomes: those views each read the sessions view again, and on a store
# of 10k sessions every read of it costs about 0.1 s.
_RUNS_FROM = (
    "(select run_id from run_started union select run_id from session_started) i "
    "left join runs r on r.run_id = i.run_id "
    # a run's own sessions; its replays (parent_session_id set) are counted apart
    "left join (select run_id, count(*) filter (where parent_session_id is null) as sessions, "
    "count(*) filter (where passed and parent_session_id is null) as passed, "
    "count(*) filter (where parent_session_id is not null) as replays, "
    "count(distinct task_id) filter (where parent_session_id is null) as tasks, "
    "max(repeat) as repeats, "
    "cast(to_json(histogram(coalesce(status, 'no end yet')) "
    "filter (where parent_session_id is null)) as varchar) as statuses, "
    "min(agent) as agent, min(model) as model, min(started_at) as started_at "
    "from sessions group by run_id) p on p.run_id = i.run_id "
    "left join (select run_id, n, errored, passes / n as score, "
    "case when passes = 0 then 0.0 else greatest(0.0, centre - half) end as ci_low, "
    "case when passes = n then 1.0 else least(1.0, centre + half) end as ci_high, "
    "flipped / tasks as flip_rate from (select *, "
    "(passes / n + z * z / (2 * n)) / (1 + z * z / n) as centre, "
    "z / (1 + z * z / n) * sqrt(passes / n * (1 - passes / n) / n + z * z / (4 * n * n)) "
    "as half from (select run_id, sum(n) as n, sum(passes) as passes, count(*) as tasks, "
    "count(*) filter (where graded_passes > 0 and graded_passes < graded) as flipped, "
    "sum(errored) as errored, 1.959963984540054 as z "
    "from (select run_id, task_id, count(*) as n, count(*) filter (where scores_as) as passes, "
    "count(*) filter (where errored) as errored, count(*) filter (where not errored) as graded, "
    "count(*) filter (where passed) as graded_passes "
    "from unit_outcomes where scores_as is not null group by run_id, task_id) "
    "group by run_id))) u "
    "on u.run_id = i.run_id "
    "left join score_bootstraps b on b.run_id = i.run_id "
    "left join (select distinct run_id from run_sealed) sl on sl.run_id = i.run_id"
)
# The runs with only what the filters and the count need (the scores are the costly part).
_RUNS_COUNTED = (
    "(select run_id from run_started union select run_id from session_started) i "
    "left join runs r on r.run_id = i.run_id left join (select run_id, min(agent) as agent, "
    "min(model) as model from sessions group by run_id) p on p.run_id = i.run_id"
)
_SESSION_EQUALS = {"run": "run_id", "agent": "agent", "model": "model", "status": "status"}
_RUN_EQUALS = {"agent": _RUN_COLUMNS["agent"], "model": _RUN_COLUMNS["model"]}
_PASSED = {"yes": "passed", "no": "not passed", "ungraded": "passed is null"}


def _choices_query(source: str, columns: Mapping[str, str]) -> Query:
    # One query for every filter's values, the source read once (a view is not cached).
    picked = ", ".join(
        f"cast({column} as varchar) as c{n}" for n, column in enumerate(columns.values())
    )
    union = " union all ".join(
        f"select distinct {n} as f, c{n} as v from c" for n in range(len(columns))
    )
    return (
        f"with c as materialized (select {picked} from {source}) {union} order by f, v nulls first",
        {},
    )


# The values of the sessions' run, agent, model and status from the event tables, without the
# sessions view's per-session windows (ten times faster on a big store). It can list a value
# no session shows any more (the agent of a session's second SessionStarted, the status of an
# end that a later end replaced): choosing it finds no session, which is true.
SESSION_CHOICES: Query = (
    "with r as (select run_id, arg_min(agent, time) as agent, arg_min(model, time) as model "
    "from run_started group by run_id), "
    "st as (select st.run_id, coalesce(nullif(st.agent, ''), r.agent, '') as agent, "
    "coalesce(nullif(st.model, ''), r.model, '') as model from session_started st "
    "left join r using (run_id)) "
    "select distinct 0 as f, run_id as v from st union all "
    "select distinct 1, agent from st union all "
    "select distinct 2, model from st union all "
    "select distinct 3, status from session_ended union all "
    "select distinct 3, null from session_started s "
    "anti join session_ended e using (session_id) "
    "order by f, v nulls first",
    {},
)
"""The values of the sessions' ``run``, ``agent``, ``model`` and ``status`` (None first), read
by ``session_choices_of``."""


class _Table(NamedTuple):
    """One of the viewer's tables: its columns (name -> SQL expression), where its rows come
    from, the order among equal sort keys, what its count reads, its filters by equality (name
    -> SQL expression) and the query of their values."""

    columns: Mapping[str, str]
    source: str
    tiebreak: str
    counted: str
    equals: Mapping[str, str]
    choices: Query


_SESSIONS = _Table(
    _SESSION_COLUMNS, "sessions", "session_id", "sessions", _SESSION_EQUALS, SESSION_CHOICES
)
_RUNS = _Table(
    _RUN_COLUMNS,
    _RUNS_FROM,
    "i.run_id",
    _RUNS_COUNTED,
    _RUN_EQUALS,
    _choices_query(_RUNS_COUNTED, _RUN_EQUALS),
)


class _Where(NamedTuple):
    """A table's filters as SQL conditions (joined by ``and``) and the values they bind."""

    conditions: list[str]
    params: dict[str, Any]


def _equals(table: _Table, filters: Mapping[str, str | None]) -> _Where:
    where = _Where([], {})
    for number, (name, column) in enumerate(table.equals.items()):
        if name not in filters:
            continue
        value = filters[name]
        if value is None:
            where.conditions.append(f"{column} is null")
        else:
            where.conditions.append(f"{column} = $v{number}")
            where.params[f"v{number}"] = value
    return where


def _session_where(filters: Mapping[str, str | None]) -> _Where:
    where = _equals(_SESSIONS, filters)
    passed = filters.get("passed")
    if passed in _PASSED:
        where.conditions.append(_PASSED[passed])
    if filters.get("task"):
        where.conditions.append("contains(lower(task_id), $task)")
        where.params["task"] = str(filters["task"]).lower()
    return where


def _run_where(filters: Mapping[str, str | None]) -> _Where:
    where = _equals(_RUNS, filters)
    if filters.get("run"):
        where.conditions.append("i.run_id = $run")
        where.params["run"] = filters["run"]
    return where


def _clause(where: _Where) -> str:
    return f" where {' and '.join(where.conditions)}" if where.conditions else ""


def _page_query(table: _Table, where: _Where, page: Page) -> Query:
    """The page's query: sorted and cut in SQL, so that only the page's rows are kept (a
    top-N, not a sort of every row)."""
    select = ", ".join(f"{expr} as {name}" for name, expr in table.columns.items())
    direction = "desc" if page.descending else "asc"
    return (
        f"select {select} from {table.source}{_clause(where)} order by "
        f"{table.columns[page.sort]} {direction} nulls last, {table.tiebreak} "
        "limit $limit offset $offset",
        {**where.params, "limit": int(page.limit), "offset": int(page.offset)},
    )


def _choices_of(result: QueryResult, table: _Table) -> dict[str, list[str | None]]:
    names = list(table.equals)
    choices: dict[str, list[str | None]] = {name: [] for name in names}
    for number, value in result.rows:
        choices[names[number]].append(value)
    return choices


class Listed(NamedTuple):
    """A page of a table, how many rows it has over all pages, and its filters' values."""

    page: QueryResult
    total: int
    choices: dict[str, list[str | None]]


def _listing(store: Store, table: _Table, where: _Where, page: Page) -> Listed:
    """A page with its total and the filters' values, over one connection. The total is a
    count of its own: a window over the page's query would keep and sort every row, not only
    the page's."""
    found, counted, values = store.sql_many(
        [
            _page_query(table, where, page),
            (f"select count(*) from {table.counted}{_clause(where)}", where.params),
            table.choices,
        ]
    )
    return Listed(found, int(counted.rows[0][0]), _choices_of(values, table))


def session_listing(store: Store, filters: Mapping[str, str | None], page: Page) -> Listed:
    """A page of every session with the columns ``SESSION_COLUMNS``, its row count and
    ``session_choices``, over one connection; ``filters``: ``run``, ``agent``, ``model``,
    ``status`` (equal; None: no value), ``passed`` (yes, no or ungraded), ``task`` (part of the
    task id, any case)."""
    return _listing(store, _SESSIONS, _session_where(filters), page)


def run_listing(store: Store, filters: Mapping[str, str | None], page: Page) -> Listed:
    """``run_page`` with ``filters`` (``agent``, ``model``), its row count and
    ``run_choices``, over one connection: the page is sorted and cut in SQL."""
    return _listing(store, _RUNS, _run_where(filters), page)


def run_page(store: Store, filters: Mapping[str, str | None], page: Page) -> QueryResult:
    """Rows of every run (with a ``RunStarted`` or only sessions) with the columns
    ``RUN_COLUMNS``; ``filters``: ``agent`` and ``model`` (equal; None: no value), ``run``
    (one run's row)."""
    return store.sql(*_page_query(_RUNS, _run_where(filters), page))


def run_row_query(run_id: str) -> Query:
    """The query of ``run_page``'s row of ``run_id`` (no row: no such run)."""
    return _page_query(_RUNS, _run_where({"run": run_id}), Page("run_id", False, 1, 0))


def session_choices_of(result: QueryResult) -> dict[str, list[str | None]]:
    """The result of ``SESSION_CHOICES`` by filter, as ``session_choices`` gives it."""
    return _choices_of(result, _SESSIONS)


def session_choices(store: Store) -> dict[str, list[str | None]]:
    """The values of ``run``, ``agent``, ``model`` and ``status`` sessions have (None first)."""
    return session_choices_of(store.sql(*SESSION_CHOICES))


def run_choices(store: Store) -> dict[str, list[str | None]]:
    """The values of ``agent`` and ``model`` runs have (None first)."""
    return _choices_of(store.sql(*_RUNS.choices), _RUNS)
