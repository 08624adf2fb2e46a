"""Fara-7B (microsoft/fara), as its released FaraAgent and PlaywrightController run it.

Request (rebuilt every step): the system message (``fara_prompt.py``) for the screenshot's
smart_resize space; the first user turn ``[screenshot, task]``; then each past response verbatim
as an assistant turn, each followed by ``[screenshot, "Current URL: <url>\\nHere is the next
screenshot. Think about what to do next."]`` (the URL without its query, at most 100 characters
then " ..."). Only the last ``images`` screenshots are sent: older later-turn user messages are
dropped whole, while the first one keeps its task text. The screenshot is sent as the released
client sends it, resized to the model's size (``sent_image_size``: smart_resize, 1428x896 for a
1440x900 page); the recorder keeps the original as the step's screenshot and the resized image as
a blob of its own, referenced by the request (option ``resize_screenshot=false`` sends the
original and leaves the resize to the server's processor). Coordinates map from that size to the
page either way. The system message's tool text is the released wording when ``released`` names a
clone of microsoft/fara (``fara_prompt.py``), else ownloop's own.

Response: thoughts, then ``<tool_call>\\n{"name": "computer_use", "arguments": {...}}\\n
</tool_call>``. As the released parser: the text is split on ``"<tool_call>\\n"`` and
``"\\n</tool_call>"`` (the first call counts), read with ``json.loads``, else
``ast.literal_eval`` (a literal reader; nothing is ever evaluated). Tags without their newlines,
a missing closing tag and text after the JSON are tolerated too; every action's ``raw`` is the
call as the model wrote it, tags included, so which form matched stays visible.

Execution follows the released controller. One model action may become several agent-neutral
actions with the same ``raw``: ``type`` clicks its coordinate, optionally selects all and deletes
(``ControlOrMeta+A``, ``Backspace``), types, and presses Enter unless ``press_enter`` is false
(without ``text`` it types the word ``None``, as the released ``str(args.get("text"))`` does;
option ``type_none=false`` makes that a parse error);
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
from collections.abc import Sequence
from typing import Annotated, Any, NamedTuple

import msgspec
from msgspec import Meta

from ownloop.agents import base
from ownloop.agents.coordinates import Point, Size, finite_number, model_point, scale, smart_resize
from ownloop.agents.fara_prompt import (
    fara_texts,
    load_fara_texts,
    system_text,
)
from ownloop.agents.fara_render import render_call
from ownloop.agents.keys import UnknownKeyError, to_playwright
from ownloop.agents.options import AgentOptions, Images
from ownloop.agents.released import Released, ReleasedSpec
from ownloop.agents.translation import TranslationStyle
from ownloop.errors import OwnloopError
from ownloop.store import events

__all__ = [
    "BING_SEARCH_URL",
    "FARA_MIN_PIXELS",
    "MAX_RESPONSE_CHARS",
    "NEXT_SCREENSHOT",
    "Fara7bAgent",
    "Fara7bOptions",
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
            raise base.AgentParseError("no <tool_call> in the response")
    body, closing, _ = rest.partition("\n</tool_call>")
    if not closing:
        strict = False
        body, closing, _ = rest.partition("</tool_call>")
    raw = text[len(opening) : len(opening) + len(sep) + len(body) + len(closing)]
    return ToolCall(opening.strip(), body, raw, strict)


def page_url(url: str) -> str:
    """The URL as the released agent shows it: no query, at most 100 characters then " ..."."""
    url = url.split("?", 1)[0]
    return url[:MAX_URL_CHARS] + " ..." if len(url) > MAX_URL_CHARS else url


def visit_target(url: str) -> events.Goto | events.Search:
    """visit_url's released rules: a full URL as is; with a space, a search; else https://."""
    if url.startswith(("https://", "http://", "file://", "about:")):
        return events.Goto(url=url)
    if " " in url:
        return events.Search(query=url)
    return events.Goto(url="https://" + url)


class Fara7bOptions(AgentOptions, frozen=True, kw_only=True):
    """The ``fara7b`` agent's options; the defaults follow the released harness."""

    viewport: Annotated[
        str,
        Meta(
            description="page size WIDTHxHEIGHT; the model has only seen "
            "1440x900 (its space is 1428x896)"
        ),
    ] = "1440x900"
    images: Images = 3
    max_tokens: Annotated[
        Annotated[int, Meta(ge=1)] | None,
        Meta(description="completion limit per call (the released client sends none)"),
    ] = None
    pause: Annotated[
        float,
        Meta(
            ge=0,
            description="seconds to sleep after each step's actions "
            "(the released harness sleeps 3)",
        ),
    ] = 3.0
    scroll_px: Annotated[
        float,
        Meta(
            gt=0, description="wheel pixels of one scroll (the sign of pixels gives the direction)"
        ),
    ] = 400.0
    wait_s: Annotated[
        float, Meta(ge=0, description="seconds of a wait without time or duration")
    ] = 3.0
    search_url: Annotated[
        str, Meta(description="web_search target; {query} is replaced by the quoted query")
    ] = BING_SEARCH_URL
    resize_screenshot: Annotated[
        bool,
        Meta(
            description="send the screenshot resized to the model's size (1428x896 for 1440x900), "
            "as the released client does; false sends the page's own and leaves the "
            "resize to the server"
        ),
    ] = True
    type_none: Annotated[
        bool,
        Meta(
            description="a type action without text types the word None, as the released "
            "client's str(None) does; false makes it a parse error"
        ),
    ] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if "{query}" not in self.search_url:
            raise ValueError(
                "search_url must contain {query}, e.g. https://duckduckgo.com/?q={query}"
            )
        try:
            self.search_url.format(query="q")
        except (KeyError, IndexError, ValueError):
            raise ValueError("search_url may hold no placeholder but {query}") from None


class Fara7bAgent(base.AgentBase[Fara7bOptions]):
    """The ``fara7b`` agent; pure and thread-safe (no state between calls)."""

    name = "fara7b"
    options_type = Fara7bOptions
    released_spec = ReleasedSpec("microsoft/fara", loader=load_fara_texts)
    """The template and the tool's wording are read from two files of a clone (``fara_prompt``)."""
    max_response_chars = MAX_RESPONSE_CHARS
    types_at_a_point = True
    """Typed text needs a point (type clicks it): the scripted expert gives the field's."""

    def __init__(
        self, options: Fara7bOptions | None = None, released: Released | None = None
    ) -> None:
        """The agent with ``options`` (None: the defaults) and the texts of a clone of
        microsoft/fara (``load_fara_texts``; None: ownloop's own wording).

        Raises:
            OwnloopError: the clone's template has a placeholder other than {tool_descs}.
        """
        super().__init__(options, released)
        self.template, self.tool_texts = fara_texts(released)
        try:
            system_text(self.template, 1, 1, self.tool_texts)
        except (KeyError, IndexError, ValueError) as error:
            source = self.prompt_source.removeprefix("released:")
            raise OwnloopError(
                f"fara7b: {source} has a FN_CALL_TEMPLATE with a placeholder "
                f"other than {{tool_descs}}: {error!r}"
            ) from None

    def loop_settings(self) -> base.LoopSettings:
        config = self.config
        return base.LoopSettings(
            viewport=config.size(),
            sampling=events.Sampling(temperature=0.0, max_tokens=config.max_tokens),
            images=config.images,
            calls_per_step=1,  # a bad response ends the episode; --error-retries re-runs it
            resample_temperature=None,
            pause_s=config.pause,
            error_retries=5,
            max_steps=100,  # run_fara's max_rounds; --max-steps governs a recording
        )

    def translation_style(self) -> TranslationStyle:
        return TranslationStyle(search_url=self.config.search_url)

    # ------------------------------------------------------------------ request

    def system_message(self, image_size: tuple[int, int]) -> str:
        """The system text for a screenshot of ``image_size``, stating its model space."""
        model = _model_size(Size(*image_size))
        return system_text(self.template, model.width, model.height, self.tool_texts)

    def sent_image_size(self, image_size: tuple[int, int]) -> tuple[int, int]:
        """The size the screenshot is sent at: the model's (smart_resize), as the released
        client resizes it, or the screenshot's own with ``resize_screenshot=false``."""
        if not self.config.resize_screenshot:
            return image_size
        model = _model_size(Size(*image_size))
        return model.width, model.height

    def build_messages(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> tuple[events.Message, ...]:
        """System, ``[screenshot, task]``, then past responses and ``[screenshot, URL]`` turns,
        with only the last ``images`` screenshots."""
        shots = [past.observation for past in history] + [now]
        keep_from = len(shots) - self.config.images  # earlier observations lose their image
        size = (now.screenshot.width, now.screenshot.height)
        messages = [
            events.Message(role="system", parts=(events.TextPart(text=self.system_message(size)),))
        ]
        for index, seen in enumerate(shots):
            if index > 0:
                messages.append(
                    events.Message(
                        role="assistant", parts=(events.TextPart(text=history[index - 1].response),)
                    )
                )
            if index == 0:
                text = self.task_text(task)
            elif index < keep_from:
                continue  # the released agent drops these whole
            else:
                text = f"Current URL: {page_url(seen.url)}\n{NEXT_SCREENSHOT}"
            image: tuple[events.Part, ...] = (seen.screenshot,) if index >= keep_from else ()
            messages.append(events.Message(role="user", parts=(*image, events.TextPart(text=text))))
        return tuple(messages)

    # ------------------------------------------------------------------ response

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[base.PastStep]
    ) -> base.Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height)."""
        image = Size(*image_size)
        call = find_tool_call(text)
        arguments = _arguments(call.body)
        model = _model_size(image)
        actions = _Reader(self, arguments, call, image, model).actions()
        return base.Parsed(
            thought=call.thoughts, actions=actions, model_size=(model.width, model.height)
        )

    # ------------------------------------------------------------------ execution and end

    def ending(self, parsed: base.Parsed, history: Sequence[base.PastStep]) -> base.Ending | None:
        """terminate ends with the thoughts as the answer; status failure ends as fail."""
        return base.first_ending(parsed, "terminate:success", "terminate:failure", reason=True)

    # ------------------------------------------------------------------ the inverse of parse

    def render(
        self, thought: str, actions: Sequence[events.Action], image_size: tuple[int, int]
    ) -> str:
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
        raise base.AgentParseError(f"the tool call is not a JSON object: {base.one_line(body, 80)}")
    arguments = value.get("arguments")
    if not isinstance(arguments, dict):
        raise base.AgentParseError(
            f"the tool call has no 'arguments' object: {base.one_line(body, 80)}"
        )
    if not isinstance(arguments.get("action"), str):
        raise base.AgentParseError(f"the tool call names no action: {base.one_line(body, 80)}")
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
        raise base.AgentParseError(
            f"the tool call is neither JSON nor a literal: {base.one_line(body, 80)}"
        ) from None


class _Reader:
    """One tool call's arguments → agent-neutral actions, by the released controller's rules."""

    def __init__(
        self, agent: Fara7bAgent, args: dict[str, Any], call: ToolCall, image: Size, model: Size
    ) -> None:
        self.agent, self.args, self.call = agent, args, call
        self.image, self.model, self.raw = image, model, call.raw
        self.name: str = args["action"]

    def actions(self) -> tuple[events.Action, ...]:
        name, args, raw = self.name, self.args, self.raw
        if name in ("left_click", "click"):
            point = self._point(required=True)
            assert point is not None
            page, at = point
            return (events.Click(x=page.x, y=page.y, model_x=at.x, model_y=at.y, raw=raw),)
        if name in ("mouse_move", "hover"):
            point = self._point(required=False)
            if point is None:
                return (self._nothing(),)
            page, at = point
            return (events.Move(x=page.x, y=page.y, model_x=at.x, model_y=at.y, raw=raw),)
        if name in ("type", "input_text"):
            return self._type()
        if name in ("key", "keypress"):
            return self._key()
        if name == "scroll":
            pixels = self._pixels()
            if pixels == 0:
                return (self._nothing(),)
            amount = self.agent.config.scroll_px
            if pixels > 0:
                return (events.Scroll(direction="up", amount=amount, unit="px", raw=raw),)
            return (events.Scroll(direction="down", amount=amount, unit="px", raw=raw),)
        if name == "visit_url":
            return (msgspec.structs.replace(visit_target(self._text("url")), raw=raw),)
        if name == "web_search":
            return (events.Search(query=self._text("query"), raw=raw),)
        if name == "history_back":
            return (events.Back(raw=raw),)
        if name in ("wait", "sleep"):
            seconds = self._number("time", self._number("duration", self.agent.config.wait_s))
            return (events.Wait(seconds=min(max(seconds, 0.0), MAX_WAIT_S), raw=raw),)
        if name == "pause_and_memorize_fact":
            fact = args.get("fact")
            return (events.Memorize(fact="" if fact is None else str(fact), raw=raw),)
        if name in ("terminate", "stop"):
            if args.get("status") == "failure":
                return (events.Fail(reason=self.call.thoughts, raw=raw),)
            return (events.Finish(answer=self.call.thoughts, raw=raw),)
        if name in ("refresh", "reload"):
            raise base.AgentParseError(
                f"{name} is not in the fara7b action space (no page reload op)"
            )
        raise base.AgentParseError(f"unknown action {name[:40]!r}")

    def _nothing(self) -> events.Wait:
        # The released controller does nothing for this call and the episode goes on.
        return events.Wait(seconds=0.0, raw=self.raw)

    def _point(self, *, required: bool) -> tuple[Point, Point] | None:
        if "coordinate" not in self.args:
            if required:
                raise base.AgentParseError(f"{self.name} needs a coordinate")
            return None
        at = model_point(self.args["coordinate"])
        page = scale(at, self.model, self.image)
        return Point(round(page.x, 3), round(page.y, 3)), at

    def _number(self, key: str, default: float) -> float:
        value = self.args.get(key, default)
        if not finite_number(value):
            raise base.AgentParseError(
                f"{self.name}: {key} must be a number, got {base.one_line(repr(value), 80)}"
            )
        return float(value)

    def _pixels(self) -> int:
        """``pixels`` as the released ``int()`` reads it: a number, or text such as "-300"."""
        value = self.args.get("pixels", 0)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise base.AgentParseError(
                    f"{self.name}: pixels must be a whole number, got "
                    f"{base.one_line(repr(value), 80)}"
                ) from None
        return int(self._number("pixels", 0))

    def _text(self, key: str) -> str:
        value = self.args.get(key)
        if value is None or isinstance(value, dict | list):
            raise base.AgentParseError(f"{self.name} needs {key} as text")
        return str(value)

    def _type(self) -> tuple[events.Action, ...]:
        args, raw = self.args, self.raw
        point = self._point(required=False)
        if point is None:
            return (self._nothing(),)  # released: "if 'coordinate' in args" — nothing typed
        value = args.get("text", args.get("text_value"))
        if value is None and not self.agent.config.type_none:
            raise base.AgentParseError(f"{self.name} needs text")
        page, at = point
        actions: list[events.Action] = [
            events.Click(x=page.x, y=page.y, model_x=at.x, model_y=at.y, raw=raw)
        ]
        if args.get("delete_existing_text", False):  # truthiness, as the released controller
            actions += [
                events.Hotkey(keys=("ControlOrMeta", "A"), raw=raw),
                events.Hotkey(keys=("Backspace",), raw=raw),
            ]
        actions.append(events.TypeText(text=str(value), raw=raw))
        if args.get("press_enter", True):
            actions.append(events.Hotkey(keys=("Enter",), raw=raw))
        return tuple(actions)

    def _key(self) -> tuple[events.Action, ...]:
        keys = self.args.get("keys", [])
        if isinstance(keys, str):
            keys = [keys]  # the released loop would press each character; one key is meant
        if not isinstance(keys, list | tuple) or not all(isinstance(k, str) for k in keys):
            raise base.AgentParseError(
                f"keys must be a list of key names: {base.one_line(repr(keys), 80)}"
            )
        if not keys:
            return (self._nothing(),)
        for key in keys:
            try:
                to_playwright(key)
            except UnknownKeyError as error:
                raise base.AgentParseError(f"{self.name}: {error}") from None
        downs: list[events.Action] = [events.KeyDown(key=key, raw=self.raw) for key in keys]
        ups: list[events.Action] = [events.KeyUp(key=key, raw=self.raw) for key in reversed(keys)]
        return (*downs, *ups)
