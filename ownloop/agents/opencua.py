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
projection does: ``int(x / 1932 * 1920)``.

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
  of moveRel/dragRel. A point with both numbers in [0, 1] is read as a fraction of the page
  (OSWorld multiplies it by the resized size, a small bug).
- A block with nothing to do (only ``pass`` or imports) is a zero-second wait, so the episode
  goes on as OSWorld's would, instead of ending with no_action.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence

from ownloop.agents.base import (
    AgentParseError,
    Ending,
    LoopSettings,
    Observation,
    Parsed,
    PastStep,
    task_text,
)
from ownloop.agents.coordinates import Point, Size, smart_resize
from ownloop.agents.opencua_prompt import BUILTIN, COT_LEVELS, PromptTexts, load_prompts
from ownloop.agents.opencua_render import render_response
from ownloop.agents.options import OptionCheck
from ownloop.agents.pyautogui import CodeSyntaxError, interpret
from ownloop.agents.translation import TranslationStyle, translate_action
from ownloop.store.events import (
    Action,
    ButtonDown,
    ButtonUp,
    Click,
    Drag,
    Fail,
    Finish,
    Message,
    Move,
    Op,
    Sampling,
    Scroll,
    Task,
    TextPart,
    Wait,
)

__all__ = [
    "MAX_RESPONSE_CHARS",
    "OPENCUA_MIN_PIXELS",
    "OpenCuaAgent",
    "QwenCoordinates",
    "code_blocks",
    "pointer_after",
    "sections",
]

MAX_RESPONSE_CHARS = 24_000
"""Longer responses are refused unread (2,048 tokens are about 8,000 characters)."""
OPENCUA_MIN_PIXELS = 3136  # OSWorld's qwen25 projection: smart_resize(factor 28, min 3136)

_PARSER_REVISION = 1
_warned = False
_SECTION = {
    name: re.compile(rf"^##\s*{name}\s*:?[\n\r]+(.*?)(?=^##|\Z)", re.DOTALL | re.MULTILINE)
    for name in ("Observation", "Thought", "Action")
}
_TAG = re.compile(r"(?:code|python)?\s*", re.IGNORECASE)


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
        blocks.append(body[_TAG.match(body).end():].strip())  # type: ignore[union-attr]
    return blocks


class QwenCoordinates:
    """OSWorld's "qwen25" projection: model pixels of the smart-resized image → page pixels."""

    def __init__(self, image: Size, model: Size) -> None:
        self.image, self.model = image, model

    def point(self, x: float, y: float) -> Point:
        """``int(x / W' * W)``, as OSWorld; a point inside [0, 1]² is a fraction of the page."""
        if 0 <= x <= 1 and 0 <= y <= 1:
            return Point(float(round(x * self.image.width)), float(round(y * self.image.height)))
        return Point(float(int(x / self.model.width * self.image.width)),
                     float(int(y / self.model.height * self.image.height)))

    def offset(self, dx: float, dy: float) -> Point:
        """A distance in model pixels, in page pixels."""
        return Point(dx * self.image.width / self.model.width,
                     dy * self.image.height / self.model.height)


def pointer_after(history: Sequence[PastStep]) -> Point | None:
    """Where the pointer is after the history's actions (None: no action placed it)."""
    for past in reversed(history):
        for action in reversed(past.parsed.actions):
            match action:
                case Click() | Move():
                    return Point(action.x, action.y)
                case Drag():
                    return Point(action.x2, action.y2)
                case Scroll() | ButtonDown() | ButtonUp():
                    if action.x is not None and action.y is not None:
                        return Point(action.x, action.y)
    return None


class OpenCuaAgent:
    """The ``opencua`` agent; pure and thread-safe (it keeps no state between calls)."""

    name = "opencua"
    parser_name = "opencua"
    parser_version = f"ownloop {_PARSER_REVISION}"

    def __init__(
        self,
        *,
        viewport: tuple[int, int] | str = (1920, 1080),
        cot: str = "l2",
        images: int = 3,
        max_tokens: int = 2048,
        pause: float = 5.0,
        scroll_px: float = 100.0,
        wait_s: float = 5.0,
        released: str | None = None,
    ) -> None:
        """Options, all recorded in RunStarted; the defaults follow OSWorld's OpenCUA runner.

        Args:
            viewport: page size (width, height) or "WIDTHxHEIGHT" (OSWorld's screen: 1920x1080).
            cot: chain-of-thought level of the V1 system prompt: l1, l2 or l3.
            images: screenshots per request, the current one included.
            max_tokens: completion limit per call (the runner sends 2048).
            pause: seconds to sleep after each step's actions (sleep_after_execution).
            scroll_px: page pixels of one pyautogui scroll click.
            wait_s: seconds computer.wait() waits.
            released: clones of OSWorld to read mm_agents/opencua/prompts.py from (colon list;
                None: $OWNLOOP_PATH).

        Raises:
            OwnloopError: an option has the wrong type or is out of range.
        """
        check = OptionCheck(self.name)
        self.viewport = check.viewport(viewport)
        check.that(cot in COT_LEVELS, f"cot must be one of {', '.join(COT_LEVELS)}, got {cot!r}")
        self.cot = cot
        self.images = check.number("images", images, int)
        self.max_tokens = check.number("max_tokens", max_tokens, int)
        self.pause = check.number("pause", pause, float)
        self.scroll_px = check.number("scroll_px", scroll_px, float)
        self.wait_s = check.number("wait_s", wait_s, float)
        check.that(self.images >= 1, "images must be at least 1 (the current screenshot)")
        check.that(self.max_tokens >= 1, "max_tokens must be at least 1")
        check.that(self.pause >= 0 and self.wait_s >= 0, "pause and wait_s must not be negative")
        check.that(self.scroll_px > 0, "scroll_px must be positive")
        check.that(released is None or isinstance(released, str),
                   "released must be a folder list like /src/OSWorld:/src/other")
        self.released = released
        self.texts = self._texts(check)
        self.prompt_source = self.texts.source
        self.settings = LoopSettings(
            viewport=self.viewport,
            sampling=Sampling(temperature=0.0, top_p=0.9, max_tokens=self.max_tokens),
            images=self.images,
            calls_per_step=5,  # OSWorld's max_retry
            resample_temperature=0.2,  # max(0.2, temperature) after the first call
            stop_only=True,  # its call_llm retries until finish_reason == "stop"
            pause_s=self.pause,
            max_steps=100,
        )
        self._style = TranslationStyle(notch_px=self.scroll_px)

    def _texts(self, check: OptionCheck) -> PromptTexts:
        global _warned
        found = load_prompts(self.cot, self.released)
        if found is None:
            if not _warned:
                _warned = True
                warnings.warn("opencua: OSWorld's mm_agents/opencua/prompts.py not found under "
                              "--released/$OWNLOOP_PATH; using ownloop's built-in prompt",
                              stacklevel=3)
            return BUILTIN[self.cot]
        try:
            found.instruction.format(instruction="")
            found.step.format(step_num=1)
            found.history.format(observation="", thought="", action="")
        except (KeyError, IndexError, ValueError) as error:
            path = found.source.removeprefix("released:")
            check.that(False, f"{path} has a template with an unexpected placeholder: {error!r}")
        return found

    def options(self) -> dict[str, str | int | float | bool | None]:
        """The agent's own settings, recorded in RunStarted."""
        return {
            "viewport": f"{self.viewport[0]}x{self.viewport[1]}",
            "cot": self.cot,
            "images": self.images,
            "max_tokens": self.max_tokens,
            "pause": self.pause,
            "scroll_px": self.scroll_px,
            "wait_s": self.wait_s,
            "released": self.released,
        }

    # ------------------------------------------------------------------ request

    def build_messages(
        self, task: Task, history: Sequence[PastStep], now: Observation
    ) -> tuple[Message, ...]:
        """System prompt; the history (the last images-1 steps after their screenshots, older
        ones merged into one assistant message first); the screenshot and the instruction."""
        messages = [Message(role="system", parts=(TextPart(text=self.texts.system),))]
        count = len(history)
        merged: list[str] = []
        for index, past in enumerate(history):
            action = sections(past.response).get("action")
            text = self.texts.step.format(step_num=index + 1) + self.texts.history.format(
                observation=None, thought=None, action=action)
            if index > count - self.images:
                messages.append(Message(role="user", parts=(past.observation.screenshot,)))
                messages.append(Message(role="assistant", parts=(TextPart(text=text),)))
            else:
                merged.append(text)
                if index == count - self.images:
                    messages.append(Message(role="assistant",
                                            parts=(TextPart(text="\n".join(merged)),)))
        instruction = self.texts.instruction.format(instruction=task_text(task))
        messages.append(Message(role="user", parts=(now.screenshot, TextPart(text=instruction))))
        return tuple(messages)

    # ------------------------------------------------------------------ response

    def parse(
        self,
        text: str,
        image_size: tuple[int, int],
        history: Sequence[PastStep] | None = None,
    ) -> Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height).

        Args:
            history: the steps before this one; the pointer starts where their actions left it
                (None: unknown, e.g. when re-parsing one response on its own).

        Raises:
            AgentParseError: whatever went wrong, in one line; nothing else escapes.
        """
        try:
            return self._parse(text, image_size, history)
        except AgentParseError:
            raise
        except Exception as error:  # noqa: BLE001 - the contract: only AgentParseError escapes
            raise AgentParseError(f"opencua parser failed: {type(error).__name__}") from error

    def _parse(self, text: str, image_size: tuple[int, int],
               history: Sequence[PastStep] | None) -> Parsed:
        if not isinstance(text, str):
            raise AgentParseError(f"response is {type(text).__name__}, not text")
        if len(text) > MAX_RESPONSE_CHARS:
            raise AgentParseError(f"response too long ({len(text)} characters; the limit is "
                                  f"{MAX_RESPONSE_CHARS})")
        found = sections(text)
        blocks = code_blocks(text)
        if not blocks:
            raise AgentParseError("no code block (```python ... ```) in the response")
        code = blocks[-1]
        if not code:
            raise AgentParseError("the code block is empty")
        image = Size(*image_size)
        model = smart_resize(image, min_pixels=OPENCUA_MIN_PIXELS)
        pointer = None if history is None else pointer_after(history)
        try:
            outcome = interpret(code, QwenCoordinates(image, model), pointer=pointer)
        except CodeSyntaxError as error:
            raise AgentParseError(f"code: {error}") from None
        thought = found.get("thought", "")
        control = outcome.control
        actions: tuple[Action, ...]
        if control is not None and control.name == "terminate":
            actions = (self._terminate(code, control.answer, found, control.raw),)
        elif "action" not in found:
            raise AgentParseError("no '## Action:' section in the response")
        elif control is not None:  # computer.wait
            actions = (Wait(seconds=self.wait_s, raw=control.raw),)
        else:
            actions = outcome.actions or (Wait(seconds=0.0, raw=_clip(code, 500)),)
        return Parsed(thought=thought, actions=actions, model_size=(model.width, model.height))

    @staticmethod
    def _terminate(code: str, answer: object, found: dict[str, str], raw: str) -> Action:
        lower = code.lower()
        if answer is not None:
            said: str | None = str(answer)
        else:  # V1 has no answer field: the step's thought and action text stand for it
            said = "\n\n".join(found[k] for k in ("thought", "action") if found.get(k)) or None
        if "fail" in lower:
            return Fail(reason=said or "", raw=raw)
        if "success" in lower:
            return Finish(answer=said, raw=raw)
        raise AgentParseError("computer.terminate needs status='success' or status='failure'")

    # ------------------------------------------------------------------ execution and end

    def translate(self, action: Action) -> tuple[Op, ...]:
        """The Playwright operations for one action (see ``translation.translate_action``)."""
        return translate_action(action, self._style)

    def ending(self, parsed: Parsed, history: Sequence[PastStep]) -> Ending | None:
        """terminate(success) ends finished with the answer; terminate(failure) ends fail."""
        for action in parsed.actions:
            if isinstance(action, Finish):
                return Ending("finished", "terminate:success", action.answer)
            if isinstance(action, Fail):
                return Ending("fail", "terminate:failure", None)
        return None

    def render(self, thought: str, actions: Sequence[Action], image_size: tuple[int, int]) -> str:
        """The response OpenCUA would write for ``actions`` (page coordinates of a screenshot
        of ``image_size``), in the l2 layout with numbers in its smart_resize space.

        Raises:
            ValueError: an action or a thought this grammar cannot express.
        """
        image = Size(*image_size)
        model = smart_resize(image, min_pixels=OPENCUA_MIN_PIXELS)
        return render_response(thought, actions, image, model)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
