"""UI-TARS-1.5-7B, as DESIGN §4 runs it: the released ``ui-tars`` package's prompt and parser.

Request: a system message "You are a helpful assistant.", the package's ``COMPUTER_USE_DOUBAO``
prompt, then every past response (with ``add_box_token`` re-inserting the box tokens the server
stripped) and, before the last few of them, their screenshots, then the current screenshot.

Parsing: the package's ``parse_action_to_structure_output`` (model type qwen25vl, the
screenshot's smart_resize space). It reads the action with ``ast.parse``, never ``eval``; it returns
boxes as strings such as ``"[0.5, 0.5, 0.5, 0.5]"`` (relative 0-1), which we read with
``json.loads``. Its pyautogui code generator is never used: our own translation
(``translation.py``) turns actions into Playwright operations.
"""

from __future__ import annotations

import json
import logging
import math
import re
import warnings
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, Literal, cast

import ui_tars.action_parser as _package
from ui_tars.prompt import COMPUTER_USE_DOUBAO

from ownloop.agents.base import (
    AgentParseError,
    Ending,
    LoopSettings,
    Observation,
    Parsed,
    PastStep,
    task_text,
)
from ownloop.agents.coordinates import Point, Size, scale, smart_resize
from ownloop.agents.keys import UnknownKeyError, combo, split_combo
from ownloop.agents.options import OptionCheck
from ownloop.agents.translation import TranslationStyle, translate_action
from ownloop.store.events import (
    Action,
    CallUser,
    Click,
    Drag,
    Fail,
    Finish,
    Hotkey,
    KeyDown,
    KeyUp,
    Message,
    Move,
    Op,
    Sampling,
    Scroll,
    Task,
    TextPart,
    TypeText,
    Wait,
)

__all__ = ["MAX_RESPONSE_CHARS", "PACKAGE_VERSION", "SYSTEM_MESSAGE", "UiTarsAgent"]

PACKAGE_VERSION = version("ui-tars")
SYSTEM_MESSAGE = "You are a helpful assistant."
MAX_RESPONSE_CHARS = 16_000
"""Longer responses are refused before the package's backtracking regexes see them (500 tokens
are about 2,000 characters; a runaway or hostile response must not stall a worker)."""

_PARSER_REVISION = 1  # bump when our side of parsing changes; recorded with every ActionParsed
_log = logging.getLogger(__name__)


def _log_instead_of_print(*args: object, **_: object) -> None:
    _log.debug("ui-tars: %s", " ".join(str(arg) for arg in args))


# The package prints a diagnostic to stdout for every action it cannot parse. Binding the name
# ``print`` in its module globals (looked up before builtins) sends those lines to our debug log.
# Unlike redirect_stdout, which swaps sys.stdout for the whole process while held, this touches no
# other thread's output, needs no lock, and only ever affects that one module.
_package.print = _log_instead_of_print
# Its ast.parse of model text (file name "<unknown>") warns about things like "1if" or "\d"
# (SyntaxWarning, DeprecationWarning) on stderr, in the middle of a progress bar. Filters are
# process-wide, so one is added once, here, rather than swapped in and out around each call
# (catch_warnings is not thread-safe); it matches only code compiled from a string without a
# file name.
for _category in (SyntaxWarning, DeprecationWarning):
    warnings.filterwarnings("ignore", category=_category, module=r"<unknown>\Z")
del _category

_BOX_TOKENS = re.compile(r"<\|box_(?:start|end)\|>")
# '[x1, y1, x2, y2]' boxes (seen from earlier UI-TARS models) → '(x1, y1, x2, y2)': the package
# only strips round brackets before reading the numbers.
_SQUARE_BOX = re.compile(r"""((?:start_|end_)?(?:box|point)=)(['"])\[([^\]'"\n]*)\]\2""")
_TYPE_CALL = re.compile(r"(\s*type\(content=')(.*)('\)\s*)", re.DOTALL)
_ACTION_LABEL = re.compile(r"Action:[ \t]*\n?[ \t]*")
_CLICKS: dict[str, tuple[Literal["left", "right"], int]] = {
    "click": ("left", 1),
    "left_single": ("left", 1),
    "left_double": ("left", 2),
    "right_single": ("right", 1),
}
_DIRECTIONS = ("up", "down", "left", "right")
Direction = Literal["up", "down", "left", "right"]


class UiTarsAgent:
    """The ``uitars`` agent; pure and thread-safe (it keeps no state between calls)."""

    name = "uitars"
    parser_name = "uitars"
    parser_version = f"ui-tars {PACKAGE_VERSION}/ownloop {_PARSER_REVISION}"
    prompt_source = f"package:ui-tars {PACKAGE_VERSION}"

    def __init__(
        self,
        *,
        viewport: tuple[int, int] | str = (1280, 800),
        frequency_penalty: float = 0.0,
        max_tokens: int = 500,
        images: int = 5,
        scroll_notches: float = 5,
        notch_px: float = 100,
        drag_steps: int = 20,
        wait_s: float = 5.0,
        language: str = "English",
    ) -> None:
        """Options, all recorded in RunStarted; the defaults follow DESIGN §4.

        Args:
            viewport: page size (width, height) or "WIDTHxHEIGHT".
            frequency_penalty: sent with every call (OSWorld sends 1).
            max_tokens: completion limit per call (OSWorld sends 1000).
            images: screenshots per request, the current one included.
            scroll_notches: wheel notches per scroll action.
            notch_px: pixels per wheel notch.
            drag_steps: mouse moves between press and release of a drag.
            wait_s: seconds a wait() action sleeps.
            language: the language the prompt asks thoughts in (OSWorld: "Chinese").

        Raises:
            OwnloopError: an option has the wrong type or is out of range.
        """
        check = OptionCheck(self.name)
        self.viewport = check.viewport(viewport)
        self.images = check.number("images", images, int)
        self.max_tokens = check.number("max_tokens", max_tokens, int)
        self.frequency_penalty = check.number("frequency_penalty", frequency_penalty, float)
        self.scroll_notches = check.number("scroll_notches", scroll_notches, float)
        self.notch_px = check.number("notch_px", notch_px, float)
        self.drag_steps = check.number("drag_steps", drag_steps, int)
        self.wait_s = check.number("wait_s", wait_s, float)
        check.that(self.images >= 1, "images must be at least 1 (the current screenshot)")
        check.that(self.max_tokens >= 1, "max_tokens must be at least 1")
        check.that(-2.0 <= self.frequency_penalty <= 2.0,
               "frequency_penalty must be between -2 and 2")
        check.that(self.scroll_notches > 0 and self.notch_px > 0,
               "scroll_notches and notch_px must be positive")
        check.that(self.drag_steps >= 1, "drag_steps must be at least 1")
        check.that(self.wait_s >= 0, "wait_s must not be negative")
        check.that(isinstance(language, str) and bool(language.strip()),
               "language must be a word, e.g. English")
        self.language = language
        self.settings = LoopSettings(
            viewport=self.viewport,
            sampling=Sampling(
                temperature=0.0,
                top_p=0.9,
                max_tokens=self.max_tokens,
                frequency_penalty=self.frequency_penalty,
            ),
            images=self.images,
            calls_per_step=4,  # the first call and 3 re-samples, as OSWorld's try_times=3
            resample_temperature=1.0,
            max_steps=40,
        )
        self._style = TranslationStyle(
            notch_px=self.notch_px, drag_steps=self.drag_steps, literal_newline_submits=True
        )

    def options(self) -> dict[str, str | int | float | bool | None]:
        """The agent's own settings, recorded in RunStarted."""
        return {
            "viewport": f"{self.viewport[0]}x{self.viewport[1]}",
            "frequency_penalty": self.frequency_penalty,
            "max_tokens": self.max_tokens,
            "images": self.images,
            "scroll_notches": self.scroll_notches,
            "notch_px": self.notch_px,
            "drag_steps": self.drag_steps,
            "wait_s": self.wait_s,
            "language": self.language,
        }

    # ------------------------------------------------------------------ request

    def prompt(self, task: Task) -> str:
        """The package's COMPUTER_USE_DOUBAO prompt for ``task``."""
        template: str = COMPUTER_USE_DOUBAO
        return template.format(language=self.language, instruction=task_text(task))

    def build_messages(
        self, task: Task, history: Sequence[PastStep], now: Observation
    ) -> tuple[Message, ...]:
        """System, prompt, the past responses (screenshots only before the last images-1 of
        them, so at most ``images`` in all), then the current screenshot."""
        messages = [
            Message(role="system", parts=(TextPart(text=SYSTEM_MESSAGE),)),
            Message(role="user", parts=(TextPart(text=self.prompt(task)),)),
        ]
        first_with_image = len(history) - (self.images - 1)
        for index, past in enumerate(history):
            if index >= first_with_image:
                messages.append(Message(role="user", parts=(past.observation.screenshot,)))
            text = _package.add_box_token(past.response)
            messages.append(Message(role="assistant", parts=(TextPart(text=text),)))
        messages.append(Message(role="user", parts=(now.screenshot,)))
        return tuple(messages)

    # ------------------------------------------------------------------ response

    def parse(
        self, text: str, image_size: tuple[int, int], history: Sequence[PastStep] | None = None
    ) -> Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height).

        Raises:
            AgentParseError: whatever went wrong, in one line; nothing else escapes.
        """
        try:
            return self._parse(text, Size(*image_size))
        except AgentParseError:
            raise
        except Exception as error:  # the package raises any type on garbage, by design or not
            if isinstance(error, AttributeError) and "lstrip" in str(error):
                # It calls .lstrip() on every argument value: a name, a number or a call.
                raise AgentParseError("an argument is not a quoted string") from error
            reason = _one_line(f"{type(error).__name__}: {error}")
            raise AgentParseError(f"ui-tars parser failed: {reason}") from error

    def _parse(self, text: str, image: Size) -> Parsed:
        if not isinstance(text, str):
            raise AgentParseError(f"response is {type(text).__name__}, not text")
        if len(text) > MAX_RESPONSE_CHARS:
            raise AgentParseError(
                f"response too long ({len(text)} characters; the limit is {MAX_RESPONSE_CHARS})"
            )
        text = text.strip()
        # The package asserts this, and `python -O` strips asserts.
        if "Action:" not in text:
            raise AgentParseError("no 'Action:' in the response")
        model = smart_resize(image)
        normalized = _normalize(text)
        if not normalized.rpartition("Action: ")[2].strip():
            raise AgentParseError("no action after 'Action:'")
        items = _package.parse_action_to_structure_output(
            normalized, 1000, image.height, image.width, model_type="qwen25vl"
        )
        if not items:
            raise AgentParseError("no action after 'Action:'")
        raws = _action_texts(text, len(items))
        actions = tuple(
            self._action(item, raw, image, model) for item, raw in zip(items, raws, strict=True)
        )
        first = items[0]
        thought = str(first.get("thought") or "")
        if first.get("reflection"):
            thought = f"Reflection: {first['reflection']}\nAction_Summary: {thought}"
        return Parsed(thought=thought, actions=actions, model_size=(model.width, model.height))

    def _action(self, item: dict[str, Any], raw: str, image: Size, model: Size) -> Action:
        name = item.get("action_type")
        inputs: dict[str, Any] = item.get("action_inputs") or {}
        if not isinstance(name, str):
            raise AgentParseError(f"not an action call: {_clip(raw)}")
        if name in _CLICKS:
            button, count = _CLICKS[name]
            page, at = _point(inputs, "start_box", name, image, model)
            return Click(x=page.x, y=page.y, button=button, count=count,
                         model_x=at.x, model_y=at.y, raw=raw)
        if name == "hover":
            page, at = _point(inputs, "start_box", name, image, model)
            return Move(x=page.x, y=page.y, model_x=at.x, model_y=at.y, raw=raw)
        if name in ("drag", "select"):
            page, at = _point(inputs, "start_box", name, image, model)
            page2, at2 = _point(inputs, "end_box", name, image, model)
            return Drag(x=page.x, y=page.y, x2=page2.x, y2=page2.y, model_x=at.x, model_y=at.y,
                        model_x2=at2.x, model_y2=at2.y, raw=raw)
        if name in ("hotkey", "press"):
            return Hotkey(keys=_keys(inputs, ("key", "hotkey", "press"), name), raw=raw)
        if name in ("keydown", "keyup", "release"):
            keys = _keys(inputs, ("key", "press"), name)
            if len(keys) != 1:
                raise AgentParseError(f"{name} takes one key, got {' '.join(keys)!r}")
            if name == "keydown":
                return KeyDown(key=keys[0], raw=raw)
            return KeyUp(key=keys[0], raw=raw)
        if name == "type":
            return TypeText(text=str(inputs.get("content", "")), raw=raw)
        if name == "scroll":
            return self._scroll(inputs, raw, image, model)
        if name == "wait":
            return Wait(seconds=self.wait_s, raw=raw)
        if name == "finished":
            content = inputs.get("content")  # the package drops '' and left-strips values
            return Finish(answer=str(content) if content else None, raw=raw)
        if name == "call_user":
            return CallUser(text=str(inputs.get("content", "")), raw=raw)
        raise AgentParseError(f"unknown action {name[:40]!r}")

    def _scroll(self, inputs: dict[str, Any], raw: str, image: Size, model: Size) -> Scroll:
        direction = str(inputs.get("direction", "")).strip().lower()
        if direction not in _DIRECTIONS:
            raise AgentParseError(f"scroll direction must be up, down, left or right: {_clip(raw)}")
        towards = cast(Direction, direction)
        if "start_box" not in inputs:  # at the pointer, wherever it is
            return Scroll(direction=towards, amount=self.scroll_notches, raw=raw)
        page, at = _point(inputs, "start_box", "scroll", image, model)
        return Scroll(direction=towards, amount=self.scroll_notches, x=page.x, y=page.y,
                      model_x=at.x, model_y=at.y, raw=raw)

    # ------------------------------------------------------------------ execution and end

    def translate(self, action: Action) -> tuple[Op, ...]:
        """The Playwright operations for one action (see ``translation.translate_action``)."""
        return translate_action(action, self._style)

    def ending(self, parsed: Parsed, history: Sequence[PastStep]) -> Ending | None:
        """finished(content=...) ends with the answer; call_user ends with status call_user."""
        for action in parsed.actions:
            if isinstance(action, Finish):
                return Ending("finished", "finished", action.answer)
            if isinstance(action, CallUser):
                return Ending("call_user", "call_user", None)
            if isinstance(action, Fail):
                return Ending("fail", "fail", None)
        return None

    # ------------------------------------------------------------------ the inverse of parse

    def render(self, thought: str, actions: Sequence[Action], image_size: tuple[int, int]) -> str:
        """The response UI-TARS-1.5 would write for ``actions`` (page coordinates of a
        screenshot of ``image_size``), points in its smart_resize space.

        Raises:
            ValueError: an action this grammar cannot express (goto, middle click, ...).
        """
        image = Size(*image_size)
        model = smart_resize(image)
        calls = [_render_call(action, image, model) for action in actions]
        if not calls:
            raise ValueError("nothing to render: no actions")
        head = f"Thought: {thought}\n" if thought else ""
        return head + "Action: " + "\n\n".join(calls)


# ---------------------------------------------------------------------- parsing helpers


def _normalize(text: str) -> str:
    """Repairs the package does not make: box tokens left in (it cannot read them), square
    boxes, 'Action:' followed by a newline instead of one space (it splits on 'Action: '), and
    a quote followed by ')' inside type(content='...') (its non-greedy regex ends the text there;
    we take the action's last "')" as the end, written as '\\x29' so the value is unchanged)."""
    text = _BOX_TOKENS.sub("", text)
    text = _SQUARE_BOX.sub(r"\1\2(\3)\2", text)
    if "Action: " not in text:
        head, _, tail = text.rpartition("Action:")
        text = head + "Action: " + tail.lstrip(" \t\n")
    head, label, tail = text.rpartition("Action: ")
    parts = tail.split(")\n\n")
    for index, part in enumerate(parts[:-1]):
        parts[index] = _repair_type(part + ")")[:-1]
    parts[-1] = _repair_type(parts[-1])
    return head + label + ")\n\n".join(parts)


def _repair_type(action: str) -> str:
    match = _TYPE_CALL.fullmatch(action)
    if match is None:
        return action
    start, content, end = match.groups()
    return start + content.replace("')", "'\\x29") + end


def _action_texts(text: str, count: int) -> list[str]:
    """Each action's text as the model wrote it, split the way the package splits them."""
    tail = _ACTION_LABEL.split(text)[-1]
    parts = tail.split(")\n\n")
    if len(parts) != count:
        return [tail] * count
    return [part if index == len(parts) - 1 else part + ")" for index, part in enumerate(parts)]


def _point(
    inputs: dict[str, Any], key: str, name: str, image: Size, model: Size
) -> tuple[Point, Point]:
    """(page point, model point) of a box: its centre when it has four numbers."""
    box = inputs.get(key)
    if box is None:
        raise AgentParseError(f"{name} needs {key}")
    try:
        numbers = json.loads(box)  # the package's str(list_of_floats); never eval
    except (TypeError, ValueError):
        raise AgentParseError(f"{key} is not a list of numbers: {_clip(str(box))}") from None
    if (
        not isinstance(numbers, list)
        or len(numbers) != 4
        or not all(isinstance(n, int | float) and math.isfinite(n) for n in numbers)
    ):
        raise AgentParseError(f"{key} must be a point or a box of finite numbers: {_clip(box)}")
    relative = ((numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2)
    page = scale(relative, (1, 1), image)
    at = scale(relative, (1, 1), model)
    return Point(round(page.x, 3), round(page.y, 3)), Point(round(at.x, 3), round(at.y, 3))


def _keys(inputs: dict[str, Any], fields: tuple[str, ...], name: str) -> tuple[str, ...]:
    value = next((inputs[f] for f in fields if inputs.get(f)), None)
    if not isinstance(value, str) or not value.strip():
        raise AgentParseError(f"{name} needs key='...'")
    names = split_combo(value)
    try:
        combo(names)
    except UnknownKeyError as error:
        raise AgentParseError(f"{name}: {error}") from None
    return names


def _clip(text: str, limit: int = 80) -> str:
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.replace("\n", "\\n")


def _one_line(text: str, limit: int = 200) -> str:
    return _clip(" ".join(text.split()), limit)


# ---------------------------------------------------------------------- rendering helpers


def _render_call(action: Action, image: Size, model: Size) -> str:
    match action:
        case Click(button="left", count=1):
            return f"click(start_box={_box(action.x, action.y, image, model)})"
        case Click(button="left", count=2):
            return f"left_double(start_box={_box(action.x, action.y, image, model)})"
        case Click(button="right", count=1):
            return f"right_single(start_box={_box(action.x, action.y, image, model)})"
        case Move():
            return f"hover(start_box={_box(action.x, action.y, image, model)})"
        case Drag():
            return (f"drag(start_box={_box(action.x, action.y, image, model)}, "
                    f"end_box={_box(action.x2, action.y2, image, model)})")
        case Scroll():
            if action.x is None or action.y is None:
                return f"scroll(direction='{action.direction}')"
            return (f"scroll(start_box={_box(action.x, action.y, image, model)}, "
                    f"direction='{action.direction}')")
        case TypeText():
            return f"type(content={_quote(action.text)})"
        case Hotkey(keys=(str(), *_)):
            return f"hotkey(key={_quote(' '.join(action.keys))})"
        case KeyDown():
            return f"keydown(key={_quote(action.key)})"
        case KeyUp():
            return f"keyup(key={_quote(action.key)})"
        case Wait():
            return "wait()"
        case Finish():
            if action.answer is None:
                return "finished()"
            return f"finished(content={_quote(action.answer)})"
        case CallUser():
            return "call_user()"
    raise ValueError(f"uitars cannot express this action: {_clip(repr(action))}")


def _box(x: float, y: float, image: Size, model: Size) -> str:
    at = scale((x, y), image, model)
    return f"'({round(at.x)},{round(at.y)})'"


def _quote(text: str) -> str:
    """A single-quoted literal the package reads back to ``text``.

    Beyond Python escaping, it hides the few sequences the package rewrites in the whole
    response before parsing: ``)`` after a quote (its non-greedy type() regex stops at the
    first ``')``), ``point=`` and ``<point>`` (rewritten to boxes) and ``Action: `` (it keeps
    only what follows the last one). ``\\x..`` escapes keep the literal's value the same.
    """
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == "'":
            out.append("\\'")
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    body = "".join(out)
    body = body.replace("\\')", "\\'\\x29").replace("point=", "point\\x3d")
    body = body.replace("<point>", "\\x3cpoint>").replace("Action: ", "Action\\x3a ")
    return f"'{body}'"
