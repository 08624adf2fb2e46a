"""The two doors through which SQL comes from the user by design, and the command a user types.

- ``user_query``: the whole read-only query of ``ownloop sql``, run as typed;
- ``user_condition``: a condition over the ``sessions`` view (``ownloop regrade --where``), checked
  with DuckDB's own tokenizer to be one parenthesised expression before it joins a query.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ownloop.store import Store
    from ownloop.store.query import QueryResult

__all__ = ["sql_command", "user_condition", "user_query"]


def user_query(store: Store, query: str, first: int | None = None) -> QueryResult:
    """The user's own read-only query (``ownloop sql QUERY``), run as typed; ``first``: fetch
    only the rows a table shows, and count the others (``QueryResult.total``).

    Raises:
        QueryError: it would change something, or DuckDB rejected it.
    """
    return store.sql(query, first=first)


def user_condition(condition: str) -> str:
    """The user's SQL condition over the ``sessions`` view, parenthesised to join a query.

    The condition is the user's SQL by design (e.g. ``status = 'fail'``). DuckDB's tokenizer
    checks that it is one expression: its parentheses balance (outside strings, quoted names and
    comments) and it has no ``;`` and no ``?``/``$name`` parameters, so it can neither close the
    parentheses around it nor take the values bound to the query it joins. A ``--`` comment ends
    at the line break added after it.

    Raises:
        QueryError: the condition is not one expression.
    """
    import duckdb

    from ownloop.store.query import QueryError, describe_error

    try:
        tokens = duckdb.tokenize(condition)
    except duckdb.Error as exc:
        raise QueryError(
            f"cannot read the condition {condition!r}: {describe_error(exc)}"
        ) from None
    depth = 0
    ends = [start for start, _ in tokens[1:]] + [len(condition)]
    for (start, kind), end in zip(tokens, ends, strict=True):
        if kind.name != "operator":
            continue
        for char in condition[start:end]:
            if char in ";?$":
                raise QueryError(
                    f"the condition {condition!r} has {char!r}: give one SQL condition over the "
                    "sessions view with values written in, e.g. status = 'fail'"
                )
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth < 0:
                break
        if depth < 0:
            break
    if depth != 0:
        raise QueryError(
            f"the parentheses of the condition {condition!r} do not balance: give one SQL "
            "condition over the sessions view, e.g. status = 'fail'"
        )
    return f"(\n{condition}\n)"


def sql_command(query: str, **values: str) -> str:
    """The ``ownloop sql "..."`` command a user can type to run ``query`` with ``values``.

    ``query`` is one of ours with ``$name`` placeholders; each is written as a quoted literal,
    e.g. ``sql_command("select * from sessions where run_id = $run", run="r1")``.
    """
    from ownloop.store.query import sql_literal

    text = re.sub(r"\$(\w+)", lambda m: sql_literal(values[m[1]]), query)
    return f'ownloop sql "{text}"'
