"""H Company's Holo (Holo1.5 / Holo2 / Holo3) in their published web navigation loop.

The model answers one structured JSON object per step, against a schema the request states: a
``note`` (what it wants to remember), a ``thought`` and an ``action``, one of

- ``click_element``: ``element`` (what it clicks, in words), ``x``, ``y``;
- ``write_element_abs``: ``content``, ``element``, ``x``, ``y``: click there, then type;
- ``scroll``: ``direction`` (up, down, left, right);
- ``go_back``; ``goto``: ``url``; ``wait``: ``seconds``; ``answer``: ``content`` (ends the episode
  with it as the answer); ``refresh`` and ``restart`` are refused (no operation does them).

``x`` and ``y`` are integers in [0, 1000] relative to the image sent (frame ``relative-1000``):
page x = x * W / 1000. JSON that does not fit the schema is a parse error naming the field (a
missing ``action.x``, an ``x`` of 1001, a ``direction`` of "sideways"), re-sampled.

Thinking (``-o thinking=true``): the model writes ``<think>...</think>`` before the JSON; either
way a leading think block is read as the step's reasoning. The switch is also sent on the wire,
as Holo's chat template takes it: every request carries ``chat_template_kwargs:
{"enable_thinking": true|false}`` in its body (H Company's API, and vLLM serving Holo3; the
OpenAI client's ``extra_body``), recorded with the call's sampling; ``-o thinking_switch=thinking``
sends ``{"thinking": ...}`` instead (the key vLLM's ``holo2`` reasoning parser reads), ``none``
sends no switch. The request holds the system text
with the schema, then one user turn: the task, the earlier steps' notes, thoughts and actions as
JSON under ``## Step N`` headings (the last ``history``), and the current screenshot only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from msgspec import Meta

from ownloop.agents import base
from ownloop.agents.coordinates import finite_number
from ownloop.agents.frames import Frame, grid_point, split_think, to_grid
from ownloop.agents.options import AgentOptions, MaxTokens
from ownloop.store import events

__all__ = ["SCHEMA", "HoloAgent", "HoloOptions"]

GRID = 1000
MAX_WAIT_S = 60.0

_POINT = {"type": "integer", "minimum": 0, "maximum": GRID}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["note", "thought", "action"],
    "properties": {
        "note": {"type": "string", "description": "what to remember for later steps"},
        "thought": {"type": "string", "description": "why this action"},
        "action": {
            "oneOf": [
                {"action": "click_element", "element": "string", "x": _POINT, "y": _POINT},
                {
                    "action": "write_element_abs",
                    "content": "string",
                    "element": "string",
                    "x": _POINT,
                    "y": _POINT,
                },
                {"action": "scroll", "direction": ["up", "down", "left", "right"]},
                {"action": "go_back"},
                {"action": "goto", "url": "string"},
                {"action": "wait", "seconds": "number"},
                {"action": "answer", "content": "string"},
            ]
        },
    },
}


class HoloOptions(AgentOptions, frozen=True, kw_only=True):
    """The ``holo`` agent's options."""

    thinking: Annotated[
        bool,
        Meta(
            description="ask for a <think> block before the JSON (a think block is read either way)"
        ),
    ] = False
    thinking_switch: Annotated[
        Literal["enable_thinking", "thinking", "none"],
        Meta(
            description="the chat-template switch each request sends as chat_template_kwargs: "
            "enable_thinking (H Company's API, Holo3), thinking (vLLM's holo2 reasoning parser) "
            "or none"
        ),
    ] = "enable_thinking"
    history: Annotated[
        int, Meta(ge=0, description="earlier steps shown as JSON in the user turn")
    ] = 10
    scroll_notches: Annotated[
        float, Meta(gt=0, description="wheel notches of one scroll action")
    ] = 5.0
    write_enter: Annotated[bool, Meta(description="press Enter after write_element_abs's text")] = (
        False
    )
    max_tokens: MaxTokens = 2048


class HoloAgent(base.AgentBase[HoloOptions]):
    """The ``holo`` agent; pure and thread-safe."""

    name = "holo"
    options_type = HoloOptions
    coordinate_frame: Frame = "relative-1000"
    types_at_a_point = True
    """write_element_abs clicks its point first: the scripted expert gives the field's."""

    def loop_settings(self) -> base.LoopSettings:
        return base.LoopSettings(
            viewport=self.config.size(),
            sampling=events.Sampling(
                temperature=0.0,
                max_tokens=self.config.max_tokens,
                chat_template_kwargs=self.thinking_kwargs(),
            ),
            images=1,
            resample_temperature=None,
            max_steps=30,
        )

    def thinking_kwargs(self) -> dict[str, bool] | None:
        """The chat-template switch every request sends (``chat_template_kwargs``)."""
        key = self.config.thinking_switch
        return None if key == "none" else {key: self.config.thinking}

    def system_message(self) -> str:
        think = (
            "Think first inside <think>...</think>, then answer with the JSON object."
            if self.config.thinking
            else "Answer with the JSON object only."
        )
        return (
            "You are a web navigation agent. Each step you see a screenshot of the browser and "
            "choose one action. Points are integers x, y from 0 to 1000 across the width and "
            "height of the screenshot.\nAnswer with one JSON object that fits this schema:\n"
            f"{json.dumps(SCHEMA)}\n{think}"
        )

    def build_messages(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> tuple[events.Message, ...]:
        shown = history[len(history) - min(len(history), self.config.history) :]
        steps = [
            f"## Step {len(history) - len(shown) + index + 1}\n{_step_json(past.response)}"
            for index, past in enumerate(shown)
        ]
        text = f"Task: {self.task_text(task)}\nPrevious steps:\n" + (
            "\n".join(steps) if steps else "None"
        )
        return (
            events.Message(role="system", parts=(events.TextPart(text=self.system_message()),)),
            events.Message(role="user", parts=(events.TextPart(text=text), now.screenshot)),
        )

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[base.PastStep]
    ) -> base.Parsed:
        think, rest = split_think(text)
        step = _json_object(rest)
        for field in ("note", "thought"):
            if field in step and not isinstance(step[field], str):
                raise base.AgentParseError(f"holo: {field} must be text")
        action = step.get("action")
        if not isinstance(action, dict):
            raise base.AgentParseError("holo: action must be an object")
        thought = "\n".join(part for part in (think, str(step.get("thought", "")).strip()) if part)
        raw = json.dumps(action, ensure_ascii=False)
        actions = _Reader(self, action, raw, image_size).actions()
        return base.Parsed(thought=thought, actions=actions, model_size=(GRID, GRID))

    def ending(self, parsed: base.Parsed, history: Sequence[base.PastStep]) -> base.Ending | None:
        return base.first_ending(parsed, "answer")

    def render(
        self, thought: str, actions: Sequence[events.Action], image_size: tuple[int, int]
    ) -> str:
        """The JSON Holo would write (note, thought, action) for one action, or a click then
        text typed (write_element_abs).

        Raises:
            ValueError: the actions are not one Holo action.
        """
        width, height = image_size

        def point(x: float, y: float) -> dict[str, int]:
            return {"x": to_grid(x, width, GRID), "y": to_grid(y, height, GRID)}

        body: dict[str, Any]
        match list(actions):
            case [events.Click(button="left", count=1) as click]:
                body = {
                    "action": "click_element",
                    "element": "the target",
                    **point(click.x, click.y),
                }
            case [events.Click(button="left", count=1) as click, events.TypeText() as typed]:
                body = {
                    "action": "write_element_abs",
                    "content": typed.text,
                    "element": "the field",
                    **point(click.x, click.y),
                }
            case [events.Scroll(unit="notch") as scroll] if scroll.x is None:
                body = {"action": "scroll", "direction": scroll.direction}
            case [events.Back()]:
                body = {"action": "go_back"}
            case [events.Goto() as goto]:
                body = {"action": "goto", "url": goto.url}
            case [events.Wait() as wait]:
                body = {"action": "wait", "seconds": wait.seconds}
            case [events.Finish() as finish]:
                body = {"action": "answer", "content": finish.answer or ""}
            case _:
                raise ValueError(f"holo cannot write {[type(a).__name__ for a in actions]}")
        step = {"note": "", "thought": " ".join(thought.split()), "action": body}
        return json.dumps(step, ensure_ascii=False)


def _step_json(response: str) -> str:
    """An earlier response as the next prompt shows it: its JSON without the think block."""
    return split_think(response)[1].strip()


def _json_object(text: str) -> dict[str, Any]:
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        value, _ = json.JSONDecoder().raw_decode(body)
    except (ValueError, RecursionError):
        raise base.AgentParseError(
            f"holo: the response is not a JSON object: {base.one_line(body, 80)}"
        ) from None
    if not isinstance(value, dict):
        raise base.AgentParseError(
            f"holo: the response is not a JSON object: {base.one_line(body, 80)}"
        )
    return value


class _Reader:
    """One action object checked against the schema, as agent-neutral actions."""

    def __init__(
        self, agent: HoloAgent, action: dict[str, Any], raw: str, image: tuple[int, int]
    ) -> None:
        self.agent, self.action, self.raw, self.image = agent, action, raw, image
        name = action.get("action")
        if not isinstance(name, str):
            raise base.AgentParseError("holo: action.action must be the action's name")
        self.name = name

    def actions(self) -> tuple[events.Action, ...]:
        name, raw = self.name, self.raw
        if name == "click_element":
            x, y, mx, my = self._point()
            return (events.Click(x=x, y=y, model_x=mx, model_y=my, raw=raw),)
        if name == "write_element_abs":
            content = self._text("content")
            x, y, mx, my = self._point()
            out: list[events.Action] = [
                events.Click(x=x, y=y, model_x=mx, model_y=my, raw=raw),
                events.TypeText(text=content, raw=raw),
            ]
            if self.agent.config.write_enter:
                out.append(events.Hotkey(keys=("Enter",), raw=raw))
            return tuple(out)
        if name == "scroll":
            direction = self.action.get("direction")
            if direction not in ("up", "down", "left", "right"):
                raise base.AgentParseError(
                    f"holo: action.direction must be up, down, left or right, got {direction!r}"[
                        :200
                    ]
                )
            amount = self.agent.config.scroll_notches
            return (events.Scroll(direction=direction, amount=amount, raw=raw),)
        if name == "go_back":
            return (events.Back(raw=raw),)
        if name == "goto":
            return (events.Goto(url=self._text("url"), raw=raw),)
        if name == "wait":
            seconds = self.action.get("seconds", 1.0)
            if not finite_number(seconds):
                raise base.AgentParseError("holo: action.seconds must be a number")
            return (events.Wait(seconds=min(max(float(seconds), 0.0), MAX_WAIT_S), raw=raw),)
        if name == "answer":
            return (events.Finish(answer=self._text("content"), raw=raw),)
        if name in ("refresh", "restart"):
            raise base.AgentParseError(f"holo: {name} is not in ownloop's holo action space")
        raise base.AgentParseError(f"holo: action.action {name[:40]!r} is not in the schema")

    def _text(self, field: str) -> str:
        value = self.action.get(field)
        if not isinstance(value, str):
            raise base.AgentParseError(f"holo: action.{field} must be text")
        return value

    def _point(self) -> tuple[float, float, float, float]:
        found = []
        for field in ("x", "y"):
            value: Any = self.action.get(field)
            if not finite_number(value) or not 0 <= value <= GRID:
                got = base.one_line(repr(value), 80)
                raise base.AgentParseError(
                    f"holo: action.{field} must be a number in [0, 1000], got {got}"
                )
            found.append(float(value))
        mx, my = found
        return grid_point(mx, my, self.image, GRID, truncate=False)
