"""``ownloop verify``: check every stream's hash chain and every blob, one line per problem.

A torn tail (a writer killed mid-write) is a warning: readers skip it and nothing acknowledged was
lost. Everything else is an error: an edited, reordered or deleted journal line, bytes after the
last newline that no interrupted write leaves, a referenced blob that is missing, or a blob whose
bytes do not match its name. The journal is read directly, never through the index.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Literal, NamedTuple

import msgspec

from ownloop.store.errors import OwnloopError
from ownloop.store.events import (
    BrowserActed,
    Event,
    EvidenceCaptured,
    ImagePart,
    ModelCalled,
    RunSealed,
    RunStarted,
    ScreenshotTaken,
    SealedSession,
    SessionGraded,
    SessionStarted,
    StreamHead,
    StreamsCataloged,
)
from ownloop.store.journal import check_stream

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = [
    "Problem", "VerifyReport", "blob_references", "seal_fingerprint", "verify_store"]


class Problem(NamedTuple):
    """One thing wrong with the store."""

    severity: Literal["error", "warning"]
    where: str  # "journal/<stream>.jsonl:<line>" or "blob <sha256>"
    kind: str
    detail: str

    def line(self) -> str:
        return f"{self.severity}: {self.where}: {self.kind}: {self.detail}"


class VerifyReport(NamedTuple):
    """Every problem found, and how much was checked."""

    problems: list[Problem]
    streams: int
    events: int
    blobs: int
    heads: dict[str, StreamHead] = {}  # where each stream read stands (its lines, last sum)

    @property
    def errors(self) -> int:
        return sum(p.severity == "error" for p in self.problems)

    @property
    def warnings(self) -> int:
        return sum(p.severity == "warning" for p in self.problems)

    def summary(self) -> str:
        return (f"verify: {self.streams} streams, {self.events} events, {self.blobs} blobs: "
                f"{_count(self.errors, 'error')}, {_count(self.warnings, 'warning')}")

    def exit_code(self, *, strict: bool = False) -> int:
        """1 when there is an error (or, with ``strict``, a warning), else 0."""
        return 1 if self.errors or (strict and self.warnings) else 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def blob_references(event: Event) -> Iterator[str]:
    """The sha256 of every blob an event refers to."""
    if isinstance(event, ScreenshotTaken):
        yield event.sha256
    elif isinstance(event, ModelCalled):
        for message in event.messages:
            for part in message.parts:
                if isinstance(part, ImagePart):
                    yield part.sha256
        if event.response_blob:
            yield event.response_blob
    elif isinstance(event, EvidenceCaptured) and event.sha256:
        yield event.sha256
    elif isinstance(event, BrowserActed) and event.download:
        yield event.download


class _Seen:
    """What one pass over the journal learned, for the checks that span streams."""

    def __init__(self) -> None:
        self.sums: dict[str, list[str]] = {}  # stream -> each line's sum
        self.catalog: list[tuple[str, StreamHead]] = []  # (where, head) from every catalog
        self.seals: dict[str, tuple[str, RunSealed]] = {}  # run -> (where, its seal)
        self.started_sessions: set[str] = set()
        self.started_runs: set[str] = set()
        self.named_runs: dict[str, str] = {}  # run id -> a line naming it
        self.run_lines: dict[str, dict[str, int]] = {}  # run -> stream -> lines with its events

    def add(self, stream: str, where: str, number: int, event: Event) -> None:
        line = f"{where}:{number}"
        lines = self.run_lines.setdefault(event.run_id, {})
        if not (isinstance(event, SessionGraded) and event.against_seal) \
                and not isinstance(event, RunSealed):
            lines[stream] = max(lines.get(stream, 0), number)
        self.named_runs.setdefault(event.run_id, line)
        if isinstance(event, SessionStarted):
            self.started_sessions.add(event.session_id)
        elif isinstance(event, RunStarted):
            self.started_runs.add(event.run_id)
        elif isinstance(event, StreamsCataloged):
            self.catalog.extend((line, head) for head in event.heads)
        elif isinstance(event, RunSealed):
            self.seals.setdefault(event.run_id, (line, event))


def _head_problems(seen: _Seen, where: str, head: StreamHead, what: str) -> Iterator[Problem]:
    """A stream that no longer holds the lines ``head`` says it had."""
    sums = seen.sums.get(head.stream)
    place = f"journal/{head.stream}.jsonl"
    if sums is None:
        yield Problem("error", place, "missing stream",
                      f"{what} at {where} lists it with {head.events} events; the file is gone")
    elif len(sums) < head.events:
        yield Problem("error", place, "truncated stream",
                      f"{len(sums)} lines; {what} at {where} lists {head.events}")
    elif head.events and sums[head.events - 1] != head.head:
        yield Problem("error", f"{place}:{head.events}", "rewritten stream",
                      f"line {head.events} is not the one {what} at {where} lists")


def seal_fingerprint(seal: RunSealed) -> str:
    """The sha256 of a seal's manifest, as ``ownloop seal`` computed it."""
    manifest = _SealManifest(run_id=seal.run_id, streams=seal.streams, sessions=seal.sessions,
                             blobs=seal.blobs, budget=seal.budget)
    return hashlib.sha256(msgspec.json.encode(manifest)).hexdigest()


class _SealManifest(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    streams: tuple[StreamHead, ...]
    sessions: tuple[SealedSession, ...]
    blobs: int
    budget: int | None


def _seal_problems(seen: _Seen, run_id: str, where: str, seal: RunSealed) -> Iterator[Problem]:
    if seal_fingerprint(seal) != seal.fingerprint:
        yield Problem("error", where, "bad seal",
                      "the seal's manifest does not hash to its fingerprint: it was edited")
    sealed = {head.stream: head for head in seal.streams}
    for head in seal.streams:
        yield from _head_problems(seen, where, head, f"the seal of run {run_id}")
    for stream, last in sorted(seen.run_lines.get(run_id, {}).items()):
        listed = sealed.get(stream)
        if listed is None or last > listed.events:
            yield Problem("error", f"journal/{stream}.jsonl:{last}", "appended after the seal",
                          f"run {run_id} was sealed at {where}; it takes no more events")


def verify_store(store: Store, *, run_id: str | None = None, fingerprint: str | None = None,
                 streams: Collection[str] | None = None) -> VerifyReport:
    """Check every journal stream and every blob of ``store`` (with ``streams``: only those
    streams, and the blobs they refer to).

    Beyond each stream's own chain: every stream a catalog or a seal lists must still hold the
    lines it listed (so removed, truncated, emptied and swapped streams are found), a session's
    own stream carries its name, and every session and run named anywhere has its start.
    With ``run_id``, the run must be sealed (and match ``fingerprint`` when given), and nothing
    may have been added to it since.
    """
    problems: list[Problem] = []
    referenced: dict[str, str] = {}  # sha256 -> the first line that refers to it
    seen = _Seen()
    firsts: dict[str, str] = {}  # stream -> the session its first line starts
    events = 0
    if store.journal_dir.exists() and not store.journal_dir.is_dir():
        raise OwnloopError(f"{store.journal_dir} is a file, not the journal folder: this is not "
                           "an ownloop store (or it was damaged). Pass --store DIR")
    paths = store.stream_paths() if streams is None else \
        [store.journal_dir / f"{stream}.jsonl" for stream in sorted(streams)]
    for path in paths:
        try:
            check = check_stream(path)
        except FileNotFoundError:
            problems.append(Problem("error", f"journal/{path.name}", "missing stream",
                                    "the index lists it; the file is gone"))
            continue
        where = f"journal/{path.name}"
        seen.sums[path.stem] = check.sums
        for p in check.problems:
            severity: Literal["error", "warning"] = "warning" if p.kind == "torn tail" else "error"
            problems.append(Problem(severity, f"{where}:{p.line}", p.kind, p.detail))
        if not check.sums and not check.problems:
            problems.append(Problem("warning", where, "empty stream",
                                    "no writer leaves an empty stream: its lines were removed, "
                                    "or it predates ownloop 0.2"))
        events += len(check.events)
        if check.events and isinstance(check.events[0][1], SessionStarted):
            firsts[path.stem] = check.events[0][1].session_id
        for number, event in check.events:
            seen.add(path.stem, where, number, event)
            for sha256 in blob_references(event):
                referenced.setdefault(sha256, f"{where}:{number}")
    for stream, session_id in sorted(firsts.items()):
        # A recorder names a session's stream after it: a stream named after another session
        # that starts elsewhere was swapped or renamed.
        if session_id != stream and stream in seen.started_sessions:
            problems.append(Problem(
                "error", f"journal/{stream}.jsonl:1", "swapped stream",
                f"it starts session {session_id}; session {stream} starts in another file"))
    for where, head in seen.catalog:
        problems.extend(_head_problems(seen, where, head, "the catalog"))
    for run in sorted(seen.named_runs.keys() - seen.started_runs):
        problems.append(Problem("warning", seen.named_runs[run], "missing run",
                                f"names run {run}, whose RunStarted is in no stream (its run "
                                "stream was removed, or these events were written without one)"))
    for run, (where, seal) in sorted(seen.seals.items()):
        problems.extend(_seal_problems(seen, run, where, seal))
    if run_id is not None:
        problems.extend(_run_problems(seen, run_id, fingerprint))
    present = set(store.blobs) if streams is None else set()
    for sha256 in sorted(referenced.keys() | present):
        try:
            wrong = store.blobs.check(sha256)
        except ValueError:
            wrong = "not a sha256 name"
        if wrong is None:
            continue
        source = referenced.get(sha256)
        detail = f"{wrong} (referenced by {source})" if source else f"{wrong} (not referenced)"
        problems.append(Problem("error", f"blob {sha256}", "missing blob"
                                if wrong == "missing" else "bad blob", detail))
    heads = {stream: StreamHead(stream=stream, events=len(sums), head=sums[-1] if sums else "")
             for stream, sums in seen.sums.items()}
    return VerifyReport(problems, len(paths), events, len(referenced.keys() | present), heads)


def _run_problems(seen: _Seen, run_id: str, fingerprint: str | None) -> Iterator[Problem]:
    """``verify --run``: the run must be sealed, with the fingerprint the user cites."""
    if run_id not in seen.named_runs:
        yield Problem("error", f"run {run_id}", "no such run",
                      "no event names it. List runs with: ownloop sql \"select * from runs\"")
        return
    sealed = seen.seals.get(run_id)
    if sealed is None:
        yield Problem("error", f"run {run_id}", "not sealed",
                      f"only a sealed run can be checked as a whole. Seal it with: ownloop seal "
                      f"--run {run_id}")
        return
    where, seal = sealed
    if fingerprint and not seal.fingerprint.startswith(fingerprint.lower()):
        yield Problem("error", where, "other fingerprint",
                      f"the run's seal is {seal.fingerprint}, not {fingerprint}")
