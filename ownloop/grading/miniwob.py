"""The MiniWoB++ grader: the captured raw reward of the episode is above zero."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ownloop.grading.evidence import latest_evidence, read_value
from ownloop.grading.grade import Check, Grade
from ownloop.store.events import EvidenceCaptured

__all__ = ["MiniwobGrader"]


@dataclass(frozen=True, slots=True)
class MiniwobGrader:
    """Passes when evidence ``miniwob_reward`` has ``raw_reward > 0``.

    The score is the raw reward clipped to [0, 1] (MiniWoB's raw rewards are -1..1; the time-scaled
    ``reward`` is left to the details, since it depends on how long the model took to answer).
    """

    name: str = "miniwob"
    version: str = "1"

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """Grade from the last ``miniwob_reward`` evidence; the answer is not used."""
        item = latest_evidence(evidence, "miniwob_reward")
        if item is None:
            return Grade(0.0, False, "no miniwob_reward evidence")
        try:
            value = read_value(item)
        except ValueError as error:
            return Grade(0.0, False, str(error))
        fields = value if isinstance(value, dict) else {}
        raw = _finite(fields.get("raw_reward"))
        if raw is None:
            return Grade(0.0, False, f"miniwob_reward has no numeric raw_reward: {_short(value)}")
        passed = raw > 0
        rest = {key: fields[key] for key in ("reward", "done", "reason") if key in fields}
        details = f"raw reward {raw:g} {'>' if passed else '<='} 0" + (
            f" ({', '.join(f'{key} {_short(val)}' for key, val in rest.items())})" if rest else ""
        )
        score = min(1.0, max(0.0, raw))
        check = Check(
            name="raw_reward",
            passed=passed,
            expected="> 0",
            actual=f"{raw:g}",
            actual_normalized=f"{score:g}",
        )
        return Grade(score, passed, details, (check,))


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        return None
    return number if math.isfinite(number) else None


def _short(value: object) -> str:
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):
        text = repr(type(value))
    return text if len(text) <= 60 else text[:57] + "..."
