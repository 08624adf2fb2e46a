"""The runs and sessions tables of the viewer: filters and sorting from query parameters.

Query parameters are user text. Filter values only ever reach SQL as quoted string literals, and a
sort column only by its name in a fixed list (an unknown one falls back to the default), so no
parameter can change a query's shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ownloop.store import Store, sql_literal

__all__ = [
    "PAGE_SIZE",
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "Listing",
    "list_runs",
    "list_sessions",
]

PAGE_SIZE = 200

# Column name -> SQL expression; the names are the only sort keys accepted.
SESSION_COLUMNS: dict[str, str] = {
    "session_id": "session_id",
    "run_id": "run_id",
    "task_id": "task_id",
    "agent": "agent",
    "model": "model",
    "attempt": "attempt",
    "status": "status",
    "passed": "passed",
    "score": "score",
    "steps": "steps",
    "seconds": "round(seconds, 1)",
    "started_at": "started_at",
    "replay_of": "parent_session_id",
    "answer": "answer",
}
RUN_COLUMNS: dict[str, str] = {
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
}
# Runs with a RunStarted, and runs known only from their sessions (e.g. imported ones).
_RUNS_FROM = (
    "(select run_id from runs union select run_id from sessions) i "
    "left join runs r on r.run_id = i.run_id "
    "left join (select run_id, count(*) as sessions, count(*) filter (where passed) as passed, "
    "min(agent) as agent, min(model) as model, min(started_at) as started_at "
    "from sessions group by run_id) p on p.run_id = i.run_id")
_SESSION_FILTERS = ("run", "agent", "model", "status", "passed", "task")
_RUN_FILTERS = ("agent", "model")


class Listing(NamedTuple):
    """A table to show: its columns, rows, the filters and sort in force, and filter choices."""

    columns: list[str]
    rows: list[dict[str, Any]]
    filters: dict[str, str]
    sort: str
    descending: bool
    choices: dict[str, list[str]]
    page: int
    more: bool


def _filters(params: Mapping[str, str], names: Sequence[str]) -> dict[str, str]:
    return {name: params[name].strip() for name in names if params.get(name, "").strip()}


def _order(params: Mapping[str, str], columns: Mapping[str, str], default: str) -> tuple[str, bool]:
    sort = params.get("sort", default)
    if sort not in columns:
        sort = default
    return sort, params.get("dir", "desc" if sort == default else "asc") != "asc"


def _page(params: Mapping[str, str]) -> int:
    text = params.get("page", "1")
    return max(1, int(text)) if text.isdigit() and len(text) < 7 else 1


def _equals(column: str, value: str) -> str:
    return f"{column} is null" if value == "(none)" else f"{column} = {sql_literal(value)}"


def _session_conditions(filters: Mapping[str, str]) -> list[str]:
    where = []
    for name, column in (("run", "run_id"), ("agent", "agent"), ("model", "model"),
                         ("status", "status")):
        if name in filters:
            where.append(_equals(column, filters[name]))
    passed = filters.get("passed")
    if passed == "yes":
        where.append("passed")
    elif passed == "no":
        where.append("not passed")
    elif passed == "ungraded":
        where.append("passed is null")
    if "task" in filters:
        where.append(f"contains(lower(task_id), {sql_literal(filters['task'].lower())})")
    return where


def _choices(store: Store, table: str, columns: Mapping[str, str]) -> dict[str, list[str]]:
    # One query for every filter's values: each store.sql opens the index once.
    union = " union all ".join(
        f"select distinct {sql_literal(name)} as f, cast({column} as varchar) as v from {table}"
        for name, column in columns.items())
    choices: dict[str, list[str]] = {name: [] for name in columns}
    for name, value in store.sql(f"{union} order by f, v nulls first").rows:
        choices[name].append("(none)" if value is None else value)
    return choices


def list_sessions(store: Store, params: Mapping[str, str]) -> Listing:
    """The sessions table for the query parameters ``params``.

    Filters: ``run``, ``agent``, ``model``, ``status`` (exact; ``(none)`` for a session with no
    end yet), ``passed`` (yes, no or ungraded), ``task`` (part of the task id, any case).
    Sorting: ``sort`` (a name of ``SESSION_COLUMNS``) and ``dir`` (asc or desc); ``page`` from 1.
    """
    filters = _filters(params, _SESSION_FILTERS)
    sort, descending = _order(params, SESSION_COLUMNS, "started_at")
    page = _page(params)
    where = _session_conditions(filters)
    clause = f" where {' and '.join(where)}" if where else ""
    direction = "desc" if descending else "asc"
    select = ", ".join(f"{expr} as {name}" for name, expr in SESSION_COLUMNS.items())
    result = store.sql(
        f"select {select} from sessions{clause} order by {SESSION_COLUMNS[sort]} {direction} "
        f"nulls last, session_id limit {PAGE_SIZE + 1} offset {(page - 1) * PAGE_SIZE}")
    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    choices = _choices(store, "sessions", {"run": "run_id", "agent": "agent", "model": "model",
                                           "status": "status"})
    choices["passed"] = ["yes", "no", "ungraded"]
    return Listing(list(SESSION_COLUMNS), rows[:PAGE_SIZE], filters, sort, descending, choices,
                   page, len(rows) > PAGE_SIZE)


def _counts_text(counts: Any) -> str:
    if not counts:
        return ""
    data = json.loads(counts) if isinstance(counts, str) else counts
    if not isinstance(data, dict):
        return str(data)
    return ", ".join(f"{count} {status}" for status, count in sorted(data.items()))


def list_runs(store: Store, params: Mapping[str, str]) -> Listing:
    """The runs table for the query parameters ``params``: filters ``agent`` and ``model``;
    ``sort`` (a name of ``RUN_COLUMNS``), ``dir`` and ``page`` as for sessions."""
    filters = _filters(params, _RUN_FILTERS)
    sort, descending = _order(params, RUN_COLUMNS, "started_at")
    page = _page(params)
    where = [_equals(RUN_COLUMNS[name], value) for name, value in filters.items()]
    clause = f" where {' and '.join(where)}" if where else ""
    direction = "desc" if descending else "asc"
    select = ", ".join(f"{expr} as {name}" for name, expr in RUN_COLUMNS.items())
    result = store.sql(
        f"select {select} from {_RUNS_FROM}{clause} "
        f"order by {RUN_COLUMNS[sort]} {direction} nulls last, i.run_id "
        f"limit {PAGE_SIZE + 1} offset {(page - 1) * PAGE_SIZE}")
    rows = []
    for row in result.rows:
        record = dict(zip(result.columns, row, strict=True))
        record["counts"] = _counts_text(record["counts"])
        rows.append(record)
    choices = _choices(store, _RUNS_FROM, {name: RUN_COLUMNS[name] for name in _RUN_FILTERS})
    return Listing(list(RUN_COLUMNS), rows[:PAGE_SIZE], filters, sort, descending, choices, page,
                   len(rows) > PAGE_SIZE)
