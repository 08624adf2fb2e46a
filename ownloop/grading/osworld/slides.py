"""OSWorld's ``compare_pptx_files``: two presentations alike, over recorded ``.pptx`` bytes.

Read with python-pptx. Slides are paired in order (the number of slides must match), and on
each pair of slides the shapes are paired in order; each ``examine_*`` option turns one
comparison on or off, with OSWorld's defaults:

==============================  =====  ========================================================
option                          on     compares
==============================  =====  ========================================================
``examine_number_of_slides``    yes    the number of slides
``examine_note``                yes    each slide's speaker notes (stripped)
``examine_shape``               yes    each shape's left, top, width and height
``examine_image_size``          no     pictures' width and height, other shapes' geometry
``examine_modify_height``       no     the height of shapes without text (and of pictures),
                                       other shapes' geometry
``examine_text``                yes    each text shape's text, and each paragraph's
``examine_alignment``           yes    each paragraph's alignment
``examine_indent``              yes    each paragraph's level
``examine_font_name`` ...       yes    each run's font name, size, bold, italic, underline,
                                       RGB colour (when both have one) and strike-through
                                       (``examine_font_size``, ``_bold``, ``_italic``,
                                       ``_underline``, ``examine_color_rgb``,
                                       ``examine_strike_through``)
``examine_bullets``             yes    each slide's paragraphs' (level, bullet character, text,
                                       bullet colour), on slides with text runs
==============================  =====  ========================================================

OSWorld's ``examine_background_color`` compares nothing (the library call it uses sets no fill
and returns nothing, so both sides are always equal); ownloop reads it as on and compares
nothing either. The position options written for one task each (``examine_title_bottom_position``,
``examine_table_bottom_position``, ``examine_right_position``, ``examine_top_position``,
``examine_shape_for_shift_size``: they test fixed texts, slide numbers and offsets) are
unsupported: the metric names the option and gives no verdict.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from typing import Any

from ownloop.grading.osworld.errors import MetricUnsupported
from ownloop.grading.osworld.office import open_office_file

__all__ = ["compare_pptx_files"]

_METRIC = "compare_pptx_files"
_PICTURE = 13  # MSO_SHAPE_TYPE.PICTURE
_TASK_SPECIFIC = (
    "examine_title_bottom_position",
    "examine_table_bottom_position",
    "examine_right_position",
    "examine_top_position",
    "examine_shape_for_shift_size",
)
_DRAWING = "{http://schemas.openxmlformats.org/drawingml/2006/main}"


def _presentation(value: Any, what: str) -> Any:
    return open_office_file(
        value, what, _METRIC, "pptx", lambda pptx, f: pptx.Presentation(f), "a .pptx presentation"
    )


def _notes(slide: Any) -> str:
    return str(slide.notes_slide.notes_text_frame.text) if slide.has_notes_slide else ""


def _box(shape: Any) -> tuple[Any, Any, Any, Any]:
    return shape.left, shape.top, shape.width, shape.height


def _rgb(font: Any) -> Any:
    try:
        return font.color.rgb
    except AttributeError:  # no colour, or a theme colour: nothing to compare
        return None


def _strike(font: Any) -> str:
    return str(font._element.get("strike", "noStrike"))


def _bullets(slide: Any) -> list[tuple[str, str, str, str]]:
    root = ElementTree.fromstring(slide.part.blob)
    found = []
    for paragraph in root.iter(f"{_DRAWING}p"):
        properties = paragraph.find(f"{_DRAWING}pPr")
        level, char, colour = "(no properties)", "", ""
        if properties is not None:
            level = properties.get("lvl") or ""
            bullet = properties.find(f"{_DRAWING}buChar")
            char = (bullet.get("char") or "") if bullet is not None else ""
            tint = properties.find(f"{_DRAWING}buClr/{_DRAWING}srgbClr")
            colour = (tint.get("val") or "") if tint is not None else ""
        text = "".join(t.text or "" for t in paragraph.iter(f"{_DRAWING}t"))
        found.append((level, char, text, colour))
    return found


def _same_runs(one: Any, other: Any, on: Mapping[str, bool]) -> bool:
    for first, second in zip(one.runs, other.runs, strict=False):
        a, b = first.font, second.font
        pairs = (
            ("examine_font_name", a.name, b.name),
            ("examine_font_size", a.size, b.size),
            ("examine_font_bold", a.bold, b.bold),
            ("examine_font_italic", a.italic, b.italic),
            ("examine_font_underline", a.underline, b.underline),
            # python-pptx has no property for it: the run's XML attribute, absent = none
            ("examine_strike_through", _strike(a), _strike(b)),
        )
        if any(on[option] and x != y for option, x, y in pairs):
            return False
        colours = _rgb(a), _rgb(b)
        if on["examine_color_rgb"] and None not in colours and colours[0] != colours[1]:
            return False
    return True


def _same_shapes(one: Any, other: Any, on: Mapping[str, bool]) -> bool:
    if on["examine_shape"] and _box(one) != _box(other):
        return False
    pictures = one.shape_type == _PICTURE and other.shape_type == _PICTURE
    if on["examine_image_size"]:
        if pictures and (one.width, one.height) != (other.width, other.height):
            return False
        if not pictures and _box(one) != _box(other):
            return False
    if on["examine_modify_height"]:
        textless = not one.has_text_frame and not other.has_text_frame
        if (textless or pictures) and one.height != other.height:
            return False
        if not (textless or pictures) and _box(one) != _box(other):
            return False
    if not (one.has_text_frame and other.has_text_frame):
        return True
    if on["examine_text"] and one.text.strip() != other.text.strip():
        return False
    paragraphs = zip(one.text_frame.paragraphs, other.text_frame.paragraphs, strict=False)
    for first, second in paragraphs:
        if on["examine_alignment"] and first.alignment != second.alignment:
            return False
        if on["examine_text"] and first.text != second.text:
            return False
        if on["examine_indent"] and first.level != second.level:
            return False
        if not _same_runs(first, second, on):
            return False
    return True


def _has_runs(slide: Any) -> bool:
    return any(
        paragraph.runs
        for shape in slide.shapes
        if shape.has_text_frame
        for paragraph in shape.text_frame.paragraphs
    )


_DEFAULTS = {
    "examine_number_of_slides": True,
    "examine_shape": True,
    "examine_text": True,
    "examine_indent": True,
    "examine_font_name": True,
    "examine_font_size": True,
    "examine_font_bold": True,
    "examine_font_italic": True,
    "examine_color_rgb": True,
    "examine_font_underline": True,
    "examine_strike_through": True,
    "examine_alignment": True,
    "examine_image_size": False,
    "examine_modify_height": False,
    "examine_bullets": True,
    "examine_note": True,
}


def compare_pptx_files(result: Any, expected: Any, options: Mapping[str, Any]) -> float:
    """1 when the presentations agree on everything the options examine, else 0."""
    for option in _TASK_SPECIFIC:
        if options.get(option):
            raise MetricUnsupported(f"{_METRIC} option {option}")
    on = {option: bool(options.get(option, default)) for option, default in _DEFAULTS.items()}
    mine = _presentation(result, "result file")
    theirs = _presentation(expected, "expected file")
    if on["examine_number_of_slides"] and len(mine.slides) != len(theirs.slides):
        return 0.0
    for one, other in zip(mine.slides, theirs.slides, strict=False):
        if on["examine_note"] and _notes(one).strip() != _notes(other).strip():
            return 0.0
        for first, second in zip(one.shapes, other.shapes, strict=False):
            if not _same_shapes(first, second, on):
                return 0.0
        both_have_runs = _has_runs(one) and _has_runs(other)
        if on["examine_bullets"] and both_have_runs and _bullets(one) != _bullets(other):
            return 0.0
    return 1.0
