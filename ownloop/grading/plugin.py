"""Plug-in graders: ``python:module:function``, called with (answer, evidence).

The function returns a ``Grade``, a bool (score 1 or 0) or a number (the score; it passes at 1 or
more). Whatever it raises or returns that is none of these becomes a failed grade saying so, so a
buggy plug-in never stops a regrade. Its version is the function's ``version`` or
``__version__`` attribute, else its module's ``__version__``, else "".
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ownloop.grading.grade import Check, Grade
from ownloop.store.events import EvidenceCaptured

__all__ = ["PythonGrader", "load_function"]

PluginFunction = Callable[[str | None, tuple[EvidenceCaptured, ...]], object]


def load_function(module_name: str, function_name: str) -> PluginFunction:
    """Import ``module_name`` and return its attribute ``function_name`` (dots walk attributes).

    Raises:
        ImportError: the module cannot be imported.
        AttributeError: it has no such attribute.
        TypeError: the attribute is not callable.
    """
    target: object = importlib.import_module(module_name)
    for part in function_name.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{module_name}:{function_name} is not callable")
    return target


@dataclass(frozen=True, slots=True)
class PythonGrader:
    """Calls a user's function; see the module docstring for what it may return."""

    name: str
    function: PluginFunction
    version: str = ""

    @classmethod
    def build(cls, name: str, module_name: str, function_name: str) -> PythonGrader:
        """Load the function once and read its version.

        Raises:
            ImportError, AttributeError, TypeError: as ``load_function``.
        """
        function = load_function(module_name, function_name)
        module = importlib.import_module(module_name)
        version = (
            getattr(function, "version", None)
            or getattr(function, "__version__", None)
            or getattr(module, "__version__", None)
            or ""
        )
        return cls(name, function, str(version))

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """Call the plug-in; turn its result, or its exception, into a Grade."""
        try:
            result = self.function(answer, tuple(evidence))
            return _to_grade(result)
        except Exception as error:  # a plug-in's bug is a failed grade, not a failed regrade
            message = _one_line(error)
            return Grade(0.0, False, f"{self.name} raised {type(error).__name__}: {message}")


def _one_line(error: Exception) -> str:
    try:
        return " ".join(str(error).split())[:200]
    except Exception:  # an exception whose __str__ fails still names its type
        return "<unprintable message>"


def _to_grade(result: object) -> Grade:
    if isinstance(result, Grade):
        number = _finite(result.score)
        if number is None:
            shown = _short(result.score)
            return Grade(0.0, False, f"plug-in returned a Grade with score {shown}; use a float")
        checks = tuple(check for check in result.checks if isinstance(check, Check))
        return Grade(number, bool(result.passed), " ".join(str(result.details).split()), checks)
    if isinstance(result, bool):
        return Grade(1.0 if result else 0.0, result, f"plug-in returned {result}")
    number = _finite(result)
    if number is not None:
        return Grade(number, number >= 1.0, f"plug-in returned score {number:g}")
    shown = _short(result)
    if isinstance(result, int | float):
        return Grade(0.0, False, f"plug-in returned a non-finite score {shown}")
    return Grade(0.0, False, f"plug-in returned {shown}; return a Grade, a bool or a float")


def _finite(value: object) -> float | None:
    """``value`` as a finite float, or None (bools, non-numbers, NaN, inf, huge integers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _short(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # a result whose __repr__ fails still gets a grade
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."
