"""Choosing sessions from the store and rebuilding many of them at once.

A selection is a SQL condition over the ``sessions`` view. ``fold_selected`` asks the index where
the selected sessions' journal lines are (stream, byte offset, length), reads each involved stream
once (memory-mapped, only the lines asked for), decodes all lines in one batch and folds them with
``fold_many``: thousands of sessions a second, where folding them one by one through
``Store.session_events`` costs a query each.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

from ownloop.replay.fold import Session, fold_many
from ownloop.store import Store, sql_literal
from ownloop.store.journal import decode_lines

__all__ = ["fold_selected", "selection_sql"]



def selection_sql(
    run_id: str | None = None, task_id: str | None = None, where: str | None = None
) -> str:
    """A condition over the ``sessions`` view: all of run, task and ``where`` that are given.

    Args:
        run_id: only sessions of this run.
        task_id: only sessions of this task.
        where: any SQL condition over the ``sessions`` view's columns, e.g. ``status = 'fail'``.
    """
    parts = []
    if run_id:
        parts.append(f"run_id = {sql_literal(run_id)}")
    if task_id:
        parts.append(f"task_id = {sql_literal(task_id)}")
    if where and where.strip():
        parts.append(f"({where})")
    return " and ".join(parts) or "true"


def fold_selected(
    store: Store, condition: str = "true", kinds: Sequence[str] | None = None
) -> dict[str, Session]:
    """Rebuild every session the condition selects, keyed by session id.

    Args:
        store: the store.
        condition: SQL over the ``sessions`` view (see ``selection_sql``).
        kinds: only events of these kinds (table names, e.g. ``session_ended``); all if None.
            A regrade needs only starts, evidence, ends and grades, a fraction of the bytes.

    Raises:
        QueryError: the condition is not valid SQL over the ``sessions`` view.
    """
    kind_filter = ""
    if kinds:
        kind_filter = f" and kind in ({', '.join(sql_literal(k) for k in kinds)})"
    table = store.sql_arrow(
        "select stream, byte_offset, byte_length from journal where session_id in "
        f"(select session_id from sessions where {condition}){kind_filter} "
        "order by time, stream, seq")
    streams = table.column("stream").to_pylist()
    offsets = table.column("byte_offset").to_pylist()
    lengths = table.column("byte_length").to_pylist()
    places: dict[str, list[int]] = {}
    for position, stream in enumerate(streams):
        places.setdefault(stream, []).append(position)
    raws: list[bytes] = [b""] * len(streams)
    for stream, positions in places.items():
        with open(store.journal_dir / f"{stream}.jsonl", "rb") as f, mmap.mmap(
                f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            for position in positions:
                start = offsets[position]
                raws[position] = data[start : start + lengths[position] - 1]  # no newline
    decoded = decode_lines(raws)
    return fold_many(decoded.events)
