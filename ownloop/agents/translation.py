"""Agent-neutral actions → the Playwright operations that carry them out.

The mapping is the same for every model; what differs (wheel notch size, drag steps, whether a
literal backslash-n submits typed text) is a ``TranslationStyle`` each agent fills from its own
options. Translation is pure: the recorder executes the operations and records each one, so a
replay can run them again exactly or re-translate the recorded actions with newer code.
"""

from __future__ import annotations

import math
from urllib.parse import quote_plus

import msgspec

from ownloop.agents.keys import combo, to_playwright
from ownloop.store import events

__all__ = ["TranslationStyle", "translate_action"]


class TranslationStyle(msgspec.Struct, frozen=True, kw_only=True):
    """The per-agent knobs of translation."""

    notch_px: float = 100.0  # wheel delta of one scroll notch, in CSS pixels
    drag_steps: int = 20  # intermediate mouse moves between press and release
    literal_newline_submits: bool = False  # a trailing backslash-n (two characters) means Enter
    search_url: str = "https://www.bing.com/search?q={query}"
    tab_is_text: bool = False  # a tab in typed text goes in as a character (the text is pasted)


def translate_action(action: events.Action, style: TranslationStyle) -> tuple[events.Op, ...]:
    """The browser operations for one action; none for finish, call_user, fail, memorize and
    rejected.

    Scrolling sends one wheel event per notch, as a physical wheel (and pyautogui.scroll on
    X11, which the models' harnesses drive) does: pages that react to each wheel event, such as
    carousels, then see what they would see from a person. A fractional amount ends with a
    partial notch.

    Raises:
        UnknownKeyError: a key action names a key Playwright does not know.
    """
    match action:
        case events.Click():
            return (
                events.MouseClick(
                    x=action.x, y=action.y, button=action.button, click_count=action.count
                ),
            )
        case events.Move():
            return (events.MouseMove(x=action.x, y=action.y),)
        case events.Drag():
            return (
                events.MouseMove(x=action.x, y=action.y),
                events.MouseDown(),
                events.MouseMove(x=action.x2, y=action.y2, steps=max(1, style.drag_steps)),
                events.MouseUp(),
            )
        case events.Scroll():
            return _scroll(action, style)
        case events.TypeText():
            return _type(action.text, style)
        case events.Hotkey():
            return (events.KeyboardPress(key=combo(action.keys)),)
        case events.KeyDown():
            return (events.KeyboardDown(key=to_playwright(action.key)),)
        case events.KeyUp():
            return (events.KeyboardUp(key=to_playwright(action.key)),)
        case events.Wait():
            return (events.Sleep(seconds=action.seconds),)
        case events.Goto():
            return (events.PageGoto(url=action.url),)
        case events.Back():
            return (events.PageGoBack(),)
        case events.Search():
            return (events.PageGoto(url=style.search_url.format(query=quote_plus(action.query))),)
        case events.ButtonDown() | events.ButtonUp():
            return _button(action)
        case (
            events.Memorize()
            | events.Finish()
            | events.CallUser()
            | events.Fail()
            | events.Rejected()
        ):
            return ()
    raise TypeError(f"not an action: {type(action).__name__}")


def _button(action: events.ButtonDown | events.ButtonUp) -> tuple[events.Op, ...]:
    # Without a point the button acts wherever the pointer is, as Playwright's mouse tracks it.
    ops: list[events.Op] = []
    if action.x is not None and action.y is not None:
        ops.append(events.MouseMove(x=action.x, y=action.y))
    if isinstance(action, events.ButtonDown):
        ops.append(events.MouseDown(button=action.button))
    else:
        ops.append(events.MouseUp(button=action.button))
    return tuple(ops)


def _scroll(action: events.Scroll, style: TranslationStyle) -> tuple[events.Op, ...]:
    ops: list[events.Op] = []
    if action.x is not None and action.y is not None:
        ops.append(events.MouseMove(x=action.x, y=action.y))
    if action.unit == "px":
        deltas = [action.amount] if action.amount > 0 else []
    else:
        whole = math.floor(action.amount) if action.amount > 0 else 0
        deltas = [style.notch_px] * whole
        rest = action.amount - whole
        if rest > 1e-9:
            deltas.append(rest * style.notch_px)
    sign = -1.0 if action.direction in ("up", "left") else 1.0
    horizontal = action.direction in ("left", "right")
    for delta in deltas:
        d = sign * delta
        ops.append(
            events.MouseWheel(dx=d, dy=0.0) if horizontal else events.MouseWheel(dx=0.0, dy=d)
        )
    return tuple(ops)


def _type(text: str, style: TranslationStyle) -> tuple[events.Op, ...]:
    # The prompt says "use \n at the end of content to submit": strip it and press Enter, so the
    # submit is one explicit operation and never a second one on top of a typed newline.
    submit = False
    if text.endswith("\n"):
        text, submit = text[:-1].removesuffix("\r"), True
    elif style.literal_newline_submits and text.endswith("\\n"):
        text, submit = text[:-2], True
    ops: list[events.Op] = []
    if text and style.tab_is_text and "\t" in text:
        # As a paste (ui-tars' input_swap): the tab is inserted; the rest is typed as ever.
        for index, part in enumerate(text.split("\t")):
            if index:
                ops.append(events.KeyboardType(text="\t", paste=True))
            if part:
                ops.append(events.KeyboardType(text=part))
    elif text:
        ops.append(events.KeyboardType(text=text))
    if submit:
        ops.append(events.KeyboardPress(key="Enter"))
    return tuple(ops)
