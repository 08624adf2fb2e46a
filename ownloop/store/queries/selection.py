"""Which sessions a command picks (a run, a task, the user's ``where``), and where their events
are in the journal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ownloop.store.queries.user import user_condition

if TYPE_CHECKING:
    import pyarrow as pa

    from ownloop.store import Store

__all__ = [
    "EVERY_SESSION",
    "Selection",
    "journal_places",
    "selected_sessions",
    "session_places",
]


class Selection(NamedTuple):
    """Which sessions: all of run, task and ``where`` that are given (everything if none).

    ``where`` is the user's SQL condition over the ``sessions`` view, e.g. ``status = 'fail'``;
    it passes through ``user_condition``.
    """

    run_id: str | None = None
    task_id: str | None = None
    where: str | None = None
    session_ids: tuple[str, ...] = ()  # only these sessions (a batch of an export), when given


EVERY_SESSION = Selection()


def _selection_condition(selection: Selection) -> tuple[str, dict[str, Any]]:
    """The SQL condition over the ``sessions`` view for ``selection``, and its parameters."""
    conditions = ["true"]
    params: dict[str, Any] = {}
    if selection.run_id:
        conditions.append("run_id = $run")
        params["run"] = selection.run_id
    if selection.task_id:
        conditions.append("task_id = $task")
        params["task"] = selection.task_id
    if selection.session_ids:
        conditions.append("list_contains($ids, session_id)")
        params["ids"] = list(selection.session_ids)
    if selection.where and selection.where.strip():
        conditions.append(user_condition(selection.where))
    return " and ".join(conditions), params


def selected_sessions(store: Store, selection: Selection) -> list[tuple[str, str]]:
    """(session id, agent) of every session ``selection`` picks, oldest first.

    Raises:
        QueryError: ``selection.where`` is not valid SQL over the ``sessions`` view.
    """
    condition, params = _selection_condition(selection)
    rows = store.sql(
        f"select session_id, agent from sessions where {condition} order by started_at, session_id",
        params or None,
    ).rows
    return [(str(session_id), str(agent or "")) for session_id, agent in rows]


def journal_places(
    store: Store, selection: Selection = EVERY_SESSION, kinds: Sequence[str] | None = None
) -> pa.Table:
    """Where the selected sessions' events are: columns ``stream``, ``byte_offset`` and
    ``byte_length``, in the order the events happened.

    Args:
        store: the store.
        selection: the sessions.
        kinds: only events of these kinds (table names, e.g. ``session_ended``); all if None.

    Raises:
        QueryError: ``selection.where`` is not valid SQL over the ``sessions`` view.
    """
    condition, params = _selection_condition(selection)
    kind_filter = ""
    if kinds:
        kind_filter = " and list_contains($kinds, kind)"
        params["kinds"] = list(kinds)
    return store.sql_arrow(
        "select stream, byte_offset, byte_length from journal where session_id in "
        f"(select session_id from sessions where {condition}){kind_filter} "
        "order by time, stream, seq",
        params or None,
    )


def session_places(store: Store, session_ids: Sequence[str]) -> pa.Table:
    """Where the events of the sessions ``session_ids`` are: columns ``session_id``, ``stream``,
    ``byte_offset`` and ``byte_length``, in the order the events happened (the journal only, no
    view: an exporter asks this for a thousand sessions at a time)."""
    return store.sql_arrow(
        "select session_id, stream, byte_offset, byte_length from journal "
        "where session_id in (select unnest($ids)) order by time, stream, seq",
        {"ids": list(session_ids)},
    )
