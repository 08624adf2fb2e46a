"""Fara-7B (microsoft/fara), as its released FaraAgent and PlaywrightController run it.

Request (rebuilt every step): the system message (``fara_prompt.py``) for the screenshot's
smart_resize space; the first user turn ``[screenshot, task]``; then each past response verbatim
as an assistant turn, each followed by ``[screenshot, "Current URL: <url>\\nHere is the next
screenshot. Think about what to do next."]`` (the URL without its query, at most 100 characters
then " ..."). Only the last ``images`` screenshots are sent: older later-turn user messages are
dropped whole, while the first one keeps its task text. The recorded screenshot (1440x900) is sent
as it is; the server's processor brings it to 1428x896 as the released client's resize does.

Response: thoughts, then ``<tool_call>\\n{"name": "computer_use", "arguments": {...}}\\n
</tool_call>``. As the released parser: the text is split on ``"<tool_call>\\n"`` and
``"\\n</tool_call>"`` (the first call counts), read with ``json.loads``, else
``ast.literal_eval`` (a literal reader; nothing is ever evaluated). Tags without their newlines,
a missing closing tag and text after the JSON are tolerated too; every action's ``raw`` is the
call as the model wrote it, tags included, so which form matched stays visible.

Execution follows the released controller. One model action may become several agent-neutral
actions with the same ``raw``: ``type`` clicks its coordinate, optionally selects all and deletes
(``ControlOrMeta+A``, ``Backspace``), types, and presses Enter unless ``press_enter`` is false;
``key`` holds its keys down in order and releases them in reverse; ``scroll`` uses only the sign
of ``pixels`` (``scroll_px`` of wheel at the pointer). Actions the released controller runs as
no-ops (``type`` or ``mouse_move`` without a coordinate, ``scroll`` by 0, ``key`` with no keys)
are recorded as a zero-second ``Wait`` so the episode goes on as it does upstream. ``terminate``
(or ``stop``) ends the episode with the thoughts as the answer; status ``failure`` ends it as
``fail``. The browser always follows the newest tab, as the released controller follows a popup.
"""

from __future__ import annotations

import ast
import json
import math
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

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
from ownloop.agents.fara_prompt import BUILTIN_TEMPLATE, load_template, system_text
from ownloop.agents.fara_render import render_call
from ownloop.agents.keys import UnknownKeyError, to_playwright
from ownloop.agents.options import OptionCheck
from ownloop.agents.translation import TranslationStyle, translate_action
from ownloop.store.events import (
    Action,
    Back,
    Click,
    Fail,
    Finish,
    Goto,
    Hotkey,
    KeyDown,
    KeyUp,
    Memorize,
    Message,
    Move,
    Op,
    Part,
    Sampling,
    Scroll,
    Search,
    Task,
    TextPart,
    TypeText,
    Wait,
)

__all__ = [
    "BING_SEARCH_URL",
    "FARA_MIN_PIXELS",
    "MAX_RESPONSE_CHARS",
    "NEXT_SCREENSHOT",
    "Fara7bAgent",
    "ToolCall",
    "find_tool_call",
    "page_url",
    "visit_target",
]

BING_SEARCH_URL = "https://www.bing.com/search?q={query}&FORM=QBLH"
FARA_MIN_PIXELS = 4 * 28 * 28  # the released processor config: min_pixels 3136
NEXT_SCREENSHOT = "Here is the next screenshot. Think about what to do next."
MAX_RESPONSE_CHARS = 32_000
MAX_URL_CHARS = 100
MAX_WAIT_S = 60.0  # a wait never holds a worker longer; upstream has no cap
_PARSER_REVISION = 1
_warned = False


class ToolCall(NamedTuple):
    """Where the call is in a response: the thoughts, the JSON text and the call as written."""

    thoughts: str
    body: str
    raw: str
    strict: bool  # both tags with their newlines, as the released parser requires


def find_tool_call(text: str) -> ToolCall:
    """Split a response as the released parser does, tolerating missing newlines and tags.

    Raises:
        AgentParseError: there is no ``<tool_call>`` tag.
    """
    opening, sep, rest = text.partition("<tool_call>\n")
    strict = bool(sep)
    if not sep:
        opening, sep, rest = text.partition("<tool_call>")
        if not sep:
            raise AgentParseError("no <tool_call> in the response")
    body, closing, _ = rest.partition("\n</tool_call>")
    if not closing:
        strict = False
        body, closing, _ = rest.partition("</tool_call>")
    raw = text[len(opening):len(opening) + len(sep) + len(body) + len(closing)]
    return ToolCall(opening.strip(), body, raw, strict)


def page_url(url: str) -> str:
    """The URL as the released agent shows it: no query, at most 100 characters then " ..."."""
    url = url.split("?", 1)[0]
    return url[:MAX_URL_CHARS] + " ..." if len(url) > MAX_URL_CHARS else url


def visit_target(url: str) -> Goto | Search:
    """visit_url's released rules: a full URL as is; with a space, a search; else https://."""
    if url.startswith(("https://", "http://", "file://", "about:")):
        return Goto(url=url)
    if " " in url:
        return Search(query=url)
    return Goto(url="https://" + url)


class Fara7bAgent:
    """The ``fara7b`` agent; pure and thread-safe (no state between calls)."""

    name = "fara7b"
    parser_name = "fara7b"
    parser_version = f"ownloop {_PARSER_REVISION}"
    types_at_a_point = True
    """Typed text needs a point (type clicks it): the scripted expert gives the field's."""

    def __init__(
        self,
        *,
        viewport: tuple[int, int] | str = (1440, 900),
        images: int = 3,
        max_tokens: int | None = None,
        pause: float = 3.0,
        scroll_px: float = 400.0,
        wait_s: float = 3.0,
        search_url: str = BING_SEARCH_URL,
        released: str | None = None,
    ) -> None:
        """Options, all recorded in RunStarted; the defaults follow the released harness.

        Args:
            viewport: page size; the model has only seen 1440x900 (its space is 1428x896).
            images: screenshots per request, the current one included.
            max_tokens: completion limit per call (the released client sends none).
            pause: seconds to sleep after each step's actions (the released harness sleeps 3).
            scroll_px: wheel pixels of one scroll (the sign of ``pixels`` gives the direction).
            wait_s: seconds of a wait without ``time`` or ``duration``.
            search_url: web_search target; ``{query}`` is replaced by the quoted query.
            released: clones of microsoft/fara to read FN_CALL_TEMPLATE from (colon list;
                None: ``$OWNLOOP_PATH``).

        Raises:
            OwnloopError: an option has the wrong type or is out of range.
        """
        check = OptionCheck(self.name)
        self.viewport = check.viewport(viewport)
        self.images = check.number("images", images, int)
        self.max_tokens = None if max_tokens is None else check.number(
            "max_tokens", max_tokens, int)
        self.pause = check.number("pause", pause, float)
        self.scroll_px = check.number("scroll_px", scroll_px, float)
        self.wait_s = check.number("wait_s", wait_s, float)
        check.that(self.images >= 1, "images must be at least 1 (the current screenshot)")
        check.that(self.max_tokens is None or self.max_tokens >= 1, "max_tokens must be at least 1")
        check.that(self.pause >= 0 and self.wait_s >= 0, "pause and wait_s must not be negative")
        check.that(self.scroll_px > 0, "scroll_px must be positive")
        check.that(isinstance(search_url, str) and "{query}" in search_url,
                   "search_url must contain {query}, e.g. https://duckduckgo.com/?q={query}")
        try:
            search_url.format(query="q")
        except (KeyError, IndexError, ValueError):
            check.that(False, "search_url may hold no placeholder but {query}")
        check.that(released is None or isinstance(released, str),
                   "released must be a folder list like /src/fara:/src/other")
        self.search_url, self.released = search_url, released
        self.template, self.prompt_source = self._template(check)
        self.settings = LoopSettings(
            viewport=self.viewport,
            sampling=Sampling(temperature=0.0, max_tokens=self.max_tokens),
            images=self.images,
            calls_per_step=1,  # a bad response ends the episode; --error-retries re-runs it
            resample_temperature=None,
            pause_s=self.pause,
            error_retries=5,
            max_steps=100,  # run_fara's max_rounds; --max-steps governs a recording
        )
        self._style = TranslationStyle(search_url=search_url)

    def _template(self, check: OptionCheck) -> tuple[str, str]:
        global _warned
        found = load_template(self.released)
        if found is None:
            if not _warned:
                _warned = True
                warnings.warn("fara7b: microsoft/fara not found under --released/$OWNLOOP_PATH; "
                              "using ownloop's built-in prompt", stacklevel=3)
            return BUILTIN_TEMPLATE, "built-in"
        template = next(iter(found.constants.values()))
        try:
            system_text(template, 1, 1)
        except (KeyError, IndexError, ValueError) as error:
            check.that(False, f"{found.source.removeprefix('released:')} has a FN_CALL_TEMPLATE "
                              f"with a placeholder other than {{tool_descs}}: {error!r}")
        return template, found.source

    def options(self) -> dict[str, str | int | float | bool | None]:
        """The agent's own settings, recorded in RunStarted."""
        return {
            "viewport": f"{self.viewport[0]}x{self.viewport[1]}",
            "images": self.images,
            "max_tokens": self.max_tokens,
            "pause": self.pause,
            "scroll_px": self.scroll_px,
            "wait_s": self.wait_s,
            "search_url": self.search_url,
            "released": self.released,
        }

    # ------------------------------------------------------------------ request

    def system_message(self, image_size: tuple[int, int]) -> str:
        """The system text for a screenshot of ``image_size``, stating its model space."""
        model = _model_size(Size(*image_size))
        return system_text(self.template, model.width, model.height)

    def build_messages(
        self, task: Task, history: Sequence[PastStep], now: Observation
    ) -> tuple[Message, ...]:
        """System, ``[screenshot, task]``, then past responses and ``[screenshot, URL]`` turns,
        with only the last ``images`` screenshots."""
        shots = [past.observation for past in history] + [now]
        keep_from = len(shots) - self.images  # observations before this index lose their image
        size = (now.screenshot.width, now.screenshot.height)
        messages = [Message(role="system", parts=(TextPart(text=self.system_message(size)),))]
        for index, seen in enumerate(shots):
            if index > 0:
                messages.append(Message(role="assistant",
                                        parts=(TextPart(text=history[index - 1].response),)))
            if index == 0:
                text = task_text(task)
            elif index < keep_from:
                continue  # the released agent drops these whole
            else:
                text = f"Current URL: {page_url(seen.url)}\n{NEXT_SCREENSHOT}"
            image: tuple[Part, ...] = (seen.screenshot,) if index >= keep_from else ()
            messages.append(Message(role="user", parts=(*image, TextPart(text=text))))
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
        except Exception as error:  # a bug here must still end as a recorded parse error
            raise AgentParseError(_clip(f"fara7b parser failed: {type(error).__name__}: "
                                        f"{error}", 200)) from error

    def _parse(self, text: str, image: Size) -> Parsed:
        if not isinstance(text, str):
            raise AgentParseError(f"response is {type(text).__name__}, not text")
        if len(text) > MAX_RESPONSE_CHARS:
            raise AgentParseError(
                f"response too long ({len(text)} characters; the limit is {MAX_RESPONSE_CHARS})")
        call = find_tool_call(text)
        arguments = _arguments(call.body)
        model = _model_size(image)
        actions = _Reader(self, arguments, call, image, model).actions()
        return Parsed(thought=call.thoughts, actions=actions,
                      model_size=(model.width, model.height))

    # ------------------------------------------------------------------ execution and end

    def translate(self, action: Action) -> tuple[Op, ...]:
        """The Playwright operations for one action (see ``translation.translate_action``)."""
        return translate_action(action, self._style)

    def ending(self, parsed: Parsed, history: Sequence[PastStep]) -> Ending | None:
        """terminate ends with the thoughts as the answer; status failure ends as fail."""
        for action in parsed.actions:
            if isinstance(action, Finish):
                return Ending("finished", "terminate:success", action.answer)
            if isinstance(action, Fail):
                return Ending("fail", "terminate:failure", action.reason)
        return None

    # ------------------------------------------------------------------ the inverse of parse

    def render(self, thought: str, actions: Sequence[Action], image_size: tuple[int, int]) -> str:
        """The response Fara-7B would write for ``actions`` (page coordinates of a screenshot of
        ``image_size``): one tool call, coordinates in its smart_resize space.

        A finish writes its answer as the thoughts (Fara's answer is its final thoughts).

        Raises:
            ValueError: the actions are not one Fara action (e.g. typing without a point).
        """
        image = Size(*image_size)
        thoughts, arguments = render_call(thought, actions, image, _model_size(image))
        if "<tool_call>" in thoughts:
            raise ValueError("fara7b's thoughts cannot hold a <tool_call> tag")
        call = json.dumps({"name": "computer_use", "arguments": arguments}, ensure_ascii=False)
        head = f"{thoughts}\n" if thoughts else ""
        return f"{head}<tool_call>\n{call}\n</tool_call>"


# ---------------------------------------------------------------------- parsing helpers


def _model_size(image: Size) -> Size:
    return smart_resize(image, min_pixels=FARA_MIN_PIXELS)


def _arguments(body: str) -> dict[str, Any]:
    value = _read(body)
    if not isinstance(value, dict):
        raise AgentParseError(f"the tool call is not a JSON object: {_clip(body)}")
    arguments = value.get("arguments")
    if not isinstance(arguments, dict):
        raise AgentParseError(f"the tool call has no 'arguments' object: {_clip(body)}")
    if not isinstance(arguments.get("action"), str):
        raise AgentParseError(f"the tool call names no action: {_clip(body)}")
    return arguments


def _read(body: str) -> Any:
    """json.loads, else ast.literal_eval (the released order), else the first JSON object."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(body)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    try:
        return json.JSONDecoder().raw_decode(body.lstrip())[0]
    except (ValueError, RecursionError):
        raise AgentParseError(f"the tool call is neither JSON nor a literal: {_clip(body)}")\
            from None


class _Reader:
    """One tool call's arguments → agent-neutral actions, by the released controller's rules."""

    def __init__(self, agent: Fara7bAgent, args: dict[str, Any], call: ToolCall, image: Size,
                 model: Size) -> None:
        self.agent, self.args, self.call = agent, args, call
        self.image, self.model, self.raw = image, model, call.raw
        self.name: str = args["action"]

    def actions(self) -> tuple[Action, ...]:
        name, args, raw = self.name, self.args, self.raw
        if name in ("left_click", "click"):
            point = self._point(required=True)
            assert point is not None
            page, at = point
            return (Click(x=page.x, y=page.y, model_x=at.x, model_y=at.y, raw=raw),)
        if name in ("mouse_move", "hover"):
            point = self._point(required=False)
            if point is None:
                return (self._nothing(),)
            page, at = point
            return (Move(x=page.x, y=page.y, model_x=at.x, model_y=at.y, raw=raw),)
        if name in ("type", "input_text"):
            return self._type()
        if name in ("key", "keypress"):
            return self._key()
        if name == "scroll":
            pixels = int(self._number("pixels", 0))
            if pixels == 0:
                return (self._nothing(),)
            amount = self.agent.scroll_px
            if pixels > 0:
                return (Scroll(direction="up", amount=amount, unit="px", raw=raw),)
            return (Scroll(direction="down", amount=amount, unit="px", raw=raw),)
        if name == "visit_url":
            return (msgspec.structs.replace(visit_target(self._text("url")), raw=raw),)
        if name == "web_search":
            return (Search(query=self._text("query"), raw=raw),)
        if name == "history_back":
            return (Back(raw=raw),)
        if name in ("wait", "sleep"):
            seconds = self._number("time", self._number("duration", self.agent.wait_s))
            return (Wait(seconds=min(max(seconds, 0.0), MAX_WAIT_S), raw=raw),)
        if name == "pause_and_memorize_fact":
            fact = args.get("fact")
            return (Memorize(fact="" if fact is None else str(fact), raw=raw),)
        if name in ("terminate", "stop"):
            if args.get("status") == "failure":
                return (Fail(reason=self.call.thoughts, raw=raw),)
            return (Finish(answer=self.call.thoughts, raw=raw),)
        if name in ("refresh", "reload"):
            raise AgentParseError(f"{name} is not in the fara7b action space (no page reload op)")
        raise AgentParseError(f"unknown action {name[:40]!r}")

    def _nothing(self) -> Wait:
        # The released controller does nothing for this call and the episode goes on.
        return Wait(seconds=0.0, raw=self.raw)

    def _point(self, *, required: bool) -> tuple[Point, Point] | None:
        if "coordinate" not in self.args:
            if required:
                raise AgentParseError(f"{self.name} needs a coordinate")
            return None
        value = self.args["coordinate"]
        if (
            not isinstance(value, list | tuple)
            or len(value) != 2
            or not all(_is_number(n) and math.isfinite(n) for n in value)
        ):
            raise AgentParseError(f"coordinate must be [x, y] numbers: {_clip(repr(value))}")
        at = Point(float(value[0]), float(value[1]))
        page = scale(at, self.model, self.image)
        return Point(round(page.x, 3), round(page.y, 3)), at

    def _number(self, key: str, default: float) -> float:
        value = self.args.get(key, default)
        if not _is_number(value) or not math.isfinite(value):
            raise AgentParseError(f"{self.name}: {key} must be a number, got {_clip(repr(value))}")
        return float(value)

    def _text(self, key: str) -> str:
        value = self.args.get(key)
        if value is None or isinstance(value, dict | list):
            raise AgentParseError(f"{self.name} needs {key} as text")
        return str(value)

    def _type(self) -> tuple[Action, ...]:
        args, raw = self.args, self.raw
        value = args.get("text", args.get("text_value"))
        if value is None:
            raise AgentParseError(f"{self.name} needs text")
        point = self._point(required=False)
        if point is None:
            return (self._nothing(),)  # released: "if 'coordinate' in args" — nothing typed
        page, at = point
        actions: list[Action] = [Click(x=page.x, y=page.y, model_x=at.x, model_y=at.y, raw=raw)]
        if args.get("delete_existing_text", False):  # truthiness, as the released controller
            actions += [Hotkey(keys=("ControlOrMeta", "A"), raw=raw),
                        Hotkey(keys=("Backspace",), raw=raw)]
        actions.append(TypeText(text=str(value), raw=raw))
        if args.get("press_enter", True):
            actions.append(Hotkey(keys=("Enter",), raw=raw))
        return tuple(actions)

    def _key(self) -> tuple[Action, ...]:
        keys = self.args.get("keys", [])
        if isinstance(keys, str):
            keys = [keys]  # the released loop would press each character; one key is meant
        if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
            raise AgentParseError(f"keys must be a list of key names: {_clip(repr(keys))}")
        if not keys:
            return (self._nothing(),)
        for key in keys:
            try:
                to_playwright(key)
            except UnknownKeyError as error:
                raise AgentParseError(f"{self.name}: {error}") from None
        downs: list[Action] = [KeyDown(key=key, raw=self.raw) for key in keys]
        ups: list[Action] = [KeyUp(key=key, raw=self.raw) for key in reversed(keys)]
        return (*downs, *ups)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."

