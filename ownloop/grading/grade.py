"""What every grader is and what it returns.

A grader is a pure function of a session's answer and its captured evidence, with a name (the spec
that made it, so ``make_grader(grade.grader)`` makes it again) and a version (bumped when the same
spec would grade differently). Graders never do I/O, never raise on odd answers or evidence, and
never evaluate model text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ownloop.errors import OwnloopError
from ownloop.store.events import Check, EvidenceCaptured

__all__ = ["Check", "Grade", "Grader", "GraderSpecError", "quoted"]


@dataclass(frozen=True, slots=True)
class Grade:
    """A grader's verdict: a finite score, whether it passed, a one-line reason, and its checks.

    ``checks`` say per check what was expected, what the session had and how the grader read it
    (a plug-in may leave them out). Two grades are equal when score, passed and details are: the
    checks are the explanation, not the verdict.
    """

    score: float
    passed: bool
    details: str
    checks: tuple[Check, ...] = field(default=(), compare=False)


@runtime_checkable
class Grader(Protocol):
    """Anything with a name, a version and a pure ``grade`` method."""

    @property
    def name(self) -> str:
        """The spec that made the grader (or a plug-in's own name)."""
        ...

    @property
    def version(self) -> str:
        """Changes when the same spec would grade differently."""
        ...

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """Grade an answer against the session's evidence; never raises."""
        ...


class GraderSpecError(OwnloopError):
    """A grader spec that cannot be understood; the message shows what a valid one looks like."""


def quoted(text: str, limit: int = 80) -> str:
    """``text`` shortened to ``limit`` characters and quoted on one line, for details and errors."""
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return repr(text)
