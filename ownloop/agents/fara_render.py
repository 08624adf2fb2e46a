"""Agent-neutral actions → the one Fara-7B tool call that parses back to them.

The inverse of ``fara7b``'s parser, used by the scripted expert and by round-trip tests. Fara
writes one action per response, so a step must be one of the action groups its parser makes:
a click; a move; click + [select-all + Backspace] + type + [Enter] (one ``type`` call); key
downs then the same keys up in reverse (one ``key`` call; a ``Hotkey`` is accepted too); a
scroll at the pointer; wait, goto, search, back, memorize, finish or fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ownloop.agents.coordinates import Size, scale
from ownloop.store import events

__all__ = ["render_call"]

_CLEAR = (events.Hotkey(keys=("ControlOrMeta", "A")), events.Hotkey(keys=("Backspace",)))
_ENTER = events.Hotkey(keys=("Enter",))


def render_call(
    thought: str, actions: Sequence[events.Action], image: Size, model: Size
) -> tuple[str, dict[str, Any]]:
    """(thoughts, tool-call arguments) for ``actions`` in page coordinates of ``image``.

    Raises:
        ValueError: the actions are not one Fara action.
    """
    actions = [_bare(action) for action in actions]
    if not actions:
        raise ValueError("nothing to render: no actions")
    first = actions[0]
    if isinstance(first, events.Click) and len(actions) > 1:
        return thought, _type_call(actions, image, model)
    if isinstance(first, events.KeyDown):
        return thought, {"action": "key", "keys": _held_keys(actions)}
    if len(actions) != 1:
        raise ValueError(f"fara7b writes one action per response, not {len(actions)}")
    match first:
        case events.Click(button="left", count=1):
            return thought, {"action": "left_click", "coordinate": _at(first, image, model)}
        case events.Move():
            return thought, {"action": "mouse_move", "coordinate": _at(first, image, model)}
        case events.Hotkey():
            return thought, {"action": "key", "keys": list(first.keys)}
        case events.Scroll(direction="up" | "down", x=None, y=None):
            size = first.amount if first.unit == "px" else first.amount * 100
            pixels = max(1, round(size))
            return thought, {
                "action": "scroll",
                "pixels": pixels if first.direction == "up" else -pixels,
            }
        case events.Wait():
            return thought, {"action": "wait", "time": first.seconds}
        case events.Goto():
            return thought, {"action": "visit_url", "url": first.url}
        case events.Search():
            return thought, {"action": "web_search", "query": first.query}
        case events.Back():
            return thought, {"action": "history_back"}
        case events.Memorize():
            return thought, {"action": "pause_and_memorize_fact", "fact": first.fact}
        case events.Finish():
            return first.answer or thought, {"action": "terminate", "status": "success"}
        case events.Fail():
            return first.reason or thought, {"action": "terminate", "status": "failure"}
        case events.TypeText():
            raise ValueError("fara7b types only at a point: give the field's Click first")
    raise ValueError(f"fara7b cannot express this action: {type(first).__name__}")


def _bare(action: events.Action) -> events.Action:
    """The action without raw text or model coordinates, for comparing with patterns."""
    fields = {"raw": ""}
    for name in ("model_x", "model_y", "model_x2", "model_y2"):
        if hasattr(action, name):
            fields[name] = None  # type: ignore[assignment]
    return msgspec.structs.replace(action, **fields)


def _at(action: events.Click | events.Move, image: Size, model: Size) -> list[int]:
    point = scale((action.x, action.y), image, model)
    return [round(point.x), round(point.y)]


def _type_call(actions: list[events.Action], image: Size, model: Size) -> dict[str, Any]:
    click, rest = actions[0], actions[1:]
    assert isinstance(click, events.Click)
    if click.button != "left" or click.count != 1:
        raise ValueError("fara7b's type clicks once with the left button")
    clear = tuple(rest[:2]) == _CLEAR
    if clear:
        rest = rest[2:]
    enter = bool(rest) and rest[-1] == _ENTER
    if enter:
        rest = rest[:-1]
    if len(rest) != 1 or not isinstance(rest[0], events.TypeText):
        raise ValueError("fara7b writes one action per response: click then type, or one action")
    return {
        "action": "type",
        "coordinate": _at(click, image, model),
        "text": rest[0].text,
        "press_enter": enter,
        "delete_existing_text": clear,
    }


def _held_keys(actions: list[events.Action]) -> list[str]:
    half = len(actions) // 2
    downs, ups = actions[:half], actions[half:]
    keys = [a.key for a in downs if isinstance(a, events.KeyDown)]
    released = [a.key for a in ups if isinstance(a, events.KeyUp)]
    if len(actions) % 2 or len(keys) != half or released != keys[::-1]:
        raise ValueError("fara7b's key holds keys down in order and releases them in reverse")
    return keys
