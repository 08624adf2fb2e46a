"""Checking an agent's options: values come from the command line (``-o images=3``), from Python
callers and from recorded RunStarted settings, so types are checked, not assumed.

Every failure is an ``OwnloopError`` naming the agent and the option, in one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeVar

from ownloop.store.errors import OwnloopError

__all__ = ["OptionCheck", "parse_overrides"]

_N = TypeVar("_N", int, float)


class OptionCheck:
    """Checks for one agent's options; messages start with the agent's name."""

    def __init__(self, agent: str) -> None:
        self.agent = agent

    def that(self, ok: bool, message: str) -> None:
        """Raise ``OwnloopError("<agent>: <message>")`` unless ``ok``."""
        if not ok:
            raise OwnloopError(f"{self.agent}: {message}")

    def number(self, name: str, value: object, kind: type[_N]) -> _N:
        """``value`` as ``kind`` (int or float); booleans, text, NaN and fractions of an int
        are refused rather than read as numbers."""
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or (kind is int and not float(value).is_integer())
        ):
            what = "a whole number" if kind is int else "a number"
            raise OwnloopError(f"{self.agent}: {name} must be {what}, got {value!r}")
        return kind(value)

    def viewport(self, value: object) -> tuple[int, int]:
        """A page size from ``"1280x800"``, ``(1280, 800)`` or ``[1280, 800]``."""
        if isinstance(value, str):
            w, sep, h = value.lower().partition("x")
            self.that(bool(sep) and w.strip().isdigit() and h.strip().isdigit(),
                      f"viewport must look like 1280x800, got {value!r}")
            value = (int(w), int(h))
        if not (
            isinstance(value, tuple | list)
            and len(value) == 2
            and all(isinstance(side, int) and not isinstance(side, bool) for side in value)
        ):
            raise OwnloopError(f"{self.agent}: viewport must look like 1280x800, got {value!r}")
        width, height = int(value[0]), int(value[1])
        self.that(width > 0 and height > 0, f"viewport must be positive, got {width}x{height}")
        return width, height


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """``-o KEY=VALUE`` pairs as agent options; numbers and true/false are read as such (the same
    reading as ``ownloop record -o``).

    Raises:
        OwnloopError: a pair is not KEY=VALUE.
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise OwnloopError(f"agent option {pair!r} is not KEY=VALUE, e.g. -o scroll_notches=3")
        options[key.replace("-", "_")] = _scalar(value)
    return options


def _scalar(value: str) -> Any:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value
