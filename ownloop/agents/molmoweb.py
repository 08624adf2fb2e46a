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
nothing and, as there, neither ends the episode. Output that is not such a JSON object (or JSON
followed by more text) is, as the released agent makes it, a ``report_infeasible`` that does
nothing ("Unparseable model output: ..."): a ``Rejected`` action, the episode goes on with no
re-sample, and the next prompt shows the step as the released agent keeps it (option
``resample_non_json`` makes it a parse error instead, re-sampled). Fields the released action
classes would refuse (a button other than left/right/middle, a number that is not one) are a parse
error and are re-sampled: the released client retries a prediction that raised, once. A click is
always a left click, as the released executor makes it (option ``honour_button``).

The episode ends on a message starting "[EXIT]", or "[ANSWER]" (the released client; option
``end_on_answer``). The answer is the benchmark's: the last "[ANSWER] ..." message, else the last
message that is not [EXIT], else the last thought.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated

from jinja2 import TemplateError
from jinja2.sandbox import SandboxedEnvironment
from msgspec import Meta

from ownloop.agents import base
from ownloop.agents.molmoweb_actions import (
    MAX_RESPONSE_CHARS,
    Reading,
    Unparseable,
    action_dict,
    actions_of,
    read_response,
    unparseable,
)
from ownloop.agents.options import AgentOptions, MaxTokens
from ownloop.agents.released import Released, ReleasedSpec
from ownloop.agents.translation import TranslationStyle
from ownloop.errors import OwnloopError
from ownloop.store import events

__all__ = [
    "BUILTIN_TEMPLATE",
    "RELEASED_CANDIDATES",
    "RELEASED_CONSTANT",
    "MolmoWebAgent",
    "MolmoWebOptions",
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
_UNPARSEABLE_RAW = 500  # characters of an unreadable response kept in its Rejected reason


class MolmoWebOptions(AgentOptions, frozen=True, kw_only=True):
    """The ``molmoweb`` agent's options; the defaults follow DESIGN §4 and the released client."""

    viewport: Annotated[str, Meta(description="page size WIDTHxHEIGHT")] = "1280x720"
    history: Annotated[
        int,
        Meta(
            ge=1,
            description="past steps shown as text (the released "
            "client: 10; its agent and benchmarks: 3)",
        ),
    ] = 10
    temperature: Annotated[
        float, Meta(ge=0, description="sampling temperature of every call, re-samples included")
    ] = 0.7
    top_p: Annotated[float, Meta(gt=0, le=1, description="nucleus sampling")] = 0.8
    max_tokens: MaxTokens = 1024
    calls_per_step: Annotated[
        int,
        Meta(
            ge=1,
            description="the first call plus re-samples after a parse failure (the released "
            "client makes 2 attempts; its benchmark episode makes 1)",
        ),
    ] = 2
    end_on_answer: Annotated[
        bool,
        Meta(
            description="an [ANSWER] message ends the episode (the released client); false: only "
            "[EXIT] does (its benchmark episode)"
        ),
    ] = True
    image_first: Annotated[
        bool,
        Meta(
            description="the screenshot comes before the prompt text (the released vLLM backend); "
            "false puts the text first (its transformers backend)"
        ),
    ] = True
    system_message: Annotated[
        str, Meta(min_length=1, description="the training style the prompt starts with")
    ] = "molmo_web_think"
    noop_s: Annotated[float, Meta(ge=0, description="seconds a noop action waits")] = 5.0
    resample_non_json: Annotated[
        bool,
        Meta(
            description="a response that is not JSON (or JSON followed by more text) is a parse "
            "error and is re-sampled; false (released): a no-op report_infeasible and "
            "the episode goes on"
        ),
    ] = False
    honour_button: Annotated[
        bool,
        Meta(
            description="click with the button the model names (right, middle); false "
            "(released): the executor always clicks left"
        ),
    ] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.system_message.strip():
            raise ValueError("system_message must be a word, e.g. molmo_web_think")


class MolmoWebAgent(base.AgentBase[MolmoWebOptions]):
    """The ``molmoweb`` agent; pure and thread-safe (it keeps no state between calls)."""

    name = "molmoweb"
    coordinate_frame = "percent"
    options_type = MolmoWebOptions
    released_spec = ReleasedSpec("allenai/molmoweb", RELEASED_CANDIDATES, (RELEASED_CONSTANT,))
    max_response_chars = MAX_RESPONSE_CHARS

    def __init__(
        self, options: MolmoWebOptions | None = None, released: Released | None = None
    ) -> None:
        """The agent with ``options`` (None: the defaults) and the prompt template of a clone of
        allenai/molmoweb (None: the built-in one, the same layout).

        Raises:
            OwnloopError: the released template is not valid Jinja.
        """
        super().__init__(options, released)
        self.template_text = (
            released.constants.get(RELEASED_CONSTANT, BUILTIN_TEMPLATE)
            if released is not None
            else BUILTIN_TEMPLATE
        )
        try:
            self._template = SandboxedEnvironment().from_string(self.template_text)
        except TemplateError as error:
            raise OwnloopError(
                f"molmoweb: the prompt template in {self.prompt_source} is not valid Jinja "
                f"({error}). Point --released at an unmodified clone of allenai/molmoweb"
            ) from None

    def loop_settings(self) -> base.LoopSettings:
        config = self.config
        return base.LoopSettings(
            viewport=config.size(),
            sampling=events.Sampling(
                temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens
            ),
            images=1,
            calls_per_step=config.calls_per_step,
            resample_temperature=None,  # the released retry samples as the first call did
            max_steps=40,
        )

    def translation_style(self) -> TranslationStyle:
        # The released executor moves, presses, moves once and releases for a drag.
        return TranslationStyle(drag_steps=1)

    # ------------------------------------------------------------------ request

    def prompt(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> str:
        """``"{system_message}: {user_message}"``: the template with the goal, the last
        ``history`` steps and the active page."""
        first = max(0, len(history) - self.config.history)
        past = []
        for index in range(first, len(history)):
            reading = _reading(history[index])
            past.append({"index": index + 1, "thought": reading.thought, "action": reading.action})
        user_message = self._template.render(
            task_description=self.task_text(task),
            past_actions=past,
            page_index=0,  # the followed tab; the recorder shows the model one page
            page_title=_truncate(now.title, _TITLE_LIMIT),
            page_url=_truncate(now.url, _TITLE_LIMIT),
        )
        return f"{self.config.system_message}: {user_message}"

    def build_messages(
        self, task: events.Task, history: Sequence[base.PastStep], now: base.Observation
    ) -> tuple[events.Message, ...]:
        """One user turn: the current screenshot and the prompt (no past screenshots)."""
        text = events.TextPart(text=self.prompt(task, history, now))
        parts: tuple[events.Part, ...] = (
            (now.screenshot, text) if self.config.image_first else (text, now.screenshot)
        )
        return (events.Message(role="user", parts=parts),)

    # ------------------------------------------------------------------ response

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[base.PastStep]
    ) -> base.Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height); text
        the released agent cannot read is a no-op ``Rejected`` (``resample_non_json``: a parse
        error)."""
        width, height = image_size
        if width < 3 or height < 3:
            raise base.AgentParseError(f"screenshot too small to click in: {width}x{height}")
        try:
            reading = read_response(text)
        except Unparseable as error:
            if self.config.resample_non_json:
                raise
            kept = unparseable(text, error.reason)
            reason = base.clip(str(kept.action["infeasibility_reason"]), _UNPARSEABLE_RAW)
            return base.Parsed(
                thought=kept.thought,
                actions=(events.Rejected(reason=reason, raw=text.strip()),),
                model_size=(100, 100),
            )
        actions = actions_of(
            reading,
            text.strip(),
            (width, height),
            noop_s=self.config.noop_s,
            honour_button=self.config.honour_button,
        )
        return base.Parsed(thought=reading.thought, actions=actions, model_size=(100, 100))

    # ------------------------------------------------------------------ execution and end

    def ending(self, parsed: base.Parsed, history: Sequence[base.PastStep]) -> base.Ending | None:
        """A message starting "[EXIT]" (or "[ANSWER]", with ``end_on_answer``) ends the episode,
        with the answer of the released benchmark: the last "[ANSWER]" message (from its 10th
        character on), else the last message without "[EXIT]", else the last thought."""
        message = _message(parsed)
        if message is None:
            return None
        if message.startswith("[EXIT]"):
            word = "[EXIT]"
        elif self.config.end_on_answer and message.startswith("[ANSWER]"):
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
        return base.Ending("finished", f"send_msg_to_user:{word}", final)

    # ------------------------------------------------------------------ the inverse of parse

    def render(
        self, thought: str, actions: Sequence[events.Action], image_size: tuple[int, int]
    ) -> str:
        """The JSON MolmoWeb would write for one action (page coordinates of a screenshot of
        ``image_size``), percentages with one decimal as in training.

        Raises:
            ValueError: not exactly one action, or one this grammar cannot express.
        """
        if len(actions) != 1:
            raise ValueError(f"molmoweb writes one action per response, got {len(actions)}")
        action = actions[0]
        if (
            isinstance(action, events.Click)
            and action.button != "left"
            and not self.config.honour_button
        ):
            raise ValueError(
                "molmoweb's released executor clicks the left button only "
                "(option honour_button=true clicks the one named)"
            )
        body = {"thought": thought, "action": action_dict(actions[0], image_size)}
        return json.dumps(body, ensure_ascii=False)


# ---------------------------------------------------------------------- helpers


def _reading(past: base.PastStep) -> Reading:
    """A past step as the released agent keeps it; a response it could not read is kept as
    the report_infeasible it would have become there."""
    try:
        return read_response(past.response)
    except Unparseable as error:
        return unparseable(past.response, error.reason)
    except base.AgentParseError as error:  # a step the released agent would have retried
        return unparseable(past.response, str(error))


def _message(parsed: base.Parsed, response: str | None = None) -> str | None:
    """The message a step sent to the user (send_msg_to_user), or None."""
    for action in parsed.actions:
        if isinstance(action, events.Finish | events.CallUser):
            try:
                reading = read_response(response if response is not None else action.raw)
            except base.AgentParseError:
                reading = None
            if reading is not None and isinstance(reading.action.get("msg"), str):
                return str(reading.action["msg"])
            if isinstance(action, events.CallUser):
                return action.text
            return "[EXIT]" if action.answer is None else f"[ANSWER] {action.answer}"
    return None


def _truncate(text: str, limit: int, postfix: str = "... (truncated)") -> str:
    return text if len(text) <= limit else text[: limit - len(postfix)] + postfix
