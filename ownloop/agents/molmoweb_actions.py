"""MolmoWeb's JSON actions: reading a response, mapping it to agent-neutral actions, writing one.

The rules follow the released agent (``allenai/molmoweb``: ``agent/multimodal_agent.py`` and the
pydantic classes of ``agent/actions.py``) without running it:

- ``json.loads`` of the stripped text; an object with an ``action`` dict (and a ``thought``
  string) or a bare action with a ``name``.
- x/y are 0-100 percent of the screenshot: ``round(p/100*side, 1)`` clamped to [1, side-2];
  scroll deltas are percent too, not clamped. ``gemini_type_text_at`` writes 0-1000.
- Text that is not such JSON (or JSON followed by more text) is what the released agent turns
  into ``report_infeasible`` ("Unparseable model output: ..."): ``read_response`` raises
  ``Unparseable`` with the released exception text, and the agent makes it a ``Rejected`` no-op
  (or, with ``resample_non_json``, a parse error that is re-sampled).
- A field the released classes would refuse (a button other than left/right/middle, text that
  is not a string, a number that is not one) is a parse error (the released client retries the
  prediction); an action the released agent turns into ``report_infeasible`` (unknown name, a
  key outside ``ALLOWED_KEYS``) becomes ``Rejected``, and the model's own ``report_infeasible``
  becomes ``Fail``: both do nothing and, as there, neither ends the episode.
- ``click``'s ``button`` is checked as the released class checks it, but the released executor
  always clicks the left button (``page.mouse.click(x, y)``); so does ownloop unless
  ``honour_button``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, NamedTuple, cast

from ownloop.agents.base import AgentParseError, clip
from ownloop.agents.keys import combo, split_combo
from ownloop.store import events

__all__ = [
    "ALLOWED_KEYS",
    "MAX_RESPONSE_CHARS",
    "Reading",
    "Unparseable",
    "action_dict",
    "actions_of",
    "read_response",
    "unparseable",
]

ALLOWED_KEYS = (
    "Enter",
    "Escape",
    "Backspace",
    "Tab",
    "ArrowUp",
    "ArrowDown",
    "ArrowLeft",
    "ArrowRight",
    "ControlOrMeta+a",
    "ControlOrMeta+c",
    "ControlOrMeta+v",
    "F5",
)
"""The only keys keyboard_press may name (case-insensitive); others become report_infeasible."""

MAX_RESPONSE_CHARS = 32_000
"""1024 tokens are about 4,000 characters; longer text is refused before it is decoded."""

_MESSAGE_LIMIT = 1000  # the released agent cuts send_msg_to_user messages to this length
_BUTTONS = ("left", "right", "middle")
_NOOP_REASONS = ("loading", "captcha", "unsupported_keypress", "retrying_after_api_error")
_NAV_TYPES = ("go_back", "new_tab", "tab_focus")
_TRUE = {"true", "t", "yes", "y", "on", "1"}
_FALSE = {"false", "f", "no", "n", "off", "0"}
Button = Literal["left", "right", "middle"]


class Unparseable(AgentParseError):
    """A response the released agent cannot read and turns into ``report_infeasible``.

    Attributes:
        reason: the released agent's exception text for it (its "Could not parse predicted
            action: <reason>" thought).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class Reading(NamedTuple):
    """A response as the released agent keeps it in its history."""

    thought: str
    action: dict[str, Any]  # as json.loads gave it, with the released agent's two adjustments


def read_response(text: str) -> Reading:
    """The thought and the action dict of a response.

    Raises:
        Unparseable: not a JSON object with ``action`` or ``name`` (the released agent's
            ``report_infeasible``).
        AgentParseError: the action is not an object, or an adjustment failed.
    """
    if len(text) > MAX_RESPONSE_CHARS:
        raise AgentParseError(
            f"response too long ({len(text)} characters; the limit is {MAX_RESPONSE_CHARS})"
        )
    try:
        data = json.loads(text)
    except RecursionError:
        raise Unparseable(
            "response is not JSON: nested too deeply", "maximum recursion depth exceeded"
        ) from None
    except ValueError as error:
        raise Unparseable(f"response is not JSON: {error}", str(error)) from None
    try:
        # The released agent's own reading, on JSON data only: its exception text is kept.
        if "action" in data:
            action, thought = data["action"], data.get("thought", "")
        elif "name" in data:
            action, thought = data, ""
        else:
            raise ValueError("Expected 'action' or 'name' key in parsed JSON but didnt get it.")
    except (TypeError, AttributeError, KeyError, ValueError) as error:
        what = (
            f"a JSON {type(data).__name__}, not an object"
            if not isinstance(data, dict)
            else "an object with neither 'action' nor 'name'"
        )
        raise Unparseable(f"response is {what}", str(error)) from None
    if not isinstance(action, dict):
        raise AgentParseError(f"'action' is a JSON {type(action).__name__}, not an object")
    if not isinstance(thought, str):
        raise AgentParseError(f"'thought' is a JSON {type(thought).__name__}, not a string")
    action = dict(action)
    if action.get("name") == "gemini_type_text_at" and "x" in action and "y" in action:
        for axis in ("x", "y"):  # written in 0-1000; the released agent divides by 10
            value = action[axis]
            if not isinstance(value, int | float):
                raise AgentParseError(f"gemini_type_text_at {axis} is not a number: {value!r}")
            action[axis] = value / 10.0
    if action.get("name") == "send_msg_to_user":
        msg = action.get("msg", "")
        if not isinstance(msg, str):
            raise AgentParseError("send_msg_to_user msg is not a string")
        action["msg"] = _truncate(msg, _MESSAGE_LIMIT)
    return Reading(thought, action)


def unparseable(text: str, reason: str) -> Reading:
    """What the released agent keeps for a response it cannot read (``reason``: its exception
    text, ``Unparseable.reason``)."""
    return Reading(
        f"Could not parse predicted action: {reason}",
        {"name": "report_infeasible", "infeasibility_reason": f"Unparseable model output: {text}"},
    )


def actions_of(
    reading: Reading,
    raw: str,
    size: tuple[int, int],
    *,
    noop_s: float = 5.0,
    honour_button: bool = False,
) -> tuple[events.Action, ...]:
    """The agent-neutral actions of one response, in page pixels of a screenshot of ``size``.

    Args:
        honour_button: click with the ``button`` the model names; False clicks left, as the
            released executor does.

    Raises:
        AgentParseError: a field the released action classes would refuse.
    """
    action = reading.action
    name = action.get("name")
    width, height = size

    def at(key_x: str, key_y: str) -> tuple[float, float, float, float]:
        px, py = _number(action, key_x, 0.0), _number(action, key_y, 0.0)
        return _coord(px, width), _coord(py, height), px, py

    if name in ("click", "dblclick", "mouse_click"):
        x, y, mx, my = at("x", "y")
        button = action.get("button", "left")
        if button not in _BUTTONS:
            raise AgentParseError(f"click button must be left, right or middle: {button!r}")
        # Only the name makes a double click: the released agent ignores click_type.
        pressed = cast(Button, button) if honour_button else "left"
        return (
            events.Click(
                x=x,
                y=y,
                button=pressed,
                count=2 if name == "dblclick" else 1,
                model_x=mx,
                model_y=my,
                raw=raw,
            ),
        )
    if name == "hover_at":
        x, y, mx, my = at("x", "y")
        duration = _number(action, "duration", 1.0)
        # A negative sleep returns at once in the released loop: the pointer moves, no wait.
        move = events.Move(x=x, y=y, model_x=mx, model_y=my, raw=raw)
        return (move, events.Wait(seconds=duration, raw=raw)) if duration > 0 else (move,)
    if name in ("drag_and_drop", "mouse_drag_and_drop"):
        x, y, mx, my = at("from_x", "from_y")
        x2, y2, mx2, my2 = at("to_x", "to_y")
        return (
            events.Drag(
                x=x, y=y, x2=x2, y2=y2, model_x=mx, model_y=my, model_x2=mx2, model_y2=my2, raw=raw
            ),
        )
    if name == "scroll":
        dx = _delta(_number(action, "delta_x", 0.0), width)
        dy = _delta(_number(action, "delta_y", 0.0), height)
        return _scrolls(dx, dy, raw, None)
    if name == "scroll_at":
        point = at("x", "y")
        dx = _delta(_number(action, "delta_x", 0.0), width)
        dy = _delta(_number(action, "delta_y", 0.0), height)
        return _scrolls(dx, dy, raw, point)
    if name in ("type", "keyboard_type"):
        return (events.TypeText(text=_string(action, "text", ""), raw=raw),)
    if name in ("keypress", "keyboard_press"):
        return (_keypress(action, raw),)
    if name == "gemini_type_text_at":
        return _type_at(action, raw, size)
    if name == "goto":
        url = _string(action, "url", "")
        if not url:
            raise AgentParseError("goto needs a url")
        return (events.Goto(url=url, raw=raw),)
    if name == "browser_nav":
        return (_browser_nav(action, raw),)
    if name == "noop":
        reason = action.get("noop_reason", "loading")
        if reason not in _NOOP_REASONS:
            raise AgentParseError(f"noop_reason must be one of {', '.join(_NOOP_REASONS)}")
        return (events.Wait(seconds=noop_s, raw=raw),)
    if name == "send_msg_to_user":
        msg = _string(action, "msg", "")
        if msg.startswith("[ANSWER]"):
            return (events.Finish(answer=msg[9:], raw=raw),)
        if msg.startswith("[EXIT]"):
            return (events.Finish(answer=None, raw=raw),)
        return (events.CallUser(text=msg, raw=raw),)
    if name == "report_infeasible":
        reason = _string(action, "infeasibility_reason", "Infeasibility reason unavailable")
        return (events.Fail(reason=reason, raw=raw),)
    return (
        events.Rejected(
            reason=clip(f"Unsupported action type: {name}. Predicted: {action}", 300), raw=raw
        ),
    )


def _scrolls(
    dx: float, dy: float, raw: str, point: tuple[float, float, float, float] | None
) -> tuple[events.Action, ...]:
    """One wheel of (dx, dy) px as Scroll actions: horizontal, then vertical (at the point
    first, then at the pointer, which is there by then)."""
    parts: list[tuple[Literal["up", "down", "left", "right"], float]] = []
    if dx:
        parts.append(("right" if dx > 0 else "left", abs(dx)))
    if dy:
        parts.append(("down" if dy > 0 else "up", abs(dy)))
    if not parts:
        parts.append(("down", 0.0))  # a wheel of nothing, as the released executor sends
    scrolls: list[events.Action] = []
    for index, (direction, amount) in enumerate(parts):
        if point is not None and index == 0:
            x, y, mx, my = point
            scrolls.append(
                events.Scroll(
                    direction=direction,
                    amount=amount,
                    unit="px",
                    x=x,
                    y=y,
                    model_x=mx,
                    model_y=my,
                    raw=raw,
                )
            )
        else:
            scrolls.append(events.Scroll(direction=direction, amount=amount, unit="px", raw=raw))
    return tuple(scrolls)


def _keypress(action: dict[str, Any], raw: str) -> events.Action:
    key = action.get("key")
    if key is not None and not isinstance(key, str):
        raise AgentParseError(f"keyboard_press key is not a string: {key!r}")
    allowed = {name.lower(): name for name in ALLOWED_KEYS}
    if key is None or key.lower() not in allowed:
        return events.Rejected(reason=clip(f"Unsupported keypress: {action}", 300), raw=raw)
    return events.Hotkey(keys=split_combo(allowed[key.lower()]), raw=raw)


def _type_at(action: dict[str, Any], raw: str, size: tuple[int, int]) -> tuple[events.Action, ...]:
    """Click, maybe select all and delete, type, maybe Enter: the released executor's order."""
    mx, my = _number(action, "x", 0.0), _number(action, "y", 0.0)
    text = _string(action, "text", "")
    press_enter = _boolean(action, "press_enter", True)
    clear = _boolean(action, "clear_before_typing", True)
    # The model wrote 0-1000, which read_response made percent when both x and y were given;
    # the action records what the model wrote.
    written = 10.0 if "x" in action and "y" in action else 1.0
    steps: list[events.Action] = [
        events.Click(
            x=_coord(mx, size[0]),
            y=_coord(my, size[1]),
            model_x=round(mx * written, 6),
            model_y=round(my * written, 6),
            raw=raw,
        )
    ]
    if clear:
        steps += [
            events.Hotkey(keys=("ControlOrMeta", "a"), raw=raw),
            events.Hotkey(keys=("Backspace",), raw=raw),
        ]
    if text:
        steps.append(events.TypeText(text=text, raw=raw))
    if press_enter:
        steps.append(events.Hotkey(keys=("Enter",), raw=raw))
    return tuple(steps)


def _browser_nav(action: dict[str, Any], raw: str) -> events.Action:
    nav = action.get("nav_type", "go_back")
    if nav not in _NAV_TYPES:
        raise AgentParseError(f"nav_type must be one of {', '.join(_NAV_TYPES)}: {nav!r}")
    index = action.get("index", -1)
    if isinstance(index, str):  # pydantic's lax mode reads "1" as 1, as the released loop does
        try:
            index = int(index.strip())
        except ValueError:
            raise AgentParseError(f"browser_nav index is not a whole number: {index!r}") from None
    if isinstance(index, bool) or not (
        isinstance(index, int) or (isinstance(index, float) and index.is_integer())
    ):
        raise AgentParseError(f"browser_nav index is not a whole number: {index!r}")
    if nav == "go_back":
        return events.Back(raw=raw)
    if nav == "new_tab":
        # ownloop follows the newest tab, so a new blank tab is a blank page to the model.
        return events.Goto(url="about:blank", raw=raw)
    return events.Rejected(reason="tab_focus: ownloop shows the model one tab, the newest", raw=raw)


# ---------------------------------------------------------------------- fields


def _number(action: dict[str, Any], key: str, default: float) -> float:
    """``float(value)`` as the released agent reads it (numbers and numeric strings), finite."""
    value = action.get(key, default)
    if not isinstance(value, int | float | str):
        raise AgentParseError(f"{key} is not a number: {clip(repr(value), 300)}")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise AgentParseError(f"{key} is not a number: {clip(repr(value), 300)}") from None
    if not math.isfinite(number):
        raise AgentParseError(f"{key} is not a finite number: {value!r}")
    return number


def _string(action: dict[str, Any], key: str, default: str) -> str:
    value = action.get(key, default)
    if not isinstance(value, str):
        raise AgentParseError(f"{key} is not a string: {clip(repr(value), 300)}")
    return value


def _boolean(action: dict[str, Any], key: str, default: bool) -> bool:
    """A bool as pydantic reads one: true/false, 0/1 and their usual spellings."""
    value = action.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise AgentParseError(f"{key} is not true or false: {clip(repr(value), 300)}")


def _coord(percent: float, side: int) -> float:
    """Percent → pixel, rounded to 0.1 and kept inside the viewport, as the released agent."""
    return max(1.0, min(round(percent / 100.0 * side, 1), side - 2.0))


def _delta(percent: float, side: int) -> float:
    return round(percent / 100.0 * side, 1)


def _truncate(text: str, limit: int, postfix: str = "... (truncated)") -> str:
    return text if len(text) <= limit else text[: limit - len(postfix)] + postfix


# ---------------------------------------------------------------------- writing


def _percent(value: float, side: int) -> float:
    return round(value / side * 100.0, 1)


def action_dict(action: events.Action, size: tuple[int, int]) -> dict[str, Any]:
    """The JSON action MolmoWeb would write for ``action`` (page pixels of ``size``).

    Raises:
        ValueError: an action this grammar cannot express.
    """
    width, height = size
    match action:
        case events.Click(count=1 | 2):
            body: dict[str, Any] = {
                "name": "click" if action.count == 1 else "dblclick",
                "x": _percent(action.x, width),
                "y": _percent(action.y, height),
                "button": action.button,
            }
            if action.count == 1:
                body["click_type"] = "single"
            return body
        case events.Move():
            return {
                "name": "hover_at",
                "x": _percent(action.x, width),
                "y": _percent(action.y, height),
            }
        case events.Drag():
            return {
                "name": "mouse_drag_and_drop",
                "from_x": _percent(action.x, width),
                "from_y": _percent(action.y, height),
                "to_x": _percent(action.x2, width),
                "to_y": _percent(action.y2, height),
            }
        case events.Scroll():
            pixels = action.amount if action.unit == "px" else action.amount * 100.0
            sign = -1.0 if action.direction in ("up", "left") else 1.0
            horizontal = action.direction in ("left", "right")
            dx = _percent(sign * pixels, width) if horizontal else 0.0
            dy = 0.0 if horizontal else _percent(sign * pixels, height)
            if action.x is None or action.y is None:
                return {"name": "scroll", "delta_x": dx, "delta_y": dy}
            return {
                "name": "scroll_at",
                "x": _percent(action.x, width),
                "y": _percent(action.y, height),
                "delta_x": dx,
                "delta_y": dy,
            }
        case events.TypeText():
            return {"name": "keyboard_type", "text": action.text}
        case events.Hotkey():
            key = combo(action.keys)
            allowed = {name.lower(): name for name in ALLOWED_KEYS}
            # ctrl+a, cmd+a: the model's one spelling is ControlOrMeta+a.
            for spelling in (
                key,
                *(
                    key.replace(m, "ControlOrMeta+", 1)
                    for m in ("Control+", "Meta+")
                    if key.startswith(m)
                ),
            ):
                if spelling.lower() in allowed:
                    return {"name": "keyboard_press", "key": allowed[spelling.lower()]}
            raise ValueError(f"molmoweb can only press {', '.join(ALLOWED_KEYS)}; not {key}")
        case events.Wait():
            return {"name": "noop", "noop_reason": "loading"}
        case events.Goto():
            return {"name": "goto", "url": action.url}
        case events.Back():
            return {"name": "browser_nav", "nav_type": "go_back", "index": -1}
        case events.Finish():
            msg = "[EXIT]" if action.answer is None else f"[ANSWER] {action.answer}"
            return {"name": "send_msg_to_user", "msg": msg}
        case events.CallUser():
            return {"name": "send_msg_to_user", "msg": action.text}
        case events.Fail():
            return {"name": "report_infeasible", "infeasibility_reason": action.reason}
    raise ValueError(f"molmoweb cannot express this action: {clip(repr(action), 80)}")
