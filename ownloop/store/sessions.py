"""The listing behind ``ownloop sessions``: the ``sessions`` view, filtered, newest first."""

from __future__ import annotations

from ownloop.store import Store
from ownloop.store.query import QueryResult

__all__ = ["budget_notes", "sessions_table"]

_COLUMNS = (
    "session_id, task_id, agent, attempt, status, steps, round(seconds, 1) as seconds, "
    "passed, score, answer, f.reason"
)
# --passed yes / no: the grade; --failed: a failed grade, or an end no grade follows
# (endpoint_error, error, crashed, ... : any status outside the scored ones of scored_units)
_PASSED = {
    "yes": "passed",
    "no": "not passed",
    "failed": "(not passed or (passed is null and status is not null and status not in "
    "('finished', 'call_user', 'fail', 'max_steps', 'timeout', 'parse_error', 'no_action')))",
}


def sessions_table(
    store: Store,
    *,
    run_id: str | None = None,
    status: str | None = None,
    limit: int = 50,
    passed: str | None = None,
) -> QueryResult:
    """Sessions of ``run_id`` (all runs if None) with ``status`` (any if None), newest first,
    each with the reason it failed (``failure_reasons``). ``passed``: "yes", "no" (graded
    failures) or "failed" (those and the sessions that ended with an error).

    Raises:
        OwnloopError: ``run_id`` names no run of the store.
    """
    from ownloop.store.queries.runs import require_run

    where = []
    params: dict[str, str] = {}
    if run_id:
        require_run(store, run_id)
        where.append("run_id = $run")
        params["run"] = run_id
    if status:
        where.append("status = $status")
        params["status"] = status
    if passed:
        where.append(_PASSED[passed])
    clause = f"where {' and '.join(where)} " if where else ""
    columns = _COLUMNS if run_id else "run_id, " + _COLUMNS
    return store.sql(
        f"select {columns} from sessions left join failure_reasons f using (session_id) "
        f"{clause}order by started_at desc limit {int(limit)}",
        params or None,
    )


def budget_notes(store: Store, run_id: str | None = None) -> list[str]:
    """A line for each run (``run_id``, or every run) whose sessions mixed step budgets."""
    from ownloop.store.ledger import mixed_budget_lines

    return mixed_budget_lines(store, run_id)
