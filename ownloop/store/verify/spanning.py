"""The checks that span streams: swapped streams, catalogs, missing runs, seals, the blobs
found missing or bad, and the temporary files a killed recorder left."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ownloop.store.claims import stale_temporaries
from ownloop.store.events import RunSealed, SealedSession, StreamHead
from ownloop.store.journal import check_stream
from ownloop.store.packs import pack_files, records
from ownloop.store.verify.report import Problem
from ownloop.store.verify.streams import Hashed, Summary

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = [
    "Seen",
    "blob_problems",
    "claim_problems",
    "pack_problems",
    "run_problems",
    "seal_fingerprint",
    "store_problems",
]


class Seen:
    """What the streams' summaries say together, for the checks that span streams."""

    def __init__(self, journal_dir: Path, summaries: dict[str, Summary]) -> None:
        self.journal_dir = journal_dir
        self.summaries = summaries
        self.loaded: dict[str, list[str]] = {}  # stream -> each line's sum, read when needed
        self.catalog: list[tuple[str, StreamHead]] = []  # (where, head) from every catalog
        self.seals: dict[str, tuple[str, RunSealed]] = {}  # run -> (where, its seal)
        self.started_sessions: set[str] = set()
        self.started_runs: set[str] = set()
        self.named_runs: dict[str, str] = {}  # run id -> a line naming it
        self.run_lines: dict[str, dict[str, int]] = {}  # run -> stream -> lines with its events
        for stream, summary in summaries.items():
            where = f"journal/{stream}.jsonl"
            self.started_sessions.update(summary.started_sessions)
            self.started_runs.update(summary.started_runs)
            for run, number in summary.named_runs.items():
                self.named_runs.setdefault(run, f"{where}:{number}")
            for run, number in summary.run_lines.items():
                self.run_lines.setdefault(run, {})[stream] = number
            self.catalog.extend((f"{where}:{number}", head) for number, head in summary.catalog)
            for number, seal in summary.seals:
                self.seals.setdefault(seal.run_id, (f"{where}:{number}", seal))

    def sum_at(self, stream: str, number: int) -> str:
        """The sum of line ``number`` (1-based) of ``stream``; "" past its end."""
        summary = self.summaries[stream]
        if number == summary.lines:
            return summary.head
        sums = self.loaded.get(stream)
        if sums is None:  # a head that is not the stream's last line: rare, read it again
            try:
                sums = check_stream(self.journal_dir / f"{stream}.jsonl").sums
            except FileNotFoundError:
                sums = []
            self.loaded[stream] = sums
        return sums[number - 1] if number <= len(sums) else ""


def _head_problems(seen: Seen, where: str, head: StreamHead, what: str) -> Iterator[Problem]:
    """A stream that no longer holds the lines ``head`` says it had."""
    summary = seen.summaries.get(head.stream)
    place = f"journal/{head.stream}.jsonl"
    if summary is None:
        yield Problem(
            "error",
            place,
            "missing stream",
            f"{what} at {where} lists it with {head.events} events; the file is gone",
        )
    elif summary.lines < head.events:
        yield Problem(
            "error",
            place,
            "truncated stream",
            f"{summary.lines} lines; {what} at {where} lists {head.events}",
        )
    elif head.events and seen.sum_at(head.stream, head.events) != head.head:
        yield Problem(
            "error",
            f"{place}:{head.events}",
            "rewritten stream",
            f"line {head.events} is not the one {what} at {where} lists",
        )


def seal_fingerprint(seal: RunSealed) -> str:
    """The sha256 of a seal's manifest, as ``ownloop seal`` computed it."""
    manifest = _SealManifest(
        run_id=seal.run_id,
        streams=seal.streams,
        sessions=seal.sessions,
        blobs=seal.blobs,
        budget=seal.budget,
    )
    return hashlib.sha256(msgspec.json.encode(manifest)).hexdigest()


class _SealManifest(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    streams: tuple[StreamHead, ...]
    sessions: tuple[SealedSession, ...]
    blobs: int
    budget: int | None


def _seal_problems(seen: Seen, run_id: str, where: str, seal: RunSealed) -> Iterator[Problem]:
    if seal_fingerprint(seal) != seal.fingerprint:
        yield Problem(
            "error",
            where,
            "bad seal",
            "the seal's manifest does not hash to its fingerprint: it was edited",
        )
    sealed = {head.stream: head for head in seal.streams}
    for head in seal.streams:
        yield from _head_problems(seen, where, head, f"the seal of run {run_id}")
    for stream, last in sorted(seen.run_lines.get(run_id, {}).items()):
        listed = sealed.get(stream)
        if listed is None or last > listed.events:
            yield Problem(
                "error",
                f"journal/{stream}.jsonl:{last}",
                "appended after the seal",
                f"run {run_id} was sealed at {where}; it takes no more events",
            )


def claim_problems(store: Store) -> list[Problem]:
    """A warning for each temporary claim file a killed recorder left (not journal data: the
    next recorder of the run removes it)."""
    return [
        Problem(
            "warning",
            path.relative_to(store.root).as_posix(),
            "stale temporary file",
            "left by a recorder killed while writing a claim; the next recorder of the run "
            "removes it (or delete it)",
        )
        for path in stale_temporaries(store.root)
    ]


def pack_problems(store: Store) -> list[Problem]:
    """An error for each pack with bytes in it that are no record (not a torn last one, which a
    crash leaves): the blobs before them are read from it, any after them are lost."""
    problems = []
    for path in pack_files(store.blobs.packs):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # written out meanwhile
            continue
        try:
            scan = records(fd)
        finally:
            os.close(fd)
        if scan.damaged:
            problems.append(
                Problem(
                    "error",
                    path.relative_to(store.root).as_posix(),
                    "damaged pack",
                    f"the bytes from offset {scan.end} are no blob record; the "
                    f"{len(scan.records)} blobs before them are read from it (ownloop compact "
                    "writes them out and keeps the pack); restore it from a backup for the rest",
                )
            )
    return problems


def blob_problems(checked: dict[str, Hashed], referenced: dict[str, str]) -> Iterator[Problem]:
    """A problem for each blob found missing or bad."""
    for sha256, hashed in sorted(checked.items()):
        if hashed.wrong is None:
            continue
        source = referenced.get(sha256)
        if hashed.wrong == "missing" and source is None:
            continue  # an unreferenced blob removed: forgotten
        detail = (
            f"{hashed.wrong} (referenced by {source})"
            if source
            else f"{hashed.wrong} (not referenced)"
        )
        kind = "missing blob" if hashed.wrong == "missing" else "bad blob"
        yield Problem("error", f"blob {sha256}", kind, detail)


def store_problems(seen: Seen) -> Iterator[Problem]:
    """The checks that span streams: swapped streams, catalogs, missing runs, seals."""
    for stream, summary in seen.summaries.items():  # in the journal's order
        # A recorder names a session's stream after it: a stream named after another session
        # that starts elsewhere was swapped or renamed.
        session_id = summary.first_session
        if session_id and session_id != stream and stream in seen.started_sessions:
            yield Problem(
                "error",
                f"journal/{stream}.jsonl:1",
                "swapped stream",
                f"it starts session {session_id}; session {stream} starts in another file",
            )
    for where, head in seen.catalog:
        yield from _head_problems(seen, where, head, "the catalog")
    for run in sorted(seen.named_runs.keys() - seen.started_runs):
        yield Problem(
            "warning",
            seen.named_runs[run],
            "missing run",
            f"names run {run}, whose RunStarted is in no stream (its run stream was "
            "removed, or these events were written without one)",
        )
    for run, (where, seal) in sorted(seen.seals.items()):
        yield from _seal_problems(seen, run, where, seal)


def run_problems(seen: Seen, run_id: str, fingerprint: str | None) -> Iterator[Problem]:
    """``verify --run``: the run must be sealed, with the fingerprint the user cites."""
    if run_id not in seen.named_runs:
        yield Problem(
            "error",
            f"run {run_id}",
            "no such run",
            'no event names it. List runs with: ownloop sql "select * from runs"',
        )
        return
    sealed = seen.seals.get(run_id)
    if sealed is None:
        yield Problem(
            "error",
            f"run {run_id}",
            "not sealed",
            f"only a sealed run can be checked as a whole. Seal it with: ownloop seal "
            f"--run {run_id}",
        )
        return
    where, seal = sealed
    if fingerprint and not seal.fingerprint.startswith(fingerprint.lower()):
        yield Problem(
            "error",
            where,
            "other fingerprint",
            f"the run's seal is {seal.fingerprint}, not {fingerprint}",
        )
