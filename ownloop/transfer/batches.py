"""Sessions for an exporter, a batch at a time: memory stays bounded however many are picked.

``picked(store, selection)`` lists the session ids a selection picks (a few bytes each);
``each_session`` asks the index where ``LOOKUP`` sessions' journal lines are in one query (a few
MB of places: each query costs a look at every journal stream, so one per batch would grow with
the store) and folds them ``BATCH`` at a time, so exporting ten thousand sessions holds one batch
of folded sessions, never all of them. ``files_for`` copies
blobs into an export folder once each, named by hash so that a reference is its own check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ownloop.errors import OwnloopError
from ownloop.replay.fold import Session
from ownloop.replay.selection import fold_places
from ownloop.store import MissingBlob, Store
from ownloop.store.queries import (
    RunSession,
    Selection,
    run_sessions,
    selected_sessions,
    session_places,
)

__all__ = [
    "run_to_export",
    "BATCH",
    "LOOKUP",
    "PASSED_AND_COUNTED",
    "BlobFiles",
    "ExportResult",
    "blob_or_skip",
    "each_session",
    "empty_folder",
    "picked",
]

BATCH = 64
LOOKUP = 1024  # sessions whose journal places are asked for at once
PASSED_AND_COUNTED = "passed and coalesce(counted, true)"
"""The default condition of a training export: passed sessions that count for their task (a
session recorded before counting existed, or imported, counts)."""

_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/webp": ".webp",
    "image/gif": ".gif",
    "text/plain": ".txt",
    "application/json": ".json",
}


def picked(store: Store, selection: Selection) -> list[str]:
    """The ids of the sessions ``selection`` picks, oldest first.

    Raises:
        OwnloopError: it picks none (the message says how to list sessions).
    """
    ids = [session_id for session_id, _agent in selected_sessions(store, selection)]
    if not ids:
        raise OwnloopError(
            "no sessions match the selection. List them with: ownloop sql "
            '"select session_id, run_id, passed, counted from sessions"'
        )
    return ids


def each_session(
    store: Store, ids: list[str], batch: int = BATCH, lookup: int = LOOKUP
) -> Iterator[Session]:
    """The sessions ``ids`` names, folded ``batch`` at a time, in the order given."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for first in range(0, len(ids), lookup):
        places = session_places(store, ids[first : first + lookup])
        end = min(first + lookup, len(ids))
        for start in range(first, end, batch):
            chunk = ids[start : min(start + batch, end)]
            mine = places.filter(pc.is_in(places.column("session_id"), pa.array(chunk)))
            folded = fold_places(store, mine)
            for session_id in chunk:
                session = folded.get(session_id)
                if session is not None:
                    yield session


def empty_folder(out: str | Path) -> Path:
    """``out`` as a folder to write into: new, or empty.

    Raises:
        OwnloopError: ``out`` is a file, or a folder that holds something.
    """
    root = Path(out)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise OwnloopError(f"{root} is not an empty folder. Pass a new --out folder")
    root.mkdir(parents=True, exist_ok=True)
    return root


class BlobFiles:
    """Blobs copied under ``root/folder`` once each, as ``<sha256><extension>``.

    Args:
        store: where the blobs are.
        root: the export folder; paths returned are relative to it (POSIX).
        folder: the sub-folder, e.g. ``images``.
    """

    def __init__(self, store: Store, root: Path, folder: str) -> None:
        self.store = store
        self.root = root
        self.folder = folder
        self.written = 0
        self.missing: list[str] = []  # sha256 of blobs the store lacks (each once)
        self._seen: set[str] = set()

    def path_of(self, sha256: str, media_type: str = "image/png") -> str:
        """The relative path of a blob's file (written on first use; "" if the store lacks it)."""
        name = f"{self.folder}/{sha256}{_EXTENSIONS.get(media_type, '')}"
        if sha256 in self._seen:
            return "" if sha256 in self.missing else name
        self._seen.add(sha256)
        try:
            data = self.store.get_blob(sha256)
        except (MissingBlob, ValueError):
            self.missing.append(sha256)
            return ""
        target = self.root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.written += 1
        return name

    def bytes_of(self, sha256: str) -> bytes | None:
        """A blob's bytes (None when the store lacks it), without writing a file."""
        try:
            return self.store.get_blob(sha256)
        except (MissingBlob, ValueError):
            if sha256 not in self.missing:
                self.missing.append(sha256)
            return None

    def text(self, text: str, suffix: str = ".txt") -> tuple[str, str]:
        """A text written as a file named by its sha256: (sha256, relative path)."""
        data = text.encode()
        sha256 = hashlib.sha256(data).hexdigest()
        name = f"{self.folder}/{sha256}{suffix}"
        if sha256 not in self._seen:
            self._seen.add(sha256)
            target = self.root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            self.written += 1
        return sha256, name

    def lines(self, what: str = "files") -> list[str]:
        """What was written and what was missing, one line each."""
        lines = [f"{self.root / self.folder}: {self.written} {what}"] if self.written else []
        if self.missing:
            lines.append(
                f"skipped {len(self.missing)} blobs missing from the store (first: "
                f"{self.missing[0][:12]}); check the store with: ownloop verify"
            )
        return lines


class ExportResult(NamedTuple):
    """What one export wrote."""

    out: Path
    lines_written: list[str]  # one line per file or folder kind written
    skipped: list[str]  # what could not be written (e.g. a blob missing from the store)

    def lines(self) -> list[str]:
        return [*self.skipped, *self.lines_written]


def run_to_export(store: Store, run_id: str, out: str | Path) -> tuple[list[RunSession], Path]:
    """The run's sessions by task (then attempt) and the folder to write them to.

    Raises:
        OwnloopError: the run has no sessions, or ``out`` is not a new or empty folder.
    """
    rows = run_sessions(store, run_id, by_task=True)
    if not rows:
        raise OwnloopError(
            f"no sessions in run {run_id!r}. List runs with: ownloop sql "
            '"select run_id, agent, sessions from runs"'
        )
    root = Path(out)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise OwnloopError(f"{root} is not an empty folder. Pass a new --out folder")
    return rows, root


def blob_or_skip(store: Store, sha256: str, target: Path, skipped: list[str]) -> bytes | None:
    """The bytes of the blob an export writes as ``target``; None, with a line for the export's
    ``skipped``, when the store lacks it."""
    try:
        return store.get_blob(sha256)
    except MissingBlob:
        skipped.append(f"skipped {target} (blob {sha256[:12]} missing from the store)")
        return None
