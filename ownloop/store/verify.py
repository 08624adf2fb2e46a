"""``ownloop verify``: check every stream's hash chain and every blob, one line per problem.

A torn tail (a writer killed mid-write) is a warning: readers skip it and nothing acknowledged was
lost. Everything else is an error: an edited, reordered or deleted journal line, bytes after the
last newline that no interrupted write leaves, a referenced blob that is missing, or a blob whose
bytes do not match its name. The journal is read directly, never through the index.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal, NamedTuple

from ownloop.store.events import (
    BrowserActed,
    Event,
    EvidenceCaptured,
    ImagePart,
    ModelCalled,
    ScreenshotTaken,
)
from ownloop.store.journal import check_stream

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = ["Problem", "VerifyReport", "blob_references", "verify_store"]


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


def verify_store(store: Store) -> VerifyReport:
    """Check every journal stream and every blob of ``store``."""
    problems: list[Problem] = []
    referenced: dict[str, str] = {}  # sha256 -> the first line that refers to it
    events = 0
    paths = store.stream_paths()
    for path in paths:
        check = check_stream(path)
        where = f"journal/{path.name}"
        for p in check.problems:
            severity: Literal["error", "warning"] = "warning" if p.kind == "torn tail" else "error"
            problems.append(Problem(severity, f"{where}:{p.line}", p.kind, p.detail))
        events += len(check.events)
        for number, event in check.events:
            for sha256 in blob_references(event):
                referenced.setdefault(sha256, f"{where}:{number}")
    present = set(store.blobs)
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
    return VerifyReport(problems, len(paths), events, len(referenced.keys() | present))
