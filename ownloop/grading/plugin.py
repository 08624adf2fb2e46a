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

from ownloop.grading.grade import Grade
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
    return target  # type: ignore[return-value]


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
        score, passed, details = result
        if isinstance(score, bool) or not isinstance(score, int | float):
            return Grade(0.0, False, f"plug-in returned a Grade with score {score!r}; use a float")
        if not math.isfinite(score):
            return Grade(0.0, False, f"plug-in returned a non-finite score {score!r}")
        return Grade(float(score), bool(passed), " ".join(str(details).split()))
    if isinstance(result, bool):
        return Grade(1.0 if result else 0.0, result, f"plug-in returned {result}")
    if isinstance(result, int | float):
        if not math.isfinite(result):
            return Grade(0.0, False, f"plug-in returned a non-finite score {result!r}")
        passed = result >= 1.0
        return Grade(float(result), passed, f"plug-in returned score {result:g}")
    shown = repr(result)[:60]
    return Grade(0.0, False, f"plug-in returned {shown}; return a Grade, a bool or a float")
