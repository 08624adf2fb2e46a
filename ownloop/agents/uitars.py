"""UI-TARS-1.5-7B, as DESIGN §4 runs it: the released ``ui-tars`` package's prompt and parser.

Request: a system message "You are a helpful assistant.", the package's ``COMPUTER_USE_DOUBAO``
prompt, then every past response (with ``add_box_token`` re-inserting the box tokens the server
stripped) and, before the last few of them, their screenshots, then the current screenshot.

Parsing: the package's ``parse_action_to_structure_output`` (model type qwen25vl, the
screenshot's smart_resize space). It reads the action with ``ast.parse``, never ``eval``; it returns
boxes as strings such as ``"[0.5, 0.5, 0.5, 0.5]"`` (relative 0-1), which we read with
``json.loads``. Its pyautogui code generator is never used: our own translation
(``translation.py``) turns actions into Playwright operations.

The package prints a line to stdout for an action it cannot read; ownloop reads every action the
same way first (``_unreadable_action``) and refuses it before the package sees it, so the package
never prints and nothing of it is patched. Compiling model text can raise a SyntaxWarning (e.g.
for ``"\\d"``); the agent sets no warning filter (the ``ownloop`` command does, for code compiled
from model text only).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.metadata import version
from types import ModuleType
from typing import Annotated, Any, ClassVar, Literal, cast

from msgspec import Meta

from ownloop.agents import base
from ownloop.agents.coordinates import Point, Size, scale, smart_resize
from ownloop.agents.keys import UnknownKeyError, combo, split_combo
from ownloop.agents.options import AgentOptions, Images, MaxTokens, Scalar
from ownloop.agents.released import Released
from ownloop.agents.translation import TranslationStyle
from ownloop.store import events

__all__ = [
    "MAX_RESPONSE_CHARS",
    "package_version",
    "SYSTEM_MESSAGE",
    "UiTarsAgent",
    "UiTarsOptions",
]


@cache
def _package() -> ModuleType:
    """ui-tars's ``action_parser``, imported when first used: the core install (which reads,
    lists and describes agents) leaves the package out, and the CLI names the extra to install."""
    import ui_tars.action_parser as parser

    module: ModuleType = parser
    return module


@cache
def package_version() -> str:
    """The installed ui-tars version (importing the package first, so a missing one says so)."""
    _package()
    return version("ui-tars")


SYSTEM_MESSAGE = "You are a helpful assistant."
MAX_RESPONSE_CHARS = 16_000
"""Longer responses are refused before the package's backtracking regexes see them (500 tokens
are about 2,000 characters; a runaway or hostile response must not stall a worker)."""


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


class UiTarsOptions(AgentOptions, frozen=True, kw_only=True):
    """The ``uitars`` agent's options; the defaults follow DESIGN §4: in the browser the user's
    runner, on a desktop OSWorld's ``uitars15_v1`` loop (``max_tokens`` 1000,
    ``frequency_penalty`` 1, thoughts in Chinese)."""

    desktop_defaults: ClassVar[Mapping[str, Scalar]] = {
        "frequency_penalty": 1.0,
        "max_tokens": 1000,
        "language": "Chinese",
    }

    viewport: Annotated[str, Meta(description="page size WIDTHxHEIGHT")] = "1280x800"
    frequency_penalty: Annotated[float, Meta(ge=-2, le=2, description="sent with every call")] = 0.0
    max_tokens: MaxTokens = 500
    images: Images = 5
    scroll_notches: Annotated[float, Meta(gt=0, description="wheel notches per scroll action")] = (
        5.0
    )
    notch_px: Annotated[float, Meta(gt=0, description="pixels per wheel notch")] = 100.0
    drag_steps: Annotated[
        int, Meta(ge=1, description="mouse moves between press and release of a drag")
    ] = 20
    wait_s: Annotated[float, Meta(ge=0, description="seconds a wait() action sleeps")] = 5.0
    language: Annotated[
        str,
        Meta(min_length=1, description="the language the prompt asks thoughts in"),
    ] = "English"


class UiTarsAgent(base.AgentBase[UiTarsOptions]):
    """The ``uitars`` agent; pure and thread-safe (it keeps no state between calls)."""

    name = "uitars"
    options_type = UiTarsOptions
    max_response_chars = MAX_RESPONSE_CHARS

    def __init__(
        self, options: UiTarsOptions | None = None, released: Released | None = None
    ) -> None:
        """The agent with ``options`` (None: the defaults); its prompt is the package's, so
        ``released`` is not read."""
        super().__init__(options, None)
        self.parser_version = f"ui-tars {package_version()}/ownloop {self.parser_revision}"
        self.prompt_source = f"package:ui-tars {package_version()}"

    def loop_settings(self) -> base.LoopSettings:
        config = self.config
        return base.LoopSettings(
            viewport=config.size(),
            sampling=events.Sampling(
                temperature=0.0,
                top_p=0.9,
                max_tokens=config.max_tokens,
                frequency_penalty=config.frequency_penalty,
            ),
            images=config.images,
            calls_per_step=4,  # the first call and 3 re-samples, as OSWorld's try_times=3
            resample_temperature=1.0,
            max_steps=40,
        )

    def translation_style(self) -> TranslationStyle:
        config = self.config
        return TranslationStyle(
            notch_px=config.notch_px,
            drag_steps=config.drag_steps,
            literal_newline_submits=True,
            tab_is_text=True,  # the released code pastes typed text (input_swap): a tab stays
        )

    # ------------------------------------------------------------------ request

    def prompt(self, task: events.Task) -> str:
        """The package's COMPUTER_USE_DOUBAO prompt for ``task``."""
        from ui_tars.prompt import COMPUTER_USE_DOUBAO

        template: str = COMPUTER_USE_DOUBAO
        return template.format(language=self.config.language, instruction=self.task_text(task))

    def build_messages(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> tuple[events.Message, ...]:
        """System, prompt, the past responses (screenshots only before the last images-1 of
        them, so at most ``images`` in all), then the current screenshot."""
        messages = [
            events.Message(role="system", parts=(events.TextPart(text=SYSTEM_MESSAGE),)),
            events.Message(role="user", parts=(events.TextPart(text=self.prompt(task)),)),
        ]
        first_with_image = len(history) - (self.config.images - 1)
        for index, past in enumerate(history):
            if index >= first_with_image:
                messages.append(events.Message(role="user", parts=(past.observation.screenshot,)))
            text: str = _package().add_box_token(past.response)
            messages.append(events.Message(role="assistant", parts=(events.TextPart(text=text),)))
        messages.append(events.Message(role="user", parts=(now.screenshot,)))
        return tuple(messages)

    # ------------------------------------------------------------------ response

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[base.PastStep]
    ) -> base.Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height)."""
        try:
            return self._read(text, Size(*image_size))
        except AttributeError as error:
            if "lstrip" not in str(error):
                raise
            # The package calls .lstrip() on every argument value: a name, a number or a call.
            raise base.AgentParseError("an argument is not a quoted string") from error

    def _read(self, text: str, image: Size) -> base.Parsed:
        text = text.strip()
        # The package asserts this, and `python -O` strips asserts.
        if "Action:" not in text:
            raise base.AgentParseError("no 'Action:' in the response")
        model = smart_resize(image)
        normalized = _normalize(text)
        if not normalized.rpartition("Action: ")[2].strip():
            raise base.AgentParseError("no action after 'Action:'")
        joined = _two_on_one_line(normalized)
        if joined is not None:
            raise base.AgentParseError(
                "two actions on one line (the released parser reads them as one): "
                + base.clip(joined, 80, escape=True)
            )
        unreadable = _unreadable_action(normalized)
        if unreadable is not None:
            raise base.AgentParseError(
                f"ui-tars cannot parse the action: {base.clip(unreadable, 80, escape=True)}"
            )
        items = _package().parse_action_to_structure_output(
            normalized, 1000, image.height, image.width, model_type="qwen25vl"
        )
        if not items:
            raise base.AgentParseError("no action after 'Action:'")
        raws = _action_texts(text, len(items))
        actions = tuple(
            self._action(item, raw, image, model) for item, raw in zip(items, raws, strict=True)
        )
        first = items[0]
        thought = str(first.get("thought") or "")
        if first.get("reflection"):
            thought = f"Reflection: {first['reflection']}\nAction_Summary: {thought}"
        return base.Parsed(thought=thought, actions=actions, model_size=(model.width, model.height))

    def _action(self, item: dict[str, Any], raw: str, image: Size, model: Size) -> events.Action:
        name = item.get("action_type")
        inputs: dict[str, Any] = item.get("action_inputs") or {}
        if not isinstance(name, str):
            raise base.AgentParseError(f"not an action call: {base.clip(raw, 80, escape=True)}")
        if name in _CLICKS:
            button, count = _CLICKS[name]
            page, at = _point(inputs, "start_box", name, image, model)
            return events.Click(
                x=page.x, y=page.y, button=button, count=count, model_x=at.x, model_y=at.y, raw=raw
            )
        if name == "hover":
            page, at = _point(inputs, "start_box", name, image, model)
            return events.Move(x=page.x, y=page.y, model_x=at.x, model_y=at.y, raw=raw)
        if name in ("drag", "select"):
            page, at = _point(inputs, "start_box", name, image, model)
            page2, at2 = _point(inputs, "end_box", name, image, model)
            return events.Drag(
                x=page.x,
                y=page.y,
                x2=page2.x,
                y2=page2.y,
                model_x=at.x,
                model_y=at.y,
                model_x2=at2.x,
                model_y2=at2.y,
                raw=raw,
            )
        if name in ("hotkey", "press"):
            return events.Hotkey(keys=_keys(inputs, ("key", "hotkey", "press"), name), raw=raw)
        if name in ("keydown", "keyup", "release"):
            keys = _keys(inputs, ("key", "press"), name)
            if len(keys) != 1:
                raise base.AgentParseError(f"{name} takes one key, got {' '.join(keys)!r}")
            if name == "keydown":
                return events.KeyDown(key=keys[0], raw=raw)
            return events.KeyUp(key=keys[0], raw=raw)
        if name == "type":
            return events.TypeText(text=str(inputs.get("content", "")), raw=raw)
        if name == "scroll":
            return self._scroll(inputs, raw, image, model)
        if name == "wait":
            return events.Wait(seconds=self.config.wait_s, raw=raw)
        if name == "finished":
            content = inputs.get("content")  # the package drops '' and left-strips values
            return events.Finish(answer=str(content) if content else None, raw=raw)
        if name == "call_user":
            return events.CallUser(text=str(inputs.get("content", "")), raw=raw)
        raise base.AgentParseError(f"unknown action {name[:40]!r}")

    def _scroll(self, inputs: dict[str, Any], raw: str, image: Size, model: Size) -> events.Scroll:
        direction = _direction(str(inputs.get("direction", "")))
        if direction not in _DIRECTIONS:
            raise base.AgentParseError(
                "scroll direction must be up, down, left or right: "
                f"{base.clip(raw, 80, escape=True)}"
            )
        towards = cast(Direction, direction)
        if "start_box" not in inputs:  # at the pointer, wherever it is
            return events.Scroll(direction=towards, amount=self.config.scroll_notches, raw=raw)
        page, at = _point(inputs, "start_box", "scroll", image, model)
        return events.Scroll(
            direction=towards,
            amount=self.config.scroll_notches,
            x=page.x,
            y=page.y,
            model_x=at.x,
            model_y=at.y,
            raw=raw,
        )

    # ------------------------------------------------------------------ the end

    def ending(self, parsed: base.Parsed, history: Sequence[base.PastStep]) -> base.Ending | None:
        """finished(content=...) ends with the answer; call_user ends with status call_user."""
        for action in parsed.actions:
            if isinstance(action, events.Finish):
                return base.Ending("finished", "finished", action.answer)
            if isinstance(action, events.CallUser):
                return base.Ending("call_user", "call_user", None)
            if isinstance(action, events.Fail):
                return base.Ending("fail", "fail", None)
        return None

    # ------------------------------------------------------------------ the inverse of parse

    def render(
        self, thought: str, actions: Sequence[events.Action], image_size: tuple[int, int]
    ) -> str:
        """The response UI-TARS-1.5 would write for ``actions`` (page coordinates of a
        screenshot of ``image_size``), points in its smart_resize space.

        Raises:
            ValueError: an action this grammar cannot express (goto, middle click, ...), or
                text the released parser cannot read back (e.g. an answer holding
                ``type(content``, which it takes for a type action).
        """
        image = Size(*image_size)
        model = smart_resize(image)
        calls = [_render_call(action, image, model) for action in actions]
        if not calls:
            raise ValueError("nothing to render: no actions")
        head = f"Thought: {thought}\n" if thought else ""
        text = head + "Action: " + "\n\n".join(calls)
        try:
            self.parse(text, image_size)
        except base.AgentParseError as error:
            raise ValueError(
                f"UI-TARS's parser would not read this response back: {error}"
            ) from None
        return text


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


_TYPE_CONTENT = re.compile(r"type\(content='(.*?)'\)")
_CALL_NAMES = (
    "click|left_single|left_double|right_single|hover|drag|select|hotkey|press|keydown|keyup|"
    "release|type|scroll|wait|finished|call_user"
)
_FIRST_CALL = re.compile(rf"^\s*({_CALL_NAMES})\(")
_NEXT_CALL = re.compile(rf"\)\s+({_CALL_NAMES})\(")


def _two_on_one_line(text: str) -> str | None:
    """The first action text holding a second call after the first one's ")" with no blank
    line between them (``click(...) type(...)``): the package reads such a text as one action,
    a ``type`` of the whole line when "type(content" is in it. None when there is none; text
    typed by a ``type`` call is never looked into."""
    for action in text.rpartition("Action: ")[2].split(")\n\n"):
        first = _FIRST_CALL.match(action)
        if first is None or first[1] == "type":
            continue
        if _NEXT_CALL.search(action) is not None:
            return action
    return None


def _direction(text: str) -> str:
    """A scroll direction as the released code reads it: "up" or "down" anywhere in it
    (``downward`` scrolls down; up is looked for first), else left or right likewise."""
    word = text.strip().lower()
    if word in _DIRECTIONS:
        return word
    for name in ("up", "down", "left", "right"):
        if name in word:
            return name
    return word


def _unreadable_action(text: str) -> str | None:
    """The first action the package could not read, prepared as the package prepares it (the
    package would print it to stdout, then raise); None when it can read them all."""
    text = text.strip()
    if "<point>" in text:
        text = _package().convert_point_to_coordinates(text)
    for old in ("start_point=", "end_point=", "point="):
        text = text.replace(old, "end_box=" if old == "end_point=" else "start_box=")
    for action in text.split("Action: ")[-1].split(")\n\n"):
        if "type(content" in action:
            if not action.strip().endswith(")"):
                action = action.strip() + ")"
            if _TYPE_CONTENT.search(action) is None:
                continue  # the package raises without printing; its message is kept
            content = _TYPE_CONTENT.sub(lambda match: match.group(1), action)
            action = "type(content='" + _package().escape_single_quotes(content) + "')"
        if not action.strip().endswith(")"):
            action = action.strip() + ")"
        try:
            node = ast.parse(action.replace("\n", "\\n").lstrip(), mode="eval")
        except Exception:  # noqa: BLE001 - whatever ast.parse raises, the package prints
            return action
        if not isinstance(node.body, ast.Call):
            return action
    return None


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
        raise base.AgentParseError(f"{name} needs {key}")
    try:
        numbers = json.loads(box)  # the package's str(list_of_floats); never eval
    except (TypeError, ValueError):
        raise base.AgentParseError(
            f"{key} is not a list of numbers: {base.clip(str(box), 80, escape=True)}"
        ) from None
    if (
        not isinstance(numbers, list)
        or len(numbers) != 4
        or not all(isinstance(n, int | float) and math.isfinite(n) for n in numbers)
    ):
        raise base.AgentParseError(
            f"{key} must be a point or a box of finite numbers: {base.clip(box, 80, escape=True)}"
        )
    relative = ((numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2)
    page = scale(relative, (1, 1), image)
    at = scale(relative, (1, 1), model)
    return Point(round(page.x, 3), round(page.y, 3)), Point(round(at.x, 3), round(at.y, 3))


def _keys(inputs: dict[str, Any], fields: tuple[str, ...], name: str) -> tuple[str, ...]:
    value = next((inputs[f] for f in fields if inputs.get(f)), None)
    if not isinstance(value, str) or not value.strip():
        raise base.AgentParseError(f"{name} needs key='...'")
    names = split_combo(value)
    try:
        combo(names)
    except UnknownKeyError as error:
        raise base.AgentParseError(f"{name}: {error}") from None
    return names


# ---------------------------------------------------------------------- rendering helpers


def _render_call(action: events.Action, image: Size, model: Size) -> str:
    match action:
        case events.Click(button="left", count=1):
            return f"click(start_box={_box(action.x, action.y, image, model)})"
        case events.Click(button="left", count=2):
            return f"left_double(start_box={_box(action.x, action.y, image, model)})"
        case events.Click(button="right", count=1):
            return f"right_single(start_box={_box(action.x, action.y, image, model)})"
        case events.Move():
            return f"hover(start_box={_box(action.x, action.y, image, model)})"
        case events.Drag():
            return (
                f"drag(start_box={_box(action.x, action.y, image, model)}, "
                f"end_box={_box(action.x2, action.y2, image, model)})"
            )
        case events.Scroll():
            if action.x is None or action.y is None:
                return f"scroll(direction='{action.direction}')"
            return (
                f"scroll(start_box={_box(action.x, action.y, image, model)}, "
                f"direction='{action.direction}')"
            )
        case events.TypeText():
            return f"type(content={_quote(action.text)})"
        case events.Hotkey(keys=(str(), *_)):
            return f"hotkey(key={_quote(' '.join(action.keys))})"
        case events.KeyDown():
            return f"keydown(key={_quote(action.key)})"
        case events.KeyUp():
            return f"keyup(key={_quote(action.key)})"
        case events.Wait():
            return "wait()"
        case events.Finish():
            if action.answer is None:
                return "finished()"
            return f"finished(content={_quote(action.answer)})"
        case events.CallUser():
            return "call_user()"
    raise ValueError(
        f"uitars cannot express this action: {base.clip(repr(action), 80, escape=True)}"
    )


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
    literal = base.single_quoted(text)
    literal = literal.replace("\\')", "\\'\\x29").replace("point=", "point\\x3d")
    return literal.replace("<point>", "\\x3cpoint>").replace("Action: ", "Action\\x3a ")
