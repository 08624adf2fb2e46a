"""Our smart_resize (a core install parses without ``ui-tars``) agrees with the package's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ownloop.agents.coordinates import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, smart_resize

action_parser = pytest.importorskip("ui_tars.action_parser")

sides = st.integers(min_value=1, max_value=20_000)


@settings(max_examples=2000, deadline=None)
@given(
    width=sides,
    height=sides,
    min_pixels=st.sampled_from([QWEN_MIN_PIXELS, 3136, 28 * 28]),
    max_pixels=st.sampled_from([QWEN_MAX_PIXELS, 1280 * 28 * 28, 2_000_000]),
)
@pytest.mark.slow
def test_smart_resize_is_the_packages(
    width: int, height: int, min_pixels: int, max_pixels: int
) -> None:
    try:
        theirs = action_parser.smart_resize(
            height, width, factor=28, min_pixels=min_pixels, max_pixels=max_pixels
        )
    except ValueError:
        with pytest.raises(ValueError, match="aspect ratio"):
            smart_resize((width, height), min_pixels=min_pixels, max_pixels=max_pixels)
        return
    ours = smart_resize((width, height), min_pixels=min_pixels, max_pixels=max_pixels)
    assert (ours.height, ours.width) == theirs


@pytest.mark.parametrize(
    "size",
    [(1280, 800), (1920, 1080), (28, 28), (1, 1), (100, 1), (3000, 15), (5600, 28), (200, 1)],
)
def test_smart_resize_edges_are_the_packages(size: tuple[int, int]) -> None:
    width, height = size
    theirs = action_parser.smart_resize(height, width)
    ours = smart_resize(size)
    assert (ours.height, ours.width) == theirs
