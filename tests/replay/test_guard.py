"""The guard's two comparisons: an element against the recorded one, and a screenshot's region
around the target against the recorded screenshot (real PNGs made with Pillow)."""

from __future__ import annotations

import io

import pytest
from PIL import Image, ImageDraw

from ownloop.replay.guard import PERCEPTUAL_TOLERANCE, element_difference, perceptual_distance
from ownloop.store.events import Element

SAVE = Element(
    tag="button",
    id="save",
    role="button",
    name="Save",
    text="Save",
    css_path="button#save",
    bbox=(10.0, 10.0, 120.0, 40.0),
)
BOX = Element(tag="div", css_path="body > div:nth-of-type(2)", bbox=(0.0, 0.0, 100.0, 100.0))


@pytest.mark.parametrize(
    ("found", "reason"),
    [
        (SAVE, ""),
        (
            Element(
                tag="button",
                role="button",
                name="Save",
                text="Save",
                css_path="form > button",
                bbox=(600.0, 300.0, 120.0, 40.0),
            ),
            "",
        ),  # moved, same element: the same target
        (None, "no element there"),
        (Element(tag="div", name="Banner", text="Banner"), "div 'Banner' is there instead"),
        (
            Element(tag="button", role="button", name="Cancel", text="Cancel"),
            "its name 'Save' is now 'Cancel'",
        ),
        (
            Element(tag="button", role="button", name="Save", text="Save!"),
            "its text 'Save' is now 'Save!'",
        ),
    ],
)
def test_a_named_element_is_told_by_tag_role_name_and_text(
    found: Element | None, reason: str
) -> None:
    assert element_difference(SAVE, found) == reason


def test_an_unnamed_element_is_told_by_its_css_path_and_size() -> None:
    assert element_difference(BOX, BOX) == ""
    moved = Element(tag="div", css_path="body > div:nth-of-type(3)", bbox=(0, 0, 100, 100))
    assert element_difference(BOX, moved) == (
        "its css path 'body > div:nth-of-type(2)' is now 'body > div:nth-of-type(3)'"
    )
    resized = Element(tag="div", css_path=BOX.css_path, bbox=(0.0, 0.0, 100.0, 300.0))
    assert element_difference(BOX, resized).startswith("its box ")


def _png(draw_box: tuple[int, int, int, int] | None = None, caret: bool = False) -> bytes:
    image = Image.new("RGB", (400, 300), "white")
    pen = ImageDraw.Draw(image)
    pen.rectangle((100, 100, 180, 140), fill="navy")  # the button clicked at (140, 120)
    if draw_box is not None:
        pen.rectangle(draw_box, fill="red")
    if caret:
        pen.line((150, 105, 150, 125), fill="white")
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def test_perceptual_distance_sees_the_target_region_only() -> None:
    recorded = _png()
    assert perceptual_distance(recorded, recorded, (140, 120)) == 0.0
    # A blinking caret on the button stays under the tolerance.
    assert perceptual_distance(recorded, _png(caret=True), (140, 120)) <= PERCEPTUAL_TOLERANCE
    # A change far from the target does not count there, but does on the whole page.
    far = _png((330, 230, 390, 290))
    assert perceptual_distance(recorded, far, (140, 120)) == 0.0
    assert perceptual_distance(recorded, far) > 0.0
    # Something drawn over the target does.
    assert perceptual_distance(recorded, _png((110, 100, 170, 140)), (140, 120)) > 0.05


def test_pictures_of_other_sizes_are_as_far_apart_as_can_be() -> None:
    small = io.BytesIO()
    Image.new("RGB", (200, 100), "white").save(small, "PNG")
    assert perceptual_distance(_png(), small.getvalue(), (10, 10)) == 1.0
