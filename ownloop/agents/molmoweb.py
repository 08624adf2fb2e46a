"""MolmoWeb-4B/8B (AI2), as DESIGN §4 runs it: one user turn, JSON actions in percent.

Request: a single user message with the current screenshot and the prompt
``"{system_message}: {user_message}"``, where ``system_message`` is the training style
("molmo_web_think") and ``user_message`` is the released Jinja template (``USER_MSG_TEMPLATE`` of
``agent/multimodal_agent.py`` in ``allenai/molmoweb``) filled with the goal, the last ``history``
steps as text and the active page. Past steps show the thought and the action dict exactly as the
released agent keeps them: the dict ``json.loads`` gave, after its two adjustments
(``gemini_type_text_at`` x/y divided by 10, messages cut to 1000 characters), rendered by Jinja
(Python repr). No past screenshots are sent.

Response: one JSON object ``{"thought": ..., "action": {"name": ..., ...}}`` (or a bare action).
Coordinates are 0-100 percent of the screenshot, mapped to pixels and clamped to [1, side-2] as the
released agent does. An action it turns into ``report_infeasible`` (an unknown name, a key outside
its whitelist) becomes a ``Rejected``, the model's own ``report_infeasible`` a ``Fail``: both do
nothing and, as there, neither ends the episode. Output that is not such a JSON object, or whose
fields the released action classes would refuse, is a parse error and is re-sampled (the released
client retries a failed prediction once).

The episode ends on a message starting "[EXIT]", or "[ANSWER]" (the released client; option
``end_on_answer``). The answer is the benchmark's: the last "[ANSWER] ..." message, else the last
message that is not [EXIT], else the last thought.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence

from jinja2 import TemplateError
from jinja2.sandbox import SandboxedEnvironment

from ownloop.agents.base import (
    AgentParseError,
    Ending,
    LoopSettings,
    Observation,
    Parsed,
    PastStep,
    task_text,
)
from ownloop.agents.molmoweb_actions import (
    Reading,
    action_dict,
    actions_of,
    read_response,
    unparseable,
)
from ownloop.agents.options import OptionCheck
from ownloop.agents.released import find_released
from ownloop.agents.translation import TranslationStyle, translate_action
from ownloop.store.errors import OwnloopError
from ownloop.store.events import (
    Action,
    CallUser,
    Finish,
    Message,
    Op,
    Part,
    Sampling,
    Task,
    TextPart,
)

__all__ = [
    "BUILTIN_TEMPLATE",
    "RELEASED_CANDIDATES",
    "RELEASED_CONSTANT",
    "MolmoWebAgent",
]

RELEASED_CANDIDATES = ("agent/multimodal_agent.py",)
RELEASED_CONSTANT = "USER_MSG_TEMPLATE"

# The layout MolmoWeb was trained on (agent-formats.md §4): the goal, the previous steps, the
# active page. It has no instructions to restate; the model learned its action space in training.
BUILTIN_TEMPLATE = (
    "\n# GOAL\n{{ task_description }}\n\n# PREVIOUS STEPS\n"
    "{% for step in past_actions -%}\n"
    "## Step {{ step['index'] }}\nTHOUGHT: {{ step['thought'] }}\nACTION: {{ step['action'] }}\n"
    "{% endfor %}\n"
    "# CURRENTLY ACTIVE PAGE\nPage {{ page_index }}: {{ page_title }} | {{ page_url }}\n\n"
    "# NEXT STEP\n\n"
)
_TITLE_LIMIT = 100  # the released agent cuts the page title and URL to 100 characters
_PARSER_REVISION = 1
_warned_builtin = False


class MolmoWebAgent:
    """The ``molmoweb`` agent; pure and thread-safe (it keeps no state between calls)."""

    name = "molmoweb"
    parser_name = "molmoweb"
    parser_version = f"ownloop {_PARSER_REVISION}"

    def __init__(
        self,
        *,
        viewport: tuple[int, int] | str = (1280, 720),
        history: int = 10,
        temperature: float = 0.7,
        top_p: float = 0.8,
        max_tokens: int = 1024,
        calls_per_step: int = 2,
        end_on_answer: bool = True,
        image_first: bool = True,
        system_message: str = "molmo_web_think",
        noop_s: float = 5.0,
        released: str | None = None,
    ) -> None:
        """Options, all recorded in RunStarted; the defaults follow DESIGN §4.

        Args:
            viewport: page size (width, height) or "WIDTHxHEIGHT".
            history: past steps shown as text (the released client: 10; its agent and
                benchmarks: 3).
            temperature: sampling temperature of every call, re-samples included.
            top_p: nucleus sampling.
            max_tokens: completion limit per call.
            calls_per_step: the first call plus re-samples after a parse failure (the released
                client makes 2 attempts; its benchmark episode makes 1).
            end_on_answer: an "[ANSWER]" message ends the episode (the released client); when
                False only "[EXIT]" does (its benchmark episode).
            image_first: the screenshot comes before the prompt text in the user turn (the
                released vLLM backend); False puts the text first (its transformers backend).
            system_message: the training style the prompt starts with.
            noop_s: seconds a noop action waits.
            released: folders holding a clone of allenai/molmoweb (a colon list; None:
                $OWNLOOP_PATH) to read the prompt template from.

        Raises:
            OwnloopError: an option has the wrong type or is out of range, or the released
                template is not valid Jinja.
        """
        check = OptionCheck(self.name)
        self.viewport = check.viewport(viewport)
        self.history = check.number("history", history, int)
        self.temperature = check.number("temperature", temperature, float)
        self.top_p = check.number("top_p", top_p, float)
        self.max_tokens = check.number("max_tokens", max_tokens, int)
        self.calls_per_step = check.number("calls_per_step", calls_per_step, int)
        self.noop_s = check.number("noop_s", noop_s, float)
        check.that(self.history >= 1, "history must be at least 1 step")
        check.that(self.temperature >= 0, "temperature must not be negative")
        check.that(0 < self.top_p <= 1, "top_p must be above 0 and at most 1")
        check.that(self.max_tokens >= 1, "max_tokens must be at least 1")
        check.that(self.calls_per_step >= 1, "calls_per_step must be at least 1")
        check.that(self.noop_s >= 0, "noop_s must not be negative")
        for flag, value in (("end_on_answer", end_on_answer), ("image_first", image_first)):
            check.that(isinstance(value, bool), f"{flag} must be true or false, got {value!r}")
        check.that(isinstance(system_message, str) and bool(system_message.strip()),
                   "system_message must be a word, e.g. molmo_web_think")
        check.that(released is None or isinstance(released, str),
                   f"released must be a path, got {released!r}")
        self.end_on_answer, self.image_first = end_on_answer, image_first
        self.system_message, self.released = system_message, released
        self.template_text, self.prompt_source = _template(released)
        try:
            self._template = SandboxedEnvironment().from_string(self.template_text)
        except TemplateError as error:
            raise OwnloopError(
                f"molmoweb: the prompt template in {self.prompt_source} is not valid Jinja "
                f"({error}). Point --released at an unmodified clone of allenai/molmoweb"
            ) from None
        self.settings = LoopSettings(
            viewport=self.viewport,
            sampling=Sampling(temperature=self.temperature, top_p=self.top_p,
                              max_tokens=self.max_tokens),
            images=1,
            calls_per_step=self.calls_per_step,
            resample_temperature=None,  # the released retry samples as the first call did
            max_steps=40,
        )
        # The released executor moves, presses, moves once and releases for a drag.
        self._style = TranslationStyle(drag_steps=1)

    def options(self) -> dict[str, str | int | float | bool | None]:
        """The agent's own settings, recorded in RunStarted."""
        return {
            "viewport": f"{self.viewport[0]}x{self.viewport[1]}",
            "history": self.history,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "calls_per_step": self.calls_per_step,
            "end_on_answer": self.end_on_answer,
            "image_first": self.image_first,
            "system_message": self.system_message,
            "noop_s": self.noop_s,
            "released": self.released,
        }

    # ------------------------------------------------------------------ request

    def prompt(self, task: Task, history: Sequence[PastStep], now: Observation) -> str:
        """``"{system_message}: {user_message}"``: the template with the goal, the last
        ``history`` steps and the active page."""
        first = max(0, len(history) - self.history)
        past = []
        for index in range(first, len(history)):
            reading = _reading(history[index])
            past.append({"index": index + 1, "thought": reading.thought,
                         "action": reading.action})
        user_message = self._template.render(
            task_description=task_text(task),
            past_actions=past,
            page_index=0,  # the followed tab; the recorder shows the model one page
            page_title=_truncate(now.title, _TITLE_LIMIT),
            page_url=_truncate(now.url, _TITLE_LIMIT),
        )
        return f"{self.system_message}: {user_message}"

    def build_messages(
        self, task: Task, history: Sequence[PastStep], now: Observation
    ) -> tuple[Message, ...]:
        """One user turn: the current screenshot and the prompt (no past screenshots)."""
        text = TextPart(text=self.prompt(task, history, now))
        parts: tuple[Part, ...] = (now.screenshot, text) if self.image_first else (
            text, now.screenshot)
        return (Message(role="user", parts=parts),)

    # ------------------------------------------------------------------ response

    def parse(
        self, text: str, image_size: tuple[int, int], history: Sequence[PastStep] | None = None
    ) -> Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height).

        Raises:
            AgentParseError: whatever went wrong, in one line; nothing else escapes.
        """
        if not isinstance(text, str):
            raise AgentParseError(f"response is {type(text).__name__}, not text")
        width, height = image_size
        if width < 3 or height < 3:
            raise AgentParseError(f"screenshot too small to click in: {width}x{height}")
        reading = read_response(text)
        actions = actions_of(reading, text.strip(), (width, height), noop_s=self.noop_s)
        return Parsed(thought=reading.thought, actions=actions, model_size=(100, 100))

    # ------------------------------------------------------------------ execution and end

    def translate(self, action: Action) -> tuple[Op, ...]:
        """The Playwright operations for one action (see ``translation.translate_action``)."""
        return translate_action(action, self._style)

    def ending(self, parsed: Parsed, history: Sequence[PastStep]) -> Ending | None:
        """A message starting "[EXIT]" (or "[ANSWER]", with ``end_on_answer``) ends the episode,
        with the answer of the released benchmark: the last "[ANSWER]" message (from its 10th
        character on), else the last message without "[EXIT]", else the last thought."""
        message = _message(parsed)
        if message is None:
            return None
        if message.startswith("[EXIT]"):
            word = "[EXIT]"
        elif self.end_on_answer and message.startswith("[ANSWER]"):
            word = "[ANSWER]"
        else:
            return None
        answer = last_message = last_thought = None
        steps = [(_message(past.parsed, past.response), past.parsed.thought) for past in history]
        for sent, thought in [*steps, (message, parsed.thought)]:
            if sent is not None:
                if "[ANSWER]" in sent:
                    answer = sent[9:]
                elif "[EXIT]" not in sent:
                    last_message = sent
            if thought:
                last_thought = thought
        final = next((a for a in (answer, last_message, last_thought) if a is not None), None)
        return Ending("finished", f"send_msg_to_user:{word}", final)

    # ------------------------------------------------------------------ the inverse of parse

    def render(self, thought: str, actions: Sequence[Action], image_size: tuple[int, int]) -> str:
        """The JSON MolmoWeb would write for one action (page coordinates of a screenshot of
        ``image_size``), percentages with one decimal as in training.

        Raises:
            ValueError: not exactly one action, or one this grammar cannot express.
        """
        if len(actions) != 1:
            raise ValueError(f"molmoweb writes one action per response, got {len(actions)}")
        body = {"thought": thought, "action": action_dict(actions[0], image_size)}
        return json.dumps(body, ensure_ascii=False)


# ---------------------------------------------------------------------- helpers


def _template(released: str | None) -> tuple[str, str]:
    """(template text, prompt source): the released template when a clone has it."""
    global _warned_builtin
    found = find_released(RELEASED_CANDIDATES, (RELEASED_CONSTANT,), released)
    if found is not None:
        return found.constants[RELEASED_CONSTANT], found.source
    if not _warned_builtin:
        _warned_builtin = True
        warnings.warn(
            "molmoweb: no clone of allenai/molmoweb (agent/multimodal_agent.py) under --released"
            " or $OWNLOOP_PATH; using ownloop's built-in prompt template", stacklevel=3)
    return BUILTIN_TEMPLATE, "built-in"


def _reading(past: PastStep) -> Reading:
    """A past step as the released agent keeps it; a response it could not read is kept as
    the report_infeasible it would have become there."""
    try:
        return read_response(past.response)
    except AgentParseError as error:
        return unparseable(past.response, str(error))


def _message(parsed: Parsed, response: str | None = None) -> str | None:
    """The message a step sent to the user (send_msg_to_user), or None."""
    for action in parsed.actions:
        if isinstance(action, Finish | CallUser):
            try:
                reading = read_response(response if response is not None else action.raw)
            except AgentParseError:
                reading = None
            if reading is not None and isinstance(reading.action.get("msg"), str):
                return str(reading.action["msg"])
            if isinstance(action, CallUser):
                return action.text
            return "[EXIT]" if action.answer is None else f"[ANSWER] {action.answer}"
    return None


def _truncate(text: str, limit: int, postfix: str = "... (truncated)") -> str:
    return text if len(text) <= limit else text[: limit - len(postfix)] + postfix
