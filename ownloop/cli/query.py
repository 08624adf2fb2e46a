"""Asking the store: sql, sessions."""

from __future__ import annotations

from typing import get_args

import click

from ownloop.cli.common import (
    echo_lines,
    friendly,
    max_rows_option,
    print_rows,
    reading,
    rows_format_option,
    run_option,
    store_of,
    table_rows,
)
from ownloop.store.events import Status

__all__ = ["COMMANDS", "sessions", "sql"]


@click.command()
@click.argument("query")
@rows_format_option()
@max_rows_option
@click.pass_context
@friendly
def sql(ctx: click.Context, query: str, fmt: str, max_rows: int | None) -> None:
    """Bring the index up to date, then run a read-only QUERY (DuckDB SQL).

    Example: ownloop sql "select status, count(*), avg(score) from recorded group by all"
    """
    from ownloop.store.queries import user_query

    # A table fetches only the rows it shows (the others are counted, not converted).
    first = table_rows(max_rows) if fmt == "table" else None
    print_rows(user_query(store_of(ctx, create=False), query, first), fmt, max_rows)


@click.command()
@run_option("Only this run.")
@click.option(
    "--status",
    type=click.Choice(get_args(Status)),
    metavar="STATUS",
    help=f"Only sessions with this status: {', '.join(get_args(Status))}.",
)
@click.option(
    "--passed",
    type=click.Choice(["yes", "no"]),
    help="Only sessions whose latest grade passed (yes) or failed (no).",
)
@click.option(
    "--failed",
    is_flag=True,
    help="Only sessions that did not pass: a failed grade, or an end with an error.",
)
@click.option("--limit", default=50)
@rows_format_option()
@max_rows_option
@click.pass_context
@friendly
def sessions(
    ctx: click.Context,
    run_id: str | None,
    status: str | None,
    passed: str | None,
    failed: bool,
    limit: int,
    fmt: str,
    max_rows: int | None,
) -> None:
    """List sessions, newest first, each failed one with its reason (the grader's failed check
    or the error). Example: ownloop sessions --run demo --failed"""
    from ownloop.store.scores import score_line
    from ownloop.store.sessions import budget_notes, sessions_table

    if failed and passed:
        raise click.UsageError("give --failed or --passed, not both")
    with reading(ctx) as store:
        rows = sessions_table(
            store, run_id=run_id, status=status, limit=limit, passed="failed" if failed else passed
        )
        notes = budget_notes(store, run_id)
        if run_id and fmt == "table":  # how the run did, errors counted as the scores count them
            notes = [
                f"run {run_id}: {line}" for line in [score_line(store, run_id)] if line
            ] + notes
    print_rows(rows, fmt, max_rows)
    if notes:  # on stderr when the rows are CSV or JSON, which a note would corrupt
        echo_lines(notes, err=fmt != "table")


COMMANDS = (sql, sessions)
