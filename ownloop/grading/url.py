"""The final-URL grader: a glob (whole URL, case-sensitive) or a regex (searched) over it."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ownloop.grading.evidence import final_url
from ownloop.grading.grade import Check, Grade, quoted
from ownloop.store.events import EvidenceCaptured

__all__ = ["URL_KINDS", "UrlGrader"]

URL_KINDS = ("glob", "regex")
_NO_URL = Grade(0.0, False, "no final_url evidence")


@dataclass(frozen=True, slots=True)
class UrlGrader:
    """Passes when the captured final URL matches ``pattern``.

    A glob must match the whole URL (``*`` is any text, ``?`` any one character, ``[...]`` a set;
    case-sensitive), so ``*/done*`` means "a URL with /done in its path or later". A regex is
    searched anywhere in the URL; anchor it with ``^`` and ``$`` to match the whole URL.
    """

    name: str
    kind: str
    pattern: str
    version: str = "1"
    _regex: re.Pattern[str] | None = None

    @classmethod
    def build(cls, name: str, kind: str, pattern: str) -> UrlGrader:
        """A grader with its pattern compiled once.

        Raises:
            re.error: ``pattern`` is not a valid regex.
        """
        source = fnmatch.translate(pattern) if kind == "glob" else pattern
        return cls(name, kind, pattern, "1", re.compile(source))

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """Pass (score 1) when the final URL matches; the answer is not used."""
        url = final_url(evidence)
        if url is None:
            return _NO_URL
        assert self._regex is not None
        passed = (self._regex.match if self.kind == "glob" else self._regex.search)(url) is not None
        verb = "matches" if passed else "does not match"
        check = Check(
            name="final_url",
            passed=passed,
            expected=f"{self.kind} {self.pattern}",
            actual=url,
            actual_normalized=url,
        )
        return Grade(
            1.0 if passed else 0.0,
            passed,
            f"final URL {quoted(url)} {verb} {self.kind} {quoted(self.pattern)}",
            (check,),
        )
