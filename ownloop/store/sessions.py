"""The listing behind ``ownloop sessions``: the ``sessions`` view, filtered, newest first."""

from __future__ import annotations

from ownloop.store import Store
from ownloop.store.query import QueryResult

__all__ = ["budget_notes", "sessions_table"]

_COLUMNS = (
    "session_id, task_id, agent, attempt, status, steps, round(seconds, 1) as seconds, "
    "passed, answer"
)


def sessions_table(
    store: Store, *, run_id: str | None = None, status: str | None = None, limit: int = 50
) -> QueryResult:
    """Sessions of ``run_id`` (all runs if None) with ``status`` (any if None), newest first.

    Raises:
        OwnloopError: ``run_id`` names no run of the store.
    """
    from ownloop.store.queries import require_run

    where = []
    params: dict[str, str] = {}
    if run_id:
        require_run(store, run_id)
        where.append("run_id = $run")
        params["run"] = run_id
    if status:
        where.append("status = $status")
        params["status"] = status
    clause = f"where {' and '.join(where)} " if where else ""
    columns = _COLUMNS if run_id else "run_id, " + _COLUMNS
    return store.sql(
        f"select {columns} from sessions {clause}order by started_at desc limit {int(limit)}",
        params or None,
    )


def budget_notes(store: Store, run_id: str | None = None) -> list[str]:
    """A line for each run (``run_id``, or every run) whose sessions mixed step budgets."""
    from ownloop.store.ledger import mixed_budget_lines

    return mixed_budget_lines(store, run_id)
