"""What every agent is: pure functions over strings and event types, plus its loop settings.

An agent never does I/O, reads no clock and draws no random numbers. The recorder gives it the
task, the history and the current screenshot (as a blob reference), sends the messages it builds,
and hands the model's text back to ``parse``; ``translate`` turns each parsed action into the
browser operations the recorder executes; ``ending`` says whether the step ends the episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import msgspec

from ownloop.store.events import Action, ImagePart, Message, Op, Sampling, Task

__all__ = [
    "Agent",
    "AgentParseError",
    "Ending",
    "LoopSettings",
    "Observation",
    "Parsed",
    "PastStep",
    "task_text",
]


class AgentParseError(ValueError):
    """The model's text could not be turned into actions. The message says why, in one line."""


class LoopSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How the model's released harness runs it; every field can be overridden by an option."""

    viewport: tuple[int, int]
    sampling: Sampling
    images: int  # screenshots sent per request, the current one included
    calls_per_step: int = 4  # the first call plus re-samples after parse failures
    resample_temperature: float | None = 1.0  # temperature of re-samples; None keeps sampling's
    stop_only: bool = False  # a finish reason other than "stop" counts as a failed call
    pause_s: float = 0.0  # extra pause after each step's actions, before the next screenshot
    error_retries: int = 0  # default --error-retries for this agent
    max_steps: int = 40


class Observation(NamedTuple):
    """What the agent sees at the start of a step."""

    step: int
    screenshot: ImagePart
    url: str
    title: str = ""  # the page's title, for prompts that show it (molmoweb); "" when unknown


class Parsed(msgspec.Struct, frozen=True, kw_only=True):
    thought: str = ""
    actions: tuple[Action, ...] = ()
    model_size: tuple[int, int] | None = None  # the model's coordinate space (width, height)


class PastStep(NamedTuple):
    """One earlier step as the agent's history sees it."""

    observation: Observation
    response: str
    parsed: Parsed


class Ending(NamedTuple):
    status: str  # one of the SessionEnded statuses
    agent_status: str  # the agent's own word, e.g. "finished", "DONE", "terminate:success"
    answer: str | None


def task_text(task: Task) -> str:
    """How every agent states the task (DESIGN §4)."""
    return (
        f"You are interacting with a web application at {task.start_url}. "
        f"Your task: {task.prompt}"
    )


class Agent(Protocol):
    """The interface the recorder and replay drive; one implementation per model."""

    name: str
    parser_name: str
    parser_version: str
    prompt_source: str  # "package:ui-tars 0.5.1", "released:/path/module.py" or "built-in"
    settings: LoopSettings

    def options(self) -> dict[str, str | int | float | bool | None]:
        """The agent's own settings, recorded in RunStarted."""
        ...

    def build_messages(
        self, task: Task, history: Sequence[PastStep], now: Observation
    ) -> tuple[Message, ...]:
        """The request for this step; images are blob references."""
        ...

    def parse(self, text: str, image_size: tuple[int, int]) -> Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height).

        Raises AgentParseError (one line) for anything it cannot read, and nothing else.
        """
        ...

    def translate(self, action: Action) -> tuple[Op, ...]:
        """The browser operations that carry out one action (none for finish, memorize, ...)."""
        ...

    def ending(self, parsed: Parsed, history: Sequence[PastStep]) -> Ending | None:
        """Whether this step ends the episode, with the status and the answer."""
        ...

    def render(self, thought: str, actions: Sequence[Action], image_size: tuple[int, int]) -> str:
        """The response this model would write for ``actions`` (page coordinates of a screenshot
        of ``image_size``): the inverse of ``parse``, used by scripted models and tests.

        Raises ValueError for an action the model's grammar cannot express.
        """
        ...
