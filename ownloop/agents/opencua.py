"""OpenCUA-7B, as OSWorld's ``mm_agents/opencua`` agent runs it (DESIGN §4).

Request (OSWorld's ``OpenCUAAgent.predict`` with ``use_old_sys_prompt``, ``action_history``): the
V1 system prompt of the chain-of-thought level (l2 by default); then the history as text, each
past step ``# Step i:\\n## Action:\\n<its action sentence>\\n`` (the code is never shown), the
last ``images - 1`` steps each after their own screenshot and all older ones merged into one
assistant message; then the current screenshot with the task instruction: ``images`` screenshots
in all (3).

Response: ``## Thought:`` / ``## Action:`` / ``## Code:`` sections (``## Observation:`` at l3),
found as OSWorld's regular expressions find them; the code is the last fenced block (tag
``python`` or ``code`` optional). It runs through ``pyautogui.py``'s whitelist interpreter —
never through Python. Numbers are absolute pixels of the screenshot's smart_resize space
(factor 28, min_pixels 3136: 1920x1080 is seen as 1932x1092), mapped back as OSWorld's "qwen25"
projection does: ``int(x / 1932 * 1920)``. A point with both numbers in [0, 1] is read as a
fraction: OSWorld multiplies it by the smart_resize size (``round(x * 1932)``, which can fall past
the screen's edge, where the VM's X server keeps the pointer on the last pixel); ownloop
multiplies by the page's own size (``round(x * 1920)``, at most its last pixel), so
``click(x=1, y=1)`` is the bottom-right corner either way; option
``fractions=false`` reads it as model pixels like every other point (the 7B's training format,
where (1, 1) is the top-left pixel).

Where ownloop departs from OSWorld, on purpose:
- A statement the whitelist refuses stops the block as ``python -c`` stops at a failing
  statement: earlier statements keep their actions and a ``Rejected`` action records the reason.
  OSWorld would run the code as it is; ownloop runs no model code at all.
- ``computer.wait``/``computer.terminate`` are recognised as calls the interpreter reaches, not as
  substrings of the block; as in OSWorld the step is then only WAIT / DONE / FAIL. The status
  rule is OSWorld's: FAIL when the lower-cased block contains "fail", else DONE when it contains
  "success" (else the response is a parse failure).
- Every pointer coordinate is projected, also those of scroll(x=, y=), mouseDown/mouseUp and
  computer.triple_click (OSWorld projects only click-like calls, moveTo and dragTo), and offsets
  of moveRel/dragRel.
- A block with nothing to do (only ``pass`` or imports) is a zero-second wait, so the episode
  goes on as OSWorld's would, instead of ending with no_action.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal

from msgspec import Meta

from ownloop.agents import base
from ownloop.agents.coordinates import Point, Size, smart_resize
from ownloop.agents.opencua_prompt import RELEASED_SPEC, prompt_texts
from ownloop.agents.opencua_render import render_response
from ownloop.agents.options import AgentOptions, Images, PyautoguiScrollPx
from ownloop.agents.pyautogui import CodeSyntaxError, interpret
from ownloop.agents.released import Released
from ownloop.agents.translation import TranslationStyle
from ownloop.errors import OwnloopError
from ownloop.store import events

__all__ = [
    "MAX_RESPONSE_CHARS",
    "OPENCUA_MIN_PIXELS",
    "OpenCuaAgent",
    "OpenCuaOptions",
    "QwenCoordinates",
    "code_blocks",
    "pointer_after",
    "sections",
]

MAX_RESPONSE_CHARS = 24_000
"""Longer responses are refused unread (2,048 tokens are about 8,000 characters)."""
OPENCUA_MIN_PIXELS = 3136  # OSWorld's qwen25 projection: smart_resize(factor 28, min 3136)

_SECTION = {
    name: re.compile(rf"^##\s*{name}\s*:?[\n\r]+(.*?)(?=^##|\Z)", re.DOTALL | re.MULTILINE)
    for name in ("Observation", "Thought", "Action")
}
_TAG = re.compile(r"\A(?:code|python)?\s*", re.IGNORECASE)


def sections(text: str) -> dict[str, str]:
    """The response's observation, thought and action sections (stripped), as OSWorld finds
    them: a '## Name' heading line, up to the next line starting with '##'."""
    found: dict[str, str] = {}
    for name, pattern in _SECTION.items():
        match = pattern.search(text)
        if match:
            found[name.lower()] = match.group(1).strip()
    return found


def code_blocks(text: str) -> list[str]:
    """Every fenced block's text (stripped), as OSWorld's pattern pairs the fences: an opening
    fence, an optional 'python'/'code' tag, the code, the next fence."""
    parts = text.split("```")
    blocks = []
    for index in range(1, len(parts) - 1, 2):
        body = parts[index]
        blocks.append(_TAG.sub("", body, count=1).strip())
    return blocks


class QwenCoordinates:
    """OSWorld's "qwen25" projection: model pixels of the smart-resized image → page pixels.

    Args:
        fractions: a point with both numbers in [0, 1] is a fraction of the page, kept on its
            last pixel (OSWorld multiplies it by the smart_resize size instead, then the X server
            clamps); False reads it as model pixels like any other.
    """

    def __init__(self, image: Size, model: Size, *, fractions: bool = True) -> None:
        self.image, self.model, self.fractions = image, model, fractions

    def point(self, x: float, y: float) -> Point:
        """``int(x / W' * W)``, as OSWorld; a point inside [0, 1]² is a fraction of the page
        (``round(x * W)``, at most ``W - 1``) unless ``fractions`` is off."""
        if self.fractions and 0 <= x <= 1 and 0 <= y <= 1:
            # The released VM's X server keeps the pointer on the screen: (1, 1) is its last pixel.
            return Point(
                float(min(round(x * self.image.width), self.image.width - 1)),
                float(min(round(y * self.image.height), self.image.height - 1)),
            )
        return Point(
            float(int(x / self.model.width * self.image.width)),
            float(int(y / self.model.height * self.image.height)),
        )

    def offset(self, dx: float, dy: float) -> Point:
        """A distance in model pixels, in page pixels."""
        return Point(
            dx * self.image.width / self.model.width, dy * self.image.height / self.model.height
        )


def pointer_after(history: Sequence[base.PastStep]) -> Point | None:
    """Where the pointer is after the history's actions (None: no action placed it)."""
    for past in reversed(history):
        for action in reversed(past.parsed.actions):
            match action:
                case events.Click() | events.Move():
                    return Point(action.x, action.y)
                case events.Drag():
                    return Point(action.x2, action.y2)
                case events.Scroll() | events.ButtonDown() | events.ButtonUp():
                    if action.x is not None and action.y is not None:
                        return Point(action.x, action.y)
    return None


class OpenCuaOptions(AgentOptions, frozen=True, kw_only=True):
    """The ``opencua`` agent's options; the defaults follow OSWorld's OpenCUA runner."""

    viewport: Annotated[
        str, Meta(description="page size WIDTHxHEIGHT (OSWorld's screen: 1920x1080)")
    ] = "1920x1080"
    cot: Annotated[
        Literal["l1", "l2", "l3"],
        Meta(description="chain-of-thought level of the V1 system prompt: l1, l2 or l3"),
    ] = "l2"
    images: Images = 3
    max_tokens: Annotated[
        int, Meta(ge=1, description="completion limit per call (the runner sends 2048)")
    ] = 2048
    pause: Annotated[
        float,
        Meta(
            ge=0, description="seconds to sleep after each step's actions (sleep_after_execution)"
        ),
    ] = 5.0
    scroll_px: PyautoguiScrollPx = 100.0
    wait_s: Annotated[float, Meta(ge=0, description="seconds computer.wait() waits")] = 5.0
    fractions: Annotated[
        bool,
        Meta(
            description="a point with both numbers in [0, 1] is a fraction of the screen, as "
            "OSWorld's qwen25 projection reads it (x=1, y=1: the bottom-right corner); "
            "false reads it as model pixels (the top-left pixel)"
        ),
    ] = True


class OpenCuaAgent(base.AgentBase[OpenCuaOptions]):
    """The ``opencua`` agent; pure and thread-safe (it keeps no state between calls)."""

    name = "opencua"
    options_type = OpenCuaOptions
    released_spec = RELEASED_SPEC
    max_response_chars = MAX_RESPONSE_CHARS

    def __init__(
        self, options: OpenCuaOptions | None = None, released: Released | None = None
    ) -> None:
        """The agent with ``options`` (None: the defaults) and the prompts of a clone of OSWorld
        (``mm_agents/opencua/prompts.py``; None: the built-in ones).

        Raises:
            OwnloopError: a released template has a placeholder other than its own.
        """
        super().__init__(options, released)
        self.texts = prompt_texts(self.config.cot, released)
        self.prompt_source = self.texts.source
        try:
            self.texts.instruction.format(instruction="")
            self.texts.step.format(step_num=1)
            self.texts.history.format(observation="", thought="", action="")
        except (KeyError, IndexError, ValueError) as error:
            path = self.texts.source.removeprefix("released:")
            raise OwnloopError(
                f"opencua: {path} has a template with an unexpected placeholder: {error!r}"
            ) from None

    def loop_settings(self) -> base.LoopSettings:
        config = self.config
        return base.LoopSettings(
            viewport=config.size(),
            sampling=events.Sampling(temperature=0.0, top_p=0.9, max_tokens=config.max_tokens),
            images=config.images,
            calls_per_step=5,  # OSWorld's max_retry
            resample_temperature=0.2,  # max(0.2, temperature) after the first call
            stop_only=True,  # its call_llm retries until finish_reason == "stop"
            pause_s=config.pause,
            max_steps=100,
        )

    def translation_style(self) -> TranslationStyle:
        return TranslationStyle(notch_px=self.config.scroll_px)

    # ------------------------------------------------------------------ request

    def build_messages(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> tuple[events.Message, ...]:
        """System prompt; the history (the last images-1 steps after their screenshots, older
        ones merged into one assistant message first); the screenshot and the instruction."""
        messages = [events.Message(role="system", parts=(events.TextPart(text=self.texts.system),))]
        count = len(history)
        merged: list[str] = []
        for index, past in enumerate(history):
            action = sections(past.response).get("action")
            text = self.texts.step.format(step_num=index + 1) + self.texts.history.format(
                observation=None, thought=None, action=action
            )
            if index > count - self.config.images:
                messages.append(events.Message(role="user", parts=(past.observation.screenshot,)))
                messages.append(
                    events.Message(role="assistant", parts=(events.TextPart(text=text),))
                )
            else:
                merged.append(text)
                if index == count - self.config.images:
                    messages.append(
                        events.Message(
                            role="assistant", parts=(events.TextPart(text="\n".join(merged)),)
                        )
                    )
        instruction = self.texts.instruction.format(instruction=self.task_text(task))
        messages.append(
            events.Message(role="user", parts=(now.screenshot, events.TextPart(text=instruction)))
        )
        return tuple(messages)

    # ------------------------------------------------------------------ response

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[base.PastStep]
    ) -> base.Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height); the
        pointer starts where ``history``'s actions left it."""
        found = sections(text)
        blocks = code_blocks(text)
        if not blocks:
            raise base.AgentParseError("no code block (```python ... ```) in the response")
        code = blocks[-1]
        if not code:
            raise base.AgentParseError("the code block is empty")
        image = Size(*image_size)
        model = smart_resize(image, min_pixels=OPENCUA_MIN_PIXELS)
        pointer = pointer_after(history)
        projection = QwenCoordinates(image, model, fractions=self.config.fractions)
        try:
            outcome = interpret(code, projection, pointer=pointer)
        except CodeSyntaxError as error:
            raise base.AgentParseError(f"code: {error}") from None
        thought = found.get("thought", "")
        control = outcome.control
        actions: tuple[events.Action, ...]
        if control is not None and control.name == "terminate":
            actions = (self._terminate(code, control.answer, found, control.raw),)
        elif "action" not in found:
            raise base.AgentParseError("no '## Action:' section in the response")
        elif control is not None:  # computer.wait
            actions = (events.Wait(seconds=self.config.wait_s, raw=control.raw),)
        else:
            actions = outcome.actions or (events.Wait(seconds=0.0, raw=base.clip(code, 500)),)
        return base.Parsed(thought=thought, actions=actions, model_size=(model.width, model.height))

    @staticmethod
    def _terminate(code: str, answer: object, found: dict[str, str], raw: str) -> events.Action:
        lower = code.lower()
        if answer is not None:
            said: str | None = str(answer)
        else:  # V1 has no answer field: the step's thought and action text stand for it
            said = "\n\n".join(found[k] for k in ("thought", "action") if found.get(k)) or None
        if "fail" in lower:
            return events.Fail(reason=said or "", raw=raw)
        if "success" in lower:
            return events.Finish(answer=said, raw=raw)
        raise base.AgentParseError("computer.terminate needs status='success' or status='failure'")

    # ------------------------------------------------------------------ execution and end

    def ending(self, parsed: base.Parsed, history: Sequence[base.PastStep]) -> base.Ending | None:
        """terminate(success) ends finished with the answer; terminate(failure) ends fail."""
        return base.first_ending(parsed, "terminate:success", "terminate:failure")

    def render(
        self, thought: str, actions: Sequence[events.Action], image_size: tuple[int, int]
    ) -> str:
        """The response OpenCUA would write for ``actions`` (page coordinates of a screenshot
        of ``image_size``), in the l2 layout with numbers in its smart_resize space.

        Raises:
            ValueError: an action or a thought this grammar cannot express.
        """
        image = Size(*image_size)
        model = smart_resize(image, min_pixels=OPENCUA_MIN_PIXELS)
        return render_response(thought, actions, image, model)
