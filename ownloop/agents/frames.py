"""Coordinate frames: how a model's numbers become page pixels, named once for every agent.

Every recorded parse says which frame its model points were written in
(``ActionParsed.coordinate_frame``), so SQL and the viewer can map a point back without knowing
the agent:

- ``pixels``: page (screenshot) pixels as they are.
- ``smart-resize``: pixels of the image's smart_resize size (UI-TARS, OpenCUA, Fara-7B, and
  Qwen3-VL's absolute mode): page = x * W / W'.
- ``relative-999``: a 0-999 grid read as OSWorld's released Qwen3-VL parser and GLM-V's tools
  read it: page = int(x * W / 999).
- ``relative-1000``: integers in [0, 1000] of the image sent (H Company's Holo):
  page = x * W / 1000.
- ``percent``: 0-100 of the page (MolmoWeb).

Also the pointer a history leaves behind (for actions that start at it, such as Qwen3-VL's
``left_click_drag``) and the ``<think>`` block reasoning models put before their answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from ownloop.agents.coordinates import Point

if TYPE_CHECKING:
    from ownloop.agents.base import PastStep

__all__ = [
    "FRAMES",
    "Frame",
    "from_grid",
    "grid_point",
    "pointer_after",
    "split_think",
    "to_grid",
]

Frame = Literal["pixels", "smart-resize", "relative-999", "relative-1000", "percent"]
FRAMES: tuple[Frame, ...] = ("pixels", "smart-resize", "relative-999", "relative-1000", "percent")

_THINK = re.compile(r"^\s*<think>(?P<think>.*?)</think>", re.DOTALL)


def from_grid(value: float, side: int, grid: int, *, truncate: bool) -> float:
    """A model number on a ``grid`` (999 or 1000) as a page coordinate on a side of ``side``
    pixels; ``truncate`` takes ``int()`` of it as the released parsers do."""
    page = value * side / grid
    return float(int(page)) if truncate else round(page, 3)


def grid_point(
    mx: float, my: float, image: tuple[int, int], grid: int, *, truncate: bool
) -> tuple[float, float, float, float]:
    """A model point (``mx``, ``my``) on a ``grid`` as (page x, page y, mx, my) on a screenshot
    of ``image`` (width, height) pixels, each side by ``from_grid``."""
    width, height = image
    return (
        from_grid(mx, width, grid, truncate=truncate),
        from_grid(my, height, grid, truncate=truncate),
        mx,
        my,
    )


def to_grid(value: float, side: int, grid: int) -> int:
    """The grid number a model would write for page coordinate ``value`` (the inverse of
    ``from_grid``, to the nearest grid step)."""
    return min(grid, max(0, round(value * grid / side)))


def pointer_after(history: Sequence[PastStep]) -> Point | None:
    """Where the pointer is after the history's actions (None: no action placed it)."""
    for past in reversed(history):
        for action in reversed(past.parsed.actions):
            x2, y2 = getattr(action, "x2", None), getattr(action, "y2", None)
            if isinstance(x2, float | int) and isinstance(y2, float | int):
                return Point(float(x2), float(y2))
            x, y = getattr(action, "x", None), getattr(action, "y", None)
            if isinstance(x, float | int) and isinstance(y, float | int):
                return Point(float(x), float(y))
    return None


def split_think(text: str) -> tuple[str, str]:
    """(the reasoning inside a leading ``<think>...</think>``, the rest); ("", text) without one.
    An unclosed ``<think>`` is left in the text (the answer part then holds it)."""
    match = _THINK.match(text)
    if match is None:
        return "", text
    return match["think"].strip(), text[match.end() :]
