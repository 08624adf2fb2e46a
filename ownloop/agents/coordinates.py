"""Coordinate spaces shared by the agents: the screenshot's pixels and the model's own space.

The recorder captures screenshots at device scale 1, so a screenshot pixel is a CSS pixel of the
viewport and page coordinates are screenshot coordinates. Qwen2.5-VL based models (UI-TARS-1.5,
OpenCUA, Fara-7B) answer in the *smart_resize* space of the image they were sent: each side
rounded to a multiple of 28 (1280x800 becomes 1288x812). MolmoWeb answers in percent.

Sizes are (width, height) everywhere in ownloop; the Qwen helpers take (height, width), a trap
this module keeps in one place.
"""

from __future__ import annotations

import math
from typing import NamedTuple, TypeGuard

from ownloop.agents.base import AgentParseError, one_line

__all__ = [
    "QWEN_FACTOR",
    "QWEN_MAX_PIXELS",
    "QWEN_MIN_PIXELS",
    "Point",
    "Size",
    "finite_number",
    "model_point",
    "scale",
    "smart_resize",
]

QWEN_FACTOR = 28
QWEN_MIN_PIXELS = 100 * 28 * 28  # UI-TARS; OpenCUA and Fara use 3136 (= 4 * 28 * 28)
QWEN_MAX_PIXELS = 16384 * 28 * 28
QWEN_MAX_RATIO = 200  # a longer side over 200 times the shorter one is refused


class Size(NamedTuple):
    width: int
    height: int


class Point(NamedTuple):
    x: float
    y: float


def smart_resize(
    size: tuple[int, int],
    *,
    factor: int = QWEN_FACTOR,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
) -> Size:
    """The model space Qwen2.5-VL sees for an image of ``size`` (width, height).

    Each side is rounded to the nearest multiple of ``factor`` (Python's ``round``: half to
    even), at least ``factor``; when that makes too many pixels both sides shrink by one ratio and
    round down, when too few they grow and round up. The same arithmetic as the ``ui-tars``
    package's own function (a test compares the two), written here so that the agents that
    need it parse without that package installed.

    Raises:
        ValueError: a side is not positive, or the aspect ratio is over 200.
    """
    width, height = size
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    ratio = max(width, height) / min(width, height)
    if ratio > QWEN_MAX_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {QWEN_MAX_RATIO}, got {ratio}"
        )
    w_bar = max(factor, round(width / factor) * factor)
    h_bar = max(factor, round(height / factor) * factor)
    if w_bar * h_bar > max_pixels:
        shrink = math.sqrt(width * height / max_pixels)
        w_bar = math.floor(width / shrink / factor) * factor
        h_bar = math.floor(height / shrink / factor) * factor
    elif w_bar * h_bar < min_pixels:
        grow = math.sqrt(min_pixels / (width * height))
        w_bar = math.ceil(width * grow / factor) * factor
        h_bar = math.ceil(height * grow / factor) * factor
    return Size(w_bar, h_bar)


def scale(point: tuple[float, float], source: tuple[int, int], target: tuple[int, int]) -> Point:
    """Map a point from one space to another of the same picture, e.g. model space → page.

    Args:
        point: (x, y) in ``source``.
        source: the (width, height) the point is expressed in.
        target: the (width, height) to express it in.

    Raises:
        ValueError: a coordinate is not a finite number.
    """
    x, y = point
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"coordinates must be finite numbers, got ({x}, {y})")
    return Point(x * target[0] / source[0], y * target[1] / source[1])


def finite_number(value: object) -> TypeGuard[int | float]:
    """Whether a value a model wrote (decoded JSON or a literal) is a finite number; a bool is
    not one, though Python counts it as an int."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def model_point(value: object) -> Point:
    """A tool call's ``coordinate`` argument, ``[x, y]`` in the model's space, as a point.

    Raises:
        AgentParseError: it is not a list of two finite numbers.
    """
    if not isinstance(value, list | tuple) or len(value) != 2 or not all(map(finite_number, value)):
        raise AgentParseError(f"coordinate must be [x, y] numbers: {one_line(repr(value), 80)}")
    return Point(float(value[0]), float(value[1]))
