"""Qwen3-VL's ``computer_use`` tool calls (and EvoCUA's, which share the grammar), as OSWorld's
released ``Qwen3VLAgent`` runs them.

Request: a system message describing one ``computer_use`` function (``qwen3vl_prompt.py``); then
a window of the last ``history`` steps: the first user turn of the window holds its screenshot and
the instruction ("Instruction: <task>" with "Previous actions:", one "Step i: <summary>" line per
step before the window, or "None"), later ones the screenshot alone, each followed by the step's
response verbatim as an assistant turn; then the current screenshot (with the instruction when
there is no history). At most ``history + 1`` screenshots. The screenshot is sent resized as the
released client resizes it (smart_resize with factor 32); the recorded one stays the original.

Coordinates (``mode``): ``relative`` (the released default) tells the model the screen is
1000x1000 and reads a point as ``int(x * W / 999)``, ``int(y * H / 999)`` of the page, exactly as
the released parser scales (frame ``relative-999``); ``absolute`` states the resized image's size
and maps from it (frame ``smart-resize``).

Response: an optional "Action: <summary>" line and one or more ``<tool_call>{"name":
"computer_use", "arguments": {...}}</tool_call>`` blocks, every one of which is executed, in
order. Actions: key, type, mouse_move, left_click, left_click_drag (from the pointer to the
point), right/middle/double/triple_click, scroll and hscroll (``pixels`` wheel notches; positive
is up or right, as pyautogui reads them), wait, terminate, answer; EvoCUA adds key_down and
key_up. A click without a coordinate clicks at the pointer. ``answer`` keeps its text; the
episode's answer is the last one given when ``terminate`` ends it. A response with no readable
tool call is a parse error (re-sampled), where the released loop runs nothing and goes on.

With ``--released`` naming a clone of OSWorld the prompt texts are the released ones
(``qwen3vl_prompt.py`` reads them, never runs them); ``-o prompt=evocua`` sends EvoCUA's S2
prompt (``mm_agents/evocua/prompts.py``). Without a clone: ownloop's own wording of each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal, NamedTuple

from msgspec import Meta

from ownloop.agents import base
from ownloop.agents.coordinates import Point, Size, finite_number, model_point, smart_resize
from ownloop.agents.frames import Frame, from_grid, pointer_after, split_think, to_grid
from ownloop.agents.keys import UnknownKeyError, to_playwright
from ownloop.agents.options import AgentOptions, MaxTokens
from ownloop.agents.qwen3vl_prompt import QWEN3VL_SPEC, instruction_text, system_text
from ownloop.agents.released import Released
from ownloop.store import events

__all__ = ["Qwen3VlAgent", "Qwen3VlOptions", "model_size", "tool_calls"]

GRID = 999  # the released parser divides by 999 though the prompt says 1000x1000
QWEN3_FACTOR = 32  # the released client's smart_resize factor for Qwen3-VL
QWEN3_MIN_PIXELS = 4 * 32 * 32
QWEN3_MAX_PIXELS = 16 * 16 * 4 * 12800
MAX_WAIT_S = 60.0
MAX_NOTCHES = 50.0  # pyautogui.scroll(-500) would be 500 wheel clicks; ownloop caps it
_CALL = re.compile(r"<tool_call>(?P<body>.*?)(?:</tool_call>|$)", re.DOTALL)
_ANSWER_RAW = re.compile(r'"action"\s*:\s*"answer"')


class Qwen3VlOptions(AgentOptions, frozen=True, kw_only=True):
    """The ``qwen3vl`` agent's options; the defaults follow OSWorld's released agent."""

    mode: Annotated[
        Literal["relative", "absolute"],
        Meta(
            description="relative: the prompt's 1000x1000 screen, read by width/999 as the "
            "released parser does; absolute: pixels of the resized image sent"
        ),
    ] = "relative"
    prompt: Annotated[
        Literal["qwen3vl", "evocua"],
        Meta(description="the system prompt: Qwen3-VL's computer_use tool, or EvoCUA's (S2)"),
    ] = "qwen3vl"
    history: Annotated[
        int, Meta(ge=0, description="past steps sent with their screenshot and response")
    ] = 4
    max_tokens: MaxTokens = 32768
    wait_s: Annotated[float, Meta(ge=0, description="seconds of a wait without time")] = 5.0


def model_size(image: tuple[int, int]) -> Size:
    """The size the released client resizes a screenshot to (smart_resize, factor 32)."""
    return smart_resize(
        image, factor=QWEN3_FACTOR, min_pixels=QWEN3_MIN_PIXELS, max_pixels=QWEN3_MAX_PIXELS
    )


def tool_calls(text: str) -> list[tuple[str, str]]:
    """Each ``<tool_call>`` block as (JSON text, the block as written); a bare JSON line with
    ``name`` and ``arguments`` counts too, as the released parser reads it."""
    found = [(m["body"].strip(), m[0]) for m in _CALL.finditer(text)]
    if found:
        return found
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}") and '"arguments"' in line:
            found.append((line, line))
    return found


def summary_of(response: str) -> str:
    """The step's "Action:" line as the history shows it (released: the first such line)."""
    for line in response.splitlines():
        line = line.strip()
        if line.lower().startswith("action:"):
            return line.split("Action:")[-1].strip()
    return ""


class Qwen3VlAgent(base.AgentBase[Qwen3VlOptions]):
    """The ``qwen3vl`` agent; pure and thread-safe."""

    name = "qwen3vl"
    options_type = Qwen3VlOptions
    released_spec = QWEN3VL_SPEC
    """Qwen3-VL's texts (read from the released agent's predict()) and EvoCUA's prompt
    constants (``-o prompt=evocua``), from one clone of OSWorld (``qwen3vl_prompt.py``)."""

    def __init__(
        self, options: Qwen3VlOptions | None = None, released: Released | None = None
    ) -> None:
        super().__init__(options, _for_prompt(options, released))
        self.coordinate_frame: Frame = (
            "relative-999" if self.config.mode == "relative" else "smart-resize"
        )

    def loop_settings(self) -> base.LoopSettings:
        config = self.config
        return base.LoopSettings(
            viewport=config.size(),
            sampling=events.Sampling(temperature=0.0, top_p=0.9, max_tokens=config.max_tokens),
            images=config.history + 1,
            resample_temperature=None,
            max_steps=100,
        )

    # ------------------------------------------------------------------ request

    def sent_image_size(self, image_size: tuple[int, int]) -> tuple[int, int]:
        """The released client's resize (smart_resize, factor 32)."""
        size = model_size(image_size)
        return size.width, size.height

    def system_message(self, image_size: tuple[int, int]) -> str:
        sent = self.sent_image_size(image_size)
        screen = (1000, 1000) if self.config.mode == "relative" else sent
        return system_text(self.config.prompt, screen, self.released)

    def build_messages(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> tuple[events.Message, ...]:
        """System; the last ``history`` steps (screenshot, response); the current screenshot."""
        size = (now.screenshot.width, now.screenshot.height)
        window = min(self.config.history, len(history))
        start = len(history) - window
        earlier = [
            f"Step {index + 1}: {summary_of(past.response) or _performing(past.parsed)}"
            for index, past in enumerate(history[:start])
        ]
        instruction = instruction_text(self.task_text(task), earlier, self.released)
        messages = [
            events.Message(role="system", parts=(events.TextPart(text=self.system_message(size)),))
        ]
        for offset, past in enumerate(history[start:]):
            parts: tuple[events.Part, ...] = (past.observation.screenshot,)
            if offset == 0:
                parts = (*parts, events.TextPart(text=instruction))
            messages.append(events.Message(role="user", parts=parts))
            messages.append(
                events.Message(role="assistant", parts=(events.TextPart(text=past.response),))
            )
        current: tuple[events.Part, ...] = (now.screenshot,)
        if window == 0:
            current = (*current, events.TextPart(text=instruction))
        messages.append(events.Message(role="user", parts=current))
        return tuple(messages)

    # ------------------------------------------------------------------ response

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[base.PastStep]
    ) -> base.Parsed:
        think, rest = split_think(text)
        calls = tool_calls(rest)
        if not calls:
            raise base.AgentParseError("no <tool_call> in the response")
        image = Size(*image_size)
        model = model_size(image)
        pointer = pointer_after(history)
        actions: list[events.Action] = []
        for body, raw in calls:
            arguments = _arguments(body)
            reader = _Reader(self, arguments, raw, image, model, pointer)
            actions.extend(reader.actions())
            pointer = reader.pointer
        thought = rest.split("<tool_call>", 1)[0]
        for _, raw in calls:
            thought = thought.replace(raw, "")
        thought = thought.strip()
        thought = "\n".join(part for part in (think, thought) if part)
        space = (1000, 1000) if self.config.mode == "relative" else (model.width, model.height)
        return base.Parsed(thought=thought, actions=tuple(actions), model_size=space)

    def ending(self, parsed: base.Parsed, history: Sequence[base.PastStep]) -> base.Ending | None:
        """terminate ends the episode (status failure as fail) with the last answer given."""
        for action in parsed.actions:
            if isinstance(action, events.Fail):
                return base.Ending("fail", "terminate:failure", action.reason or None)
            if isinstance(action, events.Finish):
                answer = _last_answer([*history, _Now(parsed)])
                return base.Ending("finished", "terminate:success", answer)
        return None

    # ------------------------------------------------------------------ the inverse of parse

    def render(
        self, thought: str, actions: Sequence[events.Action], image_size: tuple[int, int]
    ) -> str:
        """The response Qwen3-VL would write: "Action: <thought>" then one tool call per action
        (a drag is a mouse_move then a left_click_drag; a finish with an answer is an answer
        then a terminate).

        Raises:
            ValueError: an action the computer_use tool cannot express.
        """
        image = Size(*image_size)
        calls: list[dict[str, Any]] = []
        for action in actions:
            calls.extend(self._render_one(action, image))
        if not calls:
            raise ValueError("qwen3vl needs at least one action")
        summary = " ".join(thought.split()) or "Act."
        if "<tool_call>" in summary:
            raise ValueError("qwen3vl's summary cannot hold a <tool_call> tag")
        blocks = [
            "<tool_call>\n"
            + json.dumps({"name": "computer_use", "arguments": call}, ensure_ascii=False)
            + "\n</tool_call>"
            for call in calls
        ]
        return f"Action: {summary}\n" + "\n".join(blocks)

    def _point(self, x: float, y: float, image: Size) -> list[int]:
        if self.config.mode == "relative":
            return [to_grid(x, image.width, GRID), to_grid(y, image.height, GRID)]
        model = model_size(image)
        return [round(x * model.width / image.width), round(y * model.height / image.height)]

    def _render_one(self, action: events.Action, image: Size) -> list[dict[str, Any]]:
        match action:
            case events.Click(button="left", count=1):
                return [
                    {"action": "left_click", "coordinate": self._point(action.x, action.y, image)}
                ]
            case events.Click(count=1):
                name = f"{action.button}_click"
                return [{"action": name, "coordinate": self._point(action.x, action.y, image)}]
            case events.Click(button="left", count=2 | 3):
                name = "double_click" if action.count == 2 else "triple_click"
                return [{"action": name, "coordinate": self._point(action.x, action.y, image)}]
            case events.Move():
                return [
                    {"action": "mouse_move", "coordinate": self._point(action.x, action.y, image)}
                ]
            case events.Drag():
                return [
                    {"action": "mouse_move", "coordinate": self._point(action.x, action.y, image)},
                    {
                        "action": "left_click_drag",
                        "coordinate": self._point(action.x2, action.y2, image),
                    },
                ]
            case events.Scroll(unit="notch"):
                sign = 1 if action.direction in ("up", "right") else -1
                call: dict[str, Any] = {
                    "action": "hscroll" if action.direction in ("left", "right") else "scroll",
                    "pixels": sign * int(action.amount),
                }
                if action.x is not None and action.y is not None:
                    call["coordinate"] = self._point(action.x, action.y, image)
                return [call]
            case events.TypeText():
                return [{"action": "type", "text": action.text}]
            case events.Hotkey():
                return [{"action": "key", "keys": list(action.keys)}]
            case events.KeyDown() | events.KeyUp() if self.config.prompt == "evocua":
                name = "key_down" if isinstance(action, events.KeyDown) else "key_up"
                return [{"action": name, "keys": [action.key]}]
            case events.Wait():
                return [{"action": "wait", "time": action.seconds}]
            case events.Finish():
                answer = [] if not action.answer else [{"action": "answer", "text": action.answer}]
                return [*answer, {"action": "terminate", "status": "success"}]
            case events.Fail():
                return [{"action": "terminate", "status": "failure"}]
        raise ValueError(f"qwen3vl cannot write {type(action).__name__}")


# ---------------------------------------------------------------------- parsing helpers


def _for_prompt(options: Qwen3VlOptions | None, released: Released | None) -> Released | None:
    """``released`` when it holds the chosen prompt's texts (else the built-in ones are used,
    and ``prompt_source`` says so)."""
    if released is None:
        return None
    prompt = options.prompt if options is not None else "qwen3vl"
    key = "S2_SYSTEM_PROMPT" if prompt == "evocua" else "qwen3vl.description"
    return released if key in released.constants else None


def _performing(parsed: base.Parsed) -> str:
    if not parsed.actions:
        return "None"
    return f"Performing {type(parsed.actions[0]).__name__.lower()} action"


class _Now(NamedTuple):
    parsed: base.Parsed  # the step being ended, read like a past one


def _last_answer(history: Sequence[base.PastStep | _Now]) -> str | None:
    for past in reversed(history):
        for action in reversed(past.parsed.actions):
            if isinstance(action, events.Memorize) and _ANSWER_RAW.search(action.raw or ""):
                return action.fact
    return None


def _arguments(body: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        raise base.AgentParseError(
            f"the tool call is not JSON: {base.one_line(body, 80)}"
        ) from None
    if not isinstance(value, dict) or value.get("name") != "computer_use":
        raise base.AgentParseError(
            f"the tool call is not a computer_use call: {base.one_line(body, 80)}"
        )
    arguments = value.get("arguments")
    if not isinstance(arguments, dict) or not isinstance(arguments.get("action"), str):
        raise base.AgentParseError(f"the tool call names no action: {base.one_line(body, 80)}")
    return arguments


class _Reader:
    """One call's arguments → actions; ``pointer`` follows the pointer as they move it."""

    def __init__(
        self,
        agent: Qwen3VlAgent,
        args: dict[str, Any],
        raw: str,
        image: Size,
        model: Size,
        pointer: Point | None,
    ) -> None:
        self.agent, self.args, self.raw = agent, args, raw
        self.image, self.model, self.pointer = image, model, pointer
        self.name: str = args["action"]

    def actions(self) -> tuple[events.Action, ...]:
        name, raw = self.name, self.raw
        clicks: dict[str, tuple[Literal["left", "right", "middle"], int]] = {
            "left_click": ("left", 1),
            "right_click": ("right", 1),
            "middle_click": ("middle", 1),
            "double_click": ("left", 2),
            "triple_click": ("left", 3),
        }
        if name in clicks:
            button, count = clicks[name]
            x, y, mx, my = self._point(required=False)
            return (
                events.Click(x=x, y=y, button=button, count=count, model_x=mx, model_y=my, raw=raw),
            )
        if name == "mouse_move":
            x, y, mx, my = self._point(required=True)
            return (events.Move(x=x, y=y, model_x=mx, model_y=my, raw=raw),)
        if name == "left_click_drag":
            start = self.pointer
            if start is None:
                raise base.AgentParseError(
                    "left_click_drag starts at the pointer, which is nowhere yet"
                )
            x, y, mx, my = self._point(required=True)
            return (
                events.Drag(x=start.x, y=start.y, x2=x, y2=y, model_x2=mx, model_y2=my, raw=raw),
            )
        if name in ("scroll", "hscroll"):
            return (self._scroll(),)
        if name == "type":
            text = self.args.get("text", "")
            if not isinstance(text, str):
                raise base.AgentParseError(
                    f"type: text must be text, got {base.one_line(repr(text), 80)}"
                )
            return (events.TypeText(text=text, raw=raw),)
        if name in ("key", "key_down", "key_up"):
            return self._keys()
        if name == "wait":
            seconds = self._number("time", self.agent.config.wait_s)
            return (events.Wait(seconds=min(max(seconds, 0.0), MAX_WAIT_S), raw=raw),)
        if name == "answer":
            text = self.args.get("text", "")
            return (events.Memorize(fact=str(text), raw=raw),)
        if name == "terminate":
            if self.args.get("status") == "failure":
                return (events.Fail(raw=raw),)
            return (events.Finish(raw=raw),)
        raise base.AgentParseError(f"unknown action {name[:40]!r}")

    def _point(self, *, required: bool) -> tuple[float, float, float | None, float | None]:
        value = self.args.get("coordinate")
        if value is None:
            if self.pointer is None or required:
                raise base.AgentParseError(f"{self.name} needs a coordinate")
            return self.pointer.x, self.pointer.y, None, None
        mx, my = model_point(value)
        if self.agent.config.mode == "relative":
            x = from_grid(mx, self.image.width, GRID, truncate=True)
            y = from_grid(my, self.image.height, GRID, truncate=True)
        else:
            x = float(int(mx * self.image.width / self.model.width))
            y = float(int(my * self.image.height / self.model.height))
        self.pointer = Point(x, y)
        return x, y, mx, my

    def _number(self, key: str, default: float) -> float:
        value = self.args.get(key, default)
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if not finite_number(value):
            raise base.AgentParseError(
                f"{self.name}: {key} must be a number, got {base.one_line(repr(value), 80)}"
            )
        return float(value)

    def _scroll(self) -> events.Action:
        pixels = self._number("pixels", 0.0)
        horizontal = self.name == "hscroll"
        if pixels == 0:
            return events.Wait(seconds=0.0, raw=self.raw)  # pyautogui.scroll(0) does nothing
        if horizontal:
            direction: Literal["up", "down", "left", "right"] = "right" if pixels > 0 else "left"
        else:
            direction = "up" if pixels > 0 else "down"
        amount = min(abs(pixels), MAX_NOTCHES)
        if "coordinate" in self.args:
            x, y, mx, my = self._point(required=True)
            return events.Scroll(
                direction=direction, amount=amount, x=x, y=y, model_x=mx, model_y=my, raw=self.raw
            )
        return events.Scroll(direction=direction, amount=amount, raw=self.raw)

    def _keys(self) -> tuple[events.Action, ...]:
        keys = self.args.get("keys", [])
        if isinstance(keys, str):
            keys = [keys]
        if (
            not isinstance(keys, list | tuple)
            or not keys
            or not all(isinstance(k, str) for k in keys)
        ):
            raise base.AgentParseError(
                f"{self.name}: keys must be a list of key names: {base.one_line(repr(keys), 80)}"
            )
        for key in keys:
            try:
                to_playwright(key)
            except UnknownKeyError as error:
                raise base.AgentParseError(f"{self.name}: {error}") from None
        if self.name == "key_down":
            return tuple(events.KeyDown(key=key, raw=self.raw) for key in keys)
        if self.name == "key_up":
            return tuple(events.KeyUp(key=key, raw=self.raw) for key in reversed(keys))
        return (events.Hotkey(keys=tuple(keys), raw=self.raw),)
