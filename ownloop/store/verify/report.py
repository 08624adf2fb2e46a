"""What ``ownloop verify`` reports: each problem, and how much was checked."""

from __future__ import annotations

from typing import Literal, NamedTuple

from ownloop.store.events import StreamHead

__all__ = ["Problem", "VerifyReport"]


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
    heads: dict[str, StreamHead] = {}  # where each stream stands (lines, last sum); {}: unchanged
    unchanged_streams: int = 0  # not read again: as the last check found them
    unchanged_blobs: int = 0  # not hashed again: the last check found them sound

    @property
    def errors(self) -> int:
        return sum(p.severity == "error" for p in self.problems)

    @property
    def warnings(self) -> int:
        return sum(p.severity == "warning" for p in self.problems)

    def summary(self) -> str:
        line = (
            f"verify: {self.streams} streams, {self.events} events, {self.blobs} blobs: "
            f"{_count(self.errors, 'error')}, {_count(self.warnings, 'warning')}"
        )
        if self.unchanged_streams:  # (blobs alone: the streams that refer to them were read)
            line += (
                f" ({self.unchanged_streams} streams and {self.unchanged_blobs} blobs as the "
                "last check found them; ownloop verify --full reads them again)"
            )
        return line

    def exit_code(self, *, strict: bool = False) -> int:
        """1 when there is an error (or, with ``strict``, a warning), else 0."""
        return 1 if self.errors or (strict and self.warnings) else 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
