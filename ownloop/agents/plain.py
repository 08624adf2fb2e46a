"""OSWorld's baseline agent in its pyautogui action space: plain pyautogui code (agent
``pyautogui``), as ``mm_agents/agent.py``'s ``PromptAgent`` runs it with the screenshot
observation (``scripts/python/run_multienv.py``'s defaults).

Request: one system message (the system prompt, then the task: "You are asked to complete the
following task: ..."), then the last ``history`` steps (3), each a user turn with its screenshot
and an assistant turn with that step's whole response, then the current screenshot. Sampling:
temperature 1.0, top_p 0.9, max_tokens 1500; 15 steps.

Response: free text, then fenced code. As the released parser reads it: every ``;`` becomes a
line break first (also inside a string: ``write('a;b')`` breaks there, as it does in OSWorld);
a response that is then just ``WAIT``, ``DONE`` or ``FAIL`` is that special code; otherwise
each fenced block (an optional tag word, ``python``, then the code) is one action, in order,
and a block that is a special code, or ends with one on its last line, gives it after the code
before it. The code runs through ``pyautogui.py``'s whitelist interpreter, never through
Python; its numbers are absolute pixels of the screenshot (frame ``pixels``). ``DONE`` ends the
episode finished (no answer: this action space has none), ``FAIL`` ends it ``fail``, ``WAIT``
waits ``wait_s`` (OSWorld sleeps its step pause, ``--sleep_after_execution``, 0 by default);
what follows ``DONE`` or ``FAIL`` is not run, as OSWorld's loop stops at ``done``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated

from msgspec import Meta

from ownloop.agents import base
from ownloop.agents.coordinates import Point, Size
from ownloop.agents.frames import Frame
from ownloop.agents.opencua import pointer_after
from ownloop.agents.opencua_render import code_lines
from ownloop.agents.options import AgentOptions, MaxTokens, PyautoguiScrollPx
from ownloop.agents.pyautogui import CodeSyntaxError, interpret
from ownloop.agents.translation import TranslationStyle
from ownloop.store import events

__all__ = ["PlainAgent", "PlainOptions", "code_actions"]

SPECIAL = ("WAIT", "DONE", "FAIL")
_FENCED = re.compile(r"```(?:\w+\s+)?(.*?)```", re.DOTALL)

_SYSTEM = (
    "You control a computer's mouse and keyboard by writing Python code that uses the pyautogui "
    "module. Each step you are shown a screenshot of the screen; decide the next action from "
    "it. Write a short reflection on the screenshot and on what was done so far, then the code "
    "in a fenced block:\n```python\npyautogui.click(960, 540)\n```\nCoordinates are pixels of "
    "the screenshot. Each block must stand alone (nothing is kept from earlier steps); put a "
    "short time.sleep(0.5) between several actions. Instead of code you may answer one of three "
    "special codes, each in its own fenced block: ```WAIT``` to wait, ```FAIL``` when the task "
    "cannot be done (try hard first), ```DONE``` when the task is complete. Answer nothing but "
    "the reflection and the code or special code."
)
_TASK = "\nYou are asked to complete the following task: {task}"
_LOOK = "Here is the screenshot. What is the next step towards the task?"


class PlainOptions(AgentOptions, frozen=True, kw_only=True):
    """The ``pyautogui`` agent's options; the defaults follow OSWorld's ``run_multienv.py``."""

    viewport: Annotated[
        str, Meta(description="page size WIDTHxHEIGHT (OSWorld's screen: 1920x1080)")
    ] = "1920x1080"
    history: Annotated[
        int,
        Meta(
            ge=0,
            description="earlier steps sent, each its screenshot and response (the "
            "released max_trajectory_length)",
        ),
    ] = 3
    temperature: Annotated[float, Meta(ge=0, description="sampling temperature")] = 1.0
    max_tokens: MaxTokens = 1500
    max_steps: Annotated[int, Meta(ge=1, description="steps per episode")] = 15
    wait_s: Annotated[float, Meta(ge=0, description="seconds WAIT waits")] = 0.0
    scroll_px: PyautoguiScrollPx = 100.0


class _Pixels:
    """The model's numbers are page pixels."""

    def point(self, x: float, y: float) -> Point:
        return Point(float(x), float(y))

    def offset(self, dx: float, dy: float) -> Point:
        return Point(float(dx), float(dy))


def code_actions(text: str) -> list[str]:
    """The response's actions as OSWorld's parser lists them: code blocks and special codes,
    in order (module docstring)."""
    joined = "\n".join(piece.strip() for piece in text.split(";") if piece.strip())
    if joined.strip() in SPECIAL:
        return [joined.strip()]
    out: list[str] = []
    for match in _FENCED.findall(joined):
        block = match.strip()
        lines = block.split("\n")
        if block in SPECIAL:
            out.append(block)
        elif lines[-1] in SPECIAL:
            if len(lines) > 1:
                out.append("\n".join(lines[:-1]))
            out.append(lines[-1])
        else:
            out.append(block)
    return out


class PlainAgent(base.AgentBase[PlainOptions]):
    """The ``pyautogui`` agent; pure and thread-safe."""

    name = "pyautogui"
    options_type = PlainOptions
    coordinate_frame: Frame = "pixels"

    def loop_settings(self) -> base.LoopSettings:
        config = self.config
        return base.LoopSettings(
            viewport=config.size(),
            sampling=events.Sampling(
                temperature=config.temperature, top_p=0.9, max_tokens=config.max_tokens
            ),
            images=config.history + 1,
            max_steps=config.max_steps,
        )

    def translation_style(self) -> TranslationStyle:
        return TranslationStyle(notch_px=self.config.scroll_px)

    def build_messages(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> tuple[events.Message, ...]:
        system = _SYSTEM + _TASK.format(task=self.task_text(task))
        messages = [events.Message(role="system", parts=(events.TextPart(text=system),))]
        kept = history[len(history) - self.config.history :] if self.config.history else ()
        for past in kept:
            shown: tuple[events.Part, ...] = (
                events.TextPart(text=_LOOK),
                past.observation.screenshot,
            )
            messages.append(events.Message(role="user", parts=shown))
            said = past.response.strip() or "No valid action"
            messages.append(events.Message(role="assistant", parts=(events.TextPart(text=said),)))
        messages.append(
            events.Message(role="user", parts=(events.TextPart(text=_LOOK), now.screenshot))
        )
        return tuple(messages)

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[base.PastStep]
    ) -> base.Parsed:
        codes = code_actions(text)
        if not codes:
            raise base.AgentParseError(
                "no code block (```python ... ```) and no WAIT, DONE or FAIL"
            )
        thought = "" if text.strip() in SPECIAL else text.split("```", 1)[0].strip()
        pointer = pointer_after(history)
        actions: list[events.Action] = []
        for code in codes:
            if code == "WAIT":
                actions.append(events.Wait(seconds=self.config.wait_s, raw=code))
                continue
            if code in ("DONE", "FAIL"):
                actions.append(events.Finish(raw=code) if code == "DONE" else events.Fail(raw=code))
                break  # OSWorld's loop stops at done
            try:
                outcome = interpret(code, _Pixels(), pointer=pointer)
            except CodeSyntaxError as error:
                raise base.AgentParseError(f"code: {error}") from None
            actions.extend(outcome.actions)
            pointer = outcome.pointer
            if outcome.control is not None:  # computer.* is OpenCUA's, not pyautogui
                actions.append(
                    events.Rejected(
                        reason=f"{outcome.control.raw} is not pyautogui", raw=code[:500]
                    )
                )
        if not actions:
            actions.append(
                events.Wait(seconds=0.0, raw=codes[0][:500])
            )  # a block with nothing to do
        return base.Parsed(thought=thought, actions=tuple(actions), model_size=image_size)

    def ending(self, parsed: base.Parsed, history: Sequence[base.PastStep]) -> base.Ending | None:
        """DONE ends finished (no answer); FAIL ends fail."""
        return base.first_ending(parsed, "DONE", "FAIL", answer=False)

    def render(
        self, thought: str, actions: Sequence[events.Action], image_size: tuple[int, int]
    ) -> str:
        """The response the baseline would write: the reflection, then one block.

        Raises:
            ValueError: an action plain pyautogui cannot express (goto, an answer, ...).
        """
        if not actions:
            raise ValueError("nothing to render: no actions")
        if "```" in thought:
            raise ValueError("pyautogui cannot express a thought with ```")
        ends = [a for a in actions if isinstance(a, events.Finish | events.Fail)]
        if ends and len(actions) > 1:
            raise ValueError("DONE and FAIL are the whole step")
        head = " ".join(thought.split())
        if ends:
            end = ends[0]
            if isinstance(end, events.Finish) and end.answer:
                raise ValueError("pyautogui cannot write Finish with an answer")
            return f"{head}\n```{'DONE' if isinstance(end, events.Finish) else 'FAIL'}```"
        size = Size(*image_size)
        code = code_lines(actions, size, size, fractions=False)
        if ";" in code:
            raise ValueError("pyautogui cannot write a ';' (the released parser splits on it)")
        return f"{head}\n```python\n{code}\n```"
