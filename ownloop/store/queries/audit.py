"""The blind-replay audit's queries: which sessions to replay blind, which were, and the
``blind_audit`` view's rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ownloop.store import Store
    from ownloop.store.query import QueryResult

__all__ = ["blind_audit_rows", "blind_replayed", "passing_sessions"]


def passing_sessions(store: Store, run_id: str) -> list[tuple[str, str]]:
    """(task id, session id) of each task of the run with a passing scored unit: the passing
    unit of the lowest repeat."""
    return [
        (str(t), str(s))
        for t, s in store.sql(
            "select task_id, arg_min(session_id, repeat) from scored_units "
            "where run_id = $run and passed group by task_id order by task_id",
            {"run": run_id},
        ).rows
    ]


def blind_replayed(store: Store, run_id: str) -> set[tuple[str, int | None]]:
    """(parent session id, seed) of the run's graded blind replays (view ``blind_replays``);
    seed None for a desktop task's (it has no seeds)."""
    return {
        (str(p), None if s is None else int(s))
        for p, s in store.sql(
            "select parent_session_id, seed from blind_replays "
            "where run_id = $run and passed is not null",
            {"run": run_id},
        ).rows
    }


def blind_audit_rows(store: Store, run_id: str) -> QueryResult:
    """The run's rows of the ``blind_audit`` view, by task."""
    return store.sql(
        "select task_id, replays, passes, blind_pass_rate, non_discriminative "
        "from blind_audit where run_id = $run order by task_id",
        {"run": run_id},
    )
