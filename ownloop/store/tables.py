"""The queries behind the Python API (``ownloop.open_store``), as Arrow tables.

``user_table`` is the notebook's door for the user's own read-only SQL, as ``user_query`` is the
CLI's; ``sessions_table_where`` filters the ``sessions`` view by column values, which are always
bound parameters (a column name is checked against the view's columns before it is quoted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ownloop.errors import OwnloopError

if TYPE_CHECKING:
    import pyarrow as pa

    from ownloop.store import Store

__all__ = ["sessions_columns", "sessions_table_where", "user_table"]

# Short names a notebook user reaches for first, e.g. sessions(run="r1", task="click-button-7").
_ALIASES = {
    "run": "run_id",
    "task": "task_id",
    "session": "session_id",
    "parent": "parent_session_id",
}


def user_table(
    store: Store, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None
) -> pa.Table:
    """The user's own read-only query, run as typed, with ``params`` bound to its placeholders.

    Raises:
        QueryError: it would change something, or DuckDB rejected it.
    """
    return store.sql_arrow(query, params)


def sessions_columns(store: Store) -> list[str]:
    """The columns of the ``sessions`` view, in order."""
    return [row[0] for row in store.sql("describe sessions").rows]


def sessions_table_where(
    store: Store, filters: Mapping[str, Any], limit: int | None = None
) -> pa.Table:
    """Rows of the ``sessions`` view, newest first, whose columns equal ``filters``.

    Args:
        filters: column name (or ``run``, ``task``, ``session``, ``parent``) → value; None means
            no value (SQL ``is null``), a list, tuple or set means any of its values.
        limit: at most this many rows (all when None).

    Raises:
        OwnloopError: a name is not a column of the view (the message lists them).
    """
    columns = sessions_columns(store)
    where: list[str] = []
    params: dict[str, Any] = {}
    for number, (name, value) in enumerate(filters.items()):
        column = _ALIASES.get(name, name)
        if column not in columns:
            raise OwnloopError(
                f"sessions has no column {name!r}. Filter on one of: "
                f"{', '.join(columns)} (or run, task, session, parent)"
            )
        quoted = '"' + column + '"'  # a checked name of the view, never user text
        if value is None:
            where.append(f"{quoted} is null")
        elif isinstance(value, list | tuple | set | frozenset):
            where.append(f"list_contains($v{number}, {quoted})")
            params[f"v{number}"] = list(value)
        else:
            where.append(f"{quoted} = $v{number}")
            params[f"v{number}"] = value
    clause = f" where {' and '.join(where)}" if where else ""
    tail = " limit $limit" if limit is not None else ""
    if limit is not None:
        params["limit"] = int(limit)
    return store.sql_arrow(
        f"select * from sessions{clause} order by started_at desc nulls last, session_id{tail}",
        params or None,
    )
