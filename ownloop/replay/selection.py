"""Choosing sessions from the store and rebuilding many of them at once.

A selection is a run, a task and the user's SQL condition over the ``sessions`` view.
``fold_selected`` asks the index where the selected sessions' journal lines are (stream, byte
offset, length), reads each involved stream once (memory-mapped, only the lines asked for),
decodes all lines in one batch and folds them with ``fold_many``: thousands of sessions a second,
where folding them one by one through ``Store.session_events`` costs a query each.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ownloop.replay.fold import Session, fold_many
from ownloop.store import Store
from ownloop.store.journal import StreamFiles, decode_places
from ownloop.store.queries import EVERY_SESSION, Selection, journal_places

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Selection", "fold_places", "fold_selected"]


def fold_selected(
    store: Store, selection: Selection = EVERY_SESSION, kinds: Sequence[str] | None = None
) -> dict[str, Session]:
    """Rebuild every session the selection picks, keyed by session id.

    Args:
        store: the store.
        selection: run, task and the user's SQL condition over the ``sessions`` view.
        kinds: only events of these kinds (table names, e.g. ``session_ended``); all if None.
            A regrade needs only starts, evidence, ends and grades, a fraction of the bytes.

    Raises:
        QueryError: the condition is not valid SQL over the ``sessions`` view.
    """
    return fold_places(store, journal_places(store, selection, kinds))


def fold_places(store: Store, table: pa.Table) -> dict[str, Session]:
    """Rebuild the sessions whose journal lines ``table`` names (columns ``stream``,
    ``byte_offset``, ``byte_length``, in the order the events happened), keyed by session id."""
    streams = table.column("stream").to_pylist()
    offsets = table.column("byte_offset").to_pylist()
    lengths = table.column("byte_length").to_pylist()
    places: dict[str, list[int]] = {}
    for position, stream in enumerate(streams):
        places.setdefault(stream, []).append(position)
    raws: list[bytes] = [b""] * len(streams)
    for stream, positions in places.items():
        with (
            open(store.journal_dir / f"{stream}.jsonl", "rb") as f,
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data,
        ):
            for position in positions:
                start = offsets[position]
                raws[position] = data[start : start + lengths[position] - 1]  # no newline
    with StreamFiles(store.journal_dir) as line_at:
        events = decode_places(raws, streams, offsets, line_at)
    return fold_many(events)
