"""Graders of the agent's final answer: exact, normalized, contains, regex, number, any-of."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from ownloop.grading.grade import Check, Grade, quoted
from ownloop.store.events import EvidenceCaptured

__all__ = ["ANSWER_MODES", "AnswerGrader", "extract_numbers", "normalize"]

ANSWER_MODES = ("exact", "normalized", "contains", "regex", "number", "any")

_SEPARATORS = re.compile(r"[\W_]+")
# A sign counts only when it does not follow a word character, so "1-5" reads as 1 and 5 and
# "COVID-19" as 19; thousands separators are read only in groups of three ("1,234.5").
_NUMBER = re.compile(
    r"(?<![\w.])([-+\u2212]?)((?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)(?:[eE]([-+]?\d+))?"
)
_NO_ANSWER = Grade(0.0, False, "no answer")
_NORMALIZING = ("normalized", "contains", "any")


def normalize(text: str) -> str:
    """Case-folded NFKC text with every run of non-alphanumeric characters turned into one space.

    ``normalize("  Bob O'Brien. ") == "bob o brien"``.
    """
    return _SEPARATORS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def extract_numbers(text: str) -> list[float]:
    """Every number written in ``text``, in order ("$1,234.50 or -2" gives [1234.5, -2.0])."""
    numbers = []
    for sign, digits, exponent in _NUMBER.findall(text):
        literal = digits.replace(",", "") + (f"e{exponent}" if exponent else "")
        value = float(literal)
        numbers.append(-value if sign in ("-", "\u2212") else value)
    return numbers


@dataclass(frozen=True, slots=True)
class AnswerGrader:
    """Grades the answer text in one ``mode`` of ``ANSWER_MODES``.

    ``expected`` is the text for exact/normalized/contains/regex, the target number for number
    (with ``tolerance``: absolute, or relative when ``relative``), and a tuple of texts for any.
    """

    name: str
    mode: str
    expected: str | float | tuple[str, ...]
    tolerance: float = 0.0
    relative: bool = False
    version: str = "1"
    _pattern: re.Pattern[str] | None = None
    _texts: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        name: str,
        mode: str,
        expected: str | float | tuple[str, ...],
        tolerance: float = 0.0,
        relative: bool = False,
    ) -> AnswerGrader:
        """A grader with its regex compiled and its expected texts normalized once.

        Raises:
            re.error: ``expected`` is not a valid regex in regex mode.
        """
        pattern = re.compile(str(expected)) if mode == "regex" else None
        if mode in ("normalized", "contains"):
            normalized: tuple[str, ...] = (normalize(str(expected)),)
        elif mode == "any":
            normalized = tuple(normalize(text) for text in expected)  # type: ignore[union-attr]
        else:
            normalized = ()
        return cls(name, mode, expected, tolerance, relative, "1", pattern, normalized)

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """Pass (score 1) when the answer matches; ``evidence`` is not used."""
        if not isinstance(answer, str):
            return _NO_ANSWER
        passed, target = _CHECKS[self.mode](self, answer)
        verb = _VERBS[self.mode][0 if passed else 1]
        if self.mode in _NORMALIZING:
            read = normalize(answer)
        elif self.mode == "number":
            read = " ".join(f"{value:g}" for value in extract_numbers(answer))
        else:
            read = answer
        check = Check(
            name="answer",
            passed=passed,
            expected=f"{self.mode} {target}",
            actual=answer,
            actual_normalized=read,
        )
        return Grade(
            1.0 if passed else 0.0, passed, f"answer {quoted(answer)} {verb} {target}", (check,)
        )

    def _check_exact(self, answer: str) -> tuple[bool, str]:
        return answer == self.expected, quoted(str(self.expected))

    def _check_normalized(self, answer: str) -> tuple[bool, str]:
        return normalize(answer) == self._texts[0], quoted(str(self.expected))

    def _check_contains(self, answer: str) -> tuple[bool, str]:
        return self._texts[0] in normalize(answer), quoted(str(self.expected))

    def _check_regex(self, answer: str) -> tuple[bool, str]:
        assert self._pattern is not None
        return self._pattern.search(answer) is not None, quoted(self._pattern.pattern)

    def _check_number(self, answer: str) -> tuple[bool, str]:
        target = float(self.expected)  # type: ignore[arg-type]
        allowed = self.tolerance * abs(target) / 100 if self.relative else self.tolerance
        allowed += 1e-9 * max(1.0, abs(target))  # decimal literals are not exact in binary
        close = any(abs(value - target) <= allowed for value in extract_numbers(answer))
        spread = f"{self.tolerance:g}%" if self.relative else f"{self.tolerance:g}"
        return close, f"{spread} of {target:g}"

    def _check_any(self, answer: str) -> tuple[bool, str]:
        shown = ", ".join(quoted(str(text), 30) for text in self.expected)  # type: ignore[union-attr]
        return normalize(answer) in self._texts, f"[{shown}]"


_CHECKS = {mode: getattr(AnswerGrader, f"_check_{mode}") for mode in ANSWER_MODES}
_VERBS = {
    "exact": ("equals", "does not equal"),
    "normalized": ("matches", "does not match"),
    "contains": ("contains", "does not contain"),
    "regex": ("matches regex", "does not match regex"),
    "number": ("has a number within", "has no number within"),
    "any": ("matches one of", "matches none of"),
}
