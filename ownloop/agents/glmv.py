"""GLM-4.5V / GLM-4.6V (Zhipu) in their PC action space, as hud-python's GLM tool runs it.

Response: reasoning (``<think>...</think>``, optional), then one call, usually inside
``<|begin_of_box|>...<|end_of_box|>`` or ``<answer>...</answer>``:

- ``left_click``, ``right_click``, ``middle_click``, ``hover``, ``left_double_click``
  (``start_box='[x,y]'``); ``left_drag(start_box='[x,y]', end_box='[x,y]')``;
- ``key(keys='ctrl+c')`` (names joined by ``+``); ``type(content='...')``;
- ``scroll(start_box='[x,y]', direction='up|down', step=5)``: ``step`` wheel notches of 100 px at
  the point (the page's centre without one);
- ``WAIT()`` (5 s), ``DONE()``, ``FAIL()``.

The call is read as a Python call with literal arguments only (``ast``; nothing is evaluated);
``element_info`` is accepted and ignored. Points are on a 0-999 grid: page x = int(x * W / 999)
(frame ``relative-999``), as the released tool scales them. ``DONE()`` ends the episode with the
text before the call as the answer.

Request: a system message stating the action space, the user turn with the task, then each
earlier step's screenshot (the last ``images`` only) and response as an assistant turn.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Annotated, Any

from msgspec import Meta

from ownloop.agents import base
from ownloop.agents.coordinates import finite_number
from ownloop.agents.frames import Frame, grid_point, split_think, to_grid
from ownloop.agents.keys import UnknownKeyError, to_playwright
from ownloop.agents.options import AgentOptions, Images, MaxTokens
from ownloop.store import events

__all__ = ["GlmvAgent", "GlmvOptions", "find_call"]

GRID = 999
_NAMES = (
    "left_click",
    "click",
    "right_click",
    "middle_click",
    "hover",
    "left_double_click",
    "left_drag",
    "key",
    "type",
    "scroll",
    "WAIT",
    "DONE",
    "FAIL",
)
_CALL = re.compile(r"\b(" + "|".join(_NAMES) + r")\s*\(")
_BOX = re.compile(r"<\|begin_of_box\|>(.*?)<\|end_of_box\|>", re.DOTALL)
_POINT = re.compile(r"^\s*\[?\s*\[?\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]?\s*\]?\s*$")
_CLICKS = {
    "left_click": ("left", 1),
    "click": ("left", 1),
    "right_click": ("right", 1),
    "middle_click": ("middle", 1),
    "left_double_click": ("left", 2),
}

_SYSTEM = (
    "You operate a computer through its screen. Each step shows a screenshot; answer with your "
    "reasoning and then exactly one action inside <|begin_of_box|>...<|end_of_box|>. Points are "
    "'[x,y]' on a 0-999 grid across the width and height of the screenshot.\nActions:\n"
    "left_click(start_box='[x,y]'), right_click(start_box='[x,y]'), "
    "middle_click(start_box='[x,y]'), hover(start_box='[x,y]'), "
    "left_double_click(start_box='[x,y]'), left_drag(start_box='[x,y]', end_box='[x,y]'), "
    "key(keys='ctrl+c'), type(content='text'), "
    "scroll(start_box='[x,y]', direction='up or down', step=5), "
    "WAIT() to wait 5 seconds, DONE() when the task is complete, FAIL() when it cannot be done."
)


class GlmvOptions(AgentOptions, frozen=True, kw_only=True):
    """The ``glmv`` agent's options."""

    images: Images = 3
    max_tokens: MaxTokens = 4096
    wait_s: Annotated[float, Meta(ge=0, description="seconds of WAIT()")] = 5.0


def find_call(text: str) -> tuple[str, str]:
    """(the text before the call, the call as written): the call in the last box, else in
    ``<answer>``, else the last known action name followed by "(" to its matching ")".

    Raises:
        AgentParseError: no known action call in the text.
    """
    boxes = _BOX.findall(text)
    region = boxes[-1] if boxes else text
    if not boxes and "<answer>" in text:
        region = text.split("<answer>", 1)[1].split("</answer>", 1)[0]
    matches = list(_CALL.finditer(region))
    if not matches:
        raise base.AgentParseError("no GLM action call (e.g. left_click(start_box='[x,y]')) found")
    start = matches[-1].start()
    end = _closing(region, matches[-1].end() - 1)
    call = region[start:end]
    before_at = text.find(call) if boxes or "<answer>" in text else start
    before = text[: max(before_at, 0)]
    for tag in ("<|begin_of_box|>", "<answer>"):
        before = before.replace(tag, "")
    return before.strip(), call


def _closing(text: str, opening: int) -> int:
    """Index after the ")" matching the "(" at ``opening`` (quotes respected); the text's end
    when it never closes."""
    depth, quote, index = 0, "", opening
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return len(text)


class GlmvAgent(base.AgentBase[GlmvOptions]):
    """The ``glmv`` agent; pure and thread-safe."""

    name = "glmv"
    options_type = GlmvOptions
    coordinate_frame: Frame = "relative-999"

    def loop_settings(self) -> base.LoopSettings:
        return base.LoopSettings(
            viewport=self.config.size(),
            sampling=events.Sampling(temperature=0.0, max_tokens=self.config.max_tokens),
            images=self.config.images,
            resample_temperature=None,
            max_steps=50,
        )

    def build_messages(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> tuple[events.Message, ...]:
        shots = [past.observation for past in history] + [now]
        keep_from = len(shots) - self.config.images
        messages = [
            events.Message(role="system", parts=(events.TextPart(text=_SYSTEM),)),
            events.Message(role="user", parts=(events.TextPart(text=self.task_text(task)),)),
        ]
        for index, seen in enumerate(shots):
            if index >= keep_from:
                parts: tuple[events.Part, ...] = (seen.screenshot,)
                messages.append(events.Message(role="user", parts=parts))
            if index < len(history):
                messages.append(
                    events.Message(
                        role="assistant", parts=(events.TextPart(text=history[index].response),)
                    )
                )
        return tuple(messages)

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[base.PastStep]
    ) -> base.Parsed:
        think, rest = split_think(text)
        before, call = find_call(rest)
        name, args = _call_parts(call)
        actions = _Reader(self, name, args, call, image_size, before).actions()
        thought = "\n".join(part for part in (think, before) if part)
        return base.Parsed(thought=thought, actions=actions, model_size=(GRID, GRID))

    def ending(self, parsed: base.Parsed, history: Sequence[base.PastStep]) -> base.Ending | None:
        for action in parsed.actions:
            if isinstance(action, events.Finish):
                return base.Ending("finished", "DONE", action.answer)
            if isinstance(action, events.Fail):
                return base.Ending("fail", "FAIL", action.reason or None)
        return None

    def render(
        self, thought: str, actions: Sequence[events.Action], image_size: tuple[int, int]
    ) -> str:
        """The response GLM-V would write: the thought, then the call in a box.

        Raises:
            ValueError: not one action GLM's PC space has.
        """
        width, height = image_size

        def box(x: float, y: float) -> str:
            return f"'[{to_grid(x, width, GRID)},{to_grid(y, height, GRID)}]'"

        if len(actions) != 1:
            raise ValueError("glmv writes one action per step")
        (action,) = actions
        match action:
            case events.Click(count=1) as click:
                name = "left_click" if click.button == "left" else f"{click.button}_click"
                call = f"{name}(start_box={box(click.x, click.y)})"
            case events.Click(button="left", count=2) as click:
                call = f"left_double_click(start_box={box(click.x, click.y)})"
            case events.Move() as move:
                call = f"hover(start_box={box(move.x, move.y)})"
            case events.Drag() as drag:
                call = (
                    f"left_drag(start_box={box(drag.x, drag.y)}, end_box={box(drag.x2, drag.y2)})"
                )
            case events.Scroll(direction="up" | "down", unit="notch") as scroll if (
                scroll.amount >= 1
            ):
                at = (
                    box(scroll.x, scroll.y)
                    if scroll.x is not None and scroll.y is not None
                    else None
                )
                where = f"start_box={at}, " if at else ""
                call = f"scroll({where}direction='{scroll.direction}', step={int(scroll.amount)})"
            case events.TypeText() as typed:
                call = f"type(content={typed.text!r})"
            case events.Hotkey() as hotkey if all("+" not in key for key in hotkey.keys):
                call = f"key(keys={'+'.join(hotkey.keys)!r})"
            case events.Wait():
                call = "WAIT()"
            case events.Finish():
                call = "DONE()"
            case events.Fail():
                call = "FAIL()"
            case _:
                raise ValueError(f"glmv cannot write {type(action).__name__}")
        head = " ".join(thought.split())
        if isinstance(action, events.Finish) and action.answer:
            head = action.answer
        return f"{head}\n<|begin_of_box|>{call}<|end_of_box|>"


def _call_parts(call: str) -> tuple[str, dict[str, Any]]:
    """The call's name and its keyword arguments, each a literal (never evaluated)."""
    try:
        tree = ast.parse(call.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise base.AgentParseError(
            f"glmv: the call is not well formed: {base.one_line(call, 80)}"
        ) from None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise base.AgentParseError(f"glmv: not a call: {base.one_line(call, 80)}")
    if node.args:
        raise base.AgentParseError(f"glmv: {node.func.id} takes keyword arguments only")
    args: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise base.AgentParseError(f"glmv: {node.func.id} has a ** argument")
        try:
            args[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise base.AgentParseError(
                f"glmv: {node.func.id}'s {keyword.arg} is not a literal"
            ) from None
    return node.func.id, args


class _Reader:
    def __init__(
        self,
        agent: GlmvAgent,
        name: str,
        args: dict[str, Any],
        raw: str,
        image: tuple[int, int],
        before: str,
    ) -> None:
        self.agent, self.name, self.args, self.raw = agent, name, args, raw
        self.image, self.before = image, before

    def actions(self) -> tuple[events.Action, ...]:
        name, raw = self.name, self.raw
        if name in _CLICKS:
            button, count = _CLICKS[name]
            x, y, mx, my = self._point("start_box")
            return (
                events.Click(x=x, y=y, button=button, count=count, model_x=mx, model_y=my, raw=raw),  # type: ignore[arg-type]
            )
        if name == "hover":
            x, y, mx, my = self._point("start_box")
            return (events.Move(x=x, y=y, model_x=mx, model_y=my, raw=raw),)
        if name == "left_drag":
            x, y, mx, my = self._point("start_box")
            x2, y2, mx2, my2 = self._point("end_box")
            return (
                events.Drag(
                    x=x,
                    y=y,
                    x2=x2,
                    y2=y2,
                    model_x=mx,
                    model_y=my,
                    model_x2=mx2,
                    model_y2=my2,
                    raw=raw,
                ),
            )
        if name == "key":
            return (self._key(),)
        if name == "type":
            content = self.args.get("content")
            if not isinstance(content, str) or not content:
                raise base.AgentParseError("glmv: type needs content")
            return (events.TypeText(text=content, raw=raw),)
        if name == "scroll":
            return (self._scroll(),)
        if name == "WAIT":
            return (events.Wait(seconds=self.agent.config.wait_s, raw=raw),)
        if name == "DONE":
            return (events.Finish(answer=self.before or None, raw=raw),)
        return (events.Fail(reason=self.before, raw=raw),)  # FAIL

    def _point(self, field: str) -> tuple[float, float, float, float]:
        value = self.args.get(field)
        numbers: list[Any] | None = None
        if isinstance(value, str):
            match = _POINT.match(value)
            numbers = [float(match[1]), float(match[2])] if match else None
        elif isinstance(value, list | tuple):
            flat = value[0] if len(value) == 1 and isinstance(value[0], list | tuple) else value
            numbers = list(flat[:2]) if len(flat) >= 2 else None
        if numbers is None or not all(map(finite_number, numbers)):
            raise base.AgentParseError(f"glmv: {self.name} needs {field}='[x,y]'")
        mx, my = float(numbers[0]), float(numbers[1])
        return grid_point(mx, my, self.image, GRID, truncate=True)

    def _key(self) -> events.Action:
        keys = self.args.get("keys")
        names = keys.split("+") if isinstance(keys, str) else keys
        if (
            not isinstance(names, list | tuple)
            or not names
            or not all(isinstance(k, str) and k.strip() for k in names)
        ):
            raise base.AgentParseError("glmv: key needs keys='ctrl+c'")
        cleaned = tuple(k.strip().lower() for k in names)
        for key in cleaned:
            try:
                to_playwright(key)
            except UnknownKeyError as error:
                raise base.AgentParseError(f"glmv: {error}") from None
        return events.Hotkey(keys=cleaned, raw=self.raw)

    def _scroll(self) -> events.Action:
        direction = self.args.get("direction")
        if direction not in ("up", "down"):
            raise base.AgentParseError(
                f"glmv: scroll needs direction 'up' or 'down', got {direction!r}"[:200]
            )
        step = self.args.get("step", 5)
        if not finite_number(step):
            raise base.AgentParseError("glmv: scroll's step must be a number")
        amount = min(max(float(step), 0.0), 50.0)
        if "start_box" in self.args:
            x, y, mx, my = self._point("start_box")
            return events.Scroll(
                direction=direction, amount=amount, x=x, y=y, model_x=mx, model_y=my, raw=self.raw
            )
        width, height = self.image  # the released tool scrolls at the screen's centre
        return events.Scroll(
            direction=direction,
            amount=amount,
            x=float(width // 2),
            y=float(height // 2),
            raw=self.raw,
        )
