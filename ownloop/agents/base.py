"""What every agent is: pure functions over strings and event types, plus its loop settings.

An agent never does I/O, reads no clock, draws no random numbers, reads no environment variable
and sets no process-wide state. The recorder gives it the task, the history and the current
screenshot (as a blob reference), sends the messages it builds, and hands the model's text back to
``parse``; ``translate`` turns each parsed action into the browser operations the recorder
executes; ``ending`` says whether the step ends the episode. Texts read from a clone of the
model's released code are handed in (``released.load_released``), never looked for by the agent.

``AgentBase`` holds what every agent shares: its options Struct, the parse guard (type and length
checks, and nothing but ``AgentParseError`` escapes), and ``translate``. Each agent module keeps
only its grammar (``read``), its prompt (``build_messages``) and its coordinate space.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Generic, NamedTuple, Protocol, TypeVar, cast

import msgspec

from ownloop.agents.options import AgentOptions, Scalar
from ownloop.agents.released import Released, ReleasedSpec
from ownloop.agents.translation import TranslationStyle, translate_action
from ownloop.store.events import (
    Action,
    Fail,
    Finish,
    ImagePart,
    Message,
    Op,
    Rejected,
    Sampling,
    Status,
    Task,
)

__all__ = [
    "Agent",
    "AgentBase",
    "AgentParseError",
    "Ending",
    "LoopSettings",
    "Observation",
    "Parsed",
    "PastStep",
    "clip",
    "first_ending",
    "one_line",
    "single_quoted",
    "task_text",
]

_O = TypeVar("_O", bound=AgentOptions)


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
    status: Status  # how the SessionEnded says it ended
    agent_status: str  # the agent's own word, e.g. "finished", "DONE", "terminate:success"
    answer: str | None


def first_ending(
    parsed: Parsed,
    finished: str,
    failed: str | None = None,
    *,
    answer: bool = True,
    reason: bool = False,
) -> Ending | None:
    """The end the step's first Finish or Fail makes, named by the agent's own words: a Finish
    ends finished (``finished``) with its answer (None unless ``answer``), a Fail ends fail
    (``failed``; None: the agent has no fail) with its reason as the answer when ``reason``."""
    for action in parsed.actions:
        if isinstance(action, Finish):
            return Ending("finished", finished, action.answer if answer else None)
        if isinstance(action, Fail) and failed is not None:
            return Ending("fail", failed, action.reason if reason else None)
    return None


def task_text(task: Task, form: str = "wrapped") -> str:
    """How every agent states the task (DESIGN §4): ``wrapped`` with the start URL (the seed
    harness's wording, which the scripted experts look for), ``bare`` as the released loops
    pass it; on a desktop always the instruction alone (as the agents' OSWorld loops give it)."""
    if form == "bare" or task.world == "desktop":
        return task.prompt
    return (
        f"You are interacting with a web application at {task.start_url}. Your task: {task.prompt}"
    )


class Agent(Protocol):
    """The interface the recorder and replay drive; one implementation per model."""

    name: str
    parser_name: str
    parser_version: str
    prompt_source: str  # "package:ui-tars 0.5.1", "released:/path/module.py" or "built-in"
    settings: LoopSettings
    coordinate_frame: str  # how its points map to the page (``frames.FRAMES``)

    def options(self) -> dict[str, Scalar]:
        """The agent's own settings (its options Struct), recorded in RunStarted."""
        ...

    def sent_image_size(self, image_size: tuple[int, int]) -> tuple[int, int]:
        """The size a screenshot of ``image_size`` is sent at (the released client may resize
        it); the recorded screenshot stays the original."""
        ...

    def build_messages(
        self, task: Task, history: Sequence[PastStep], now: Observation
    ) -> tuple[Message, ...]:
        """The request for this step; images are blob references."""
        ...

    def parse(
        self, text: str, image_size: tuple[int, int], history: Sequence[PastStep] = ()
    ) -> Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height);
        ``history`` is the episode so far (the recorder and replay pass it; a pointer position
        or a past message may change how the text reads).

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


def clip(text: str, limit: int, *, escape: bool = False) -> str:
    """``text`` cut to ``limit`` characters (a cut one ends in "..."), as error messages and raw
    fields quote a model's text; ``escape`` then writes its newlines as ``\\n``."""
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.replace("\n", "\\n") if escape else text


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (each run of whitespace one space), cut to ``limit`` characters."""
    return clip(" ".join(text.split()), limit)


def _plain(index: int, char: str) -> bool:
    return False


def single_quoted(text: str, hex_escape: Callable[[int, str], bool] = _plain) -> str:
    """A single-quoted Python literal that reads back to ``text``, as a renderer writes a model's
    string argument: backslash, quote and newline escaped, and as ``\\xNN`` every other control
    character and each character ``hex_escape(index, char)`` picks (what the model's parser
    would misread)."""
    out = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char == "'":
            out.append("\\'")
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 0x20 or char == "\x7f" or hex_escape(index, char):
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "'" + "".join(out) + "'"


class AgentBase(Generic[_O]):
    """What the agents share. A subclass sets the class attributes and writes
    ``loop_settings`` (``translation_style`` too where its executor differs), ``read``,
    ``build_messages``, ``ending`` and ``render``; ``settings`` and ``style`` are read from the
    options when the agent is made.

    ``parse`` is the guard: it refuses what is not text or is longer than
    ``max_response_chars`` before the grammar sees it, and turns any other exception into an
    ``AgentParseError`` (a bug or a package's surprise must end as a recorded parse error).
    """

    name: str  # set by each agent class
    parser_name: str  # the agent's name
    parser_version: str  # "ownloop <parser_revision>" unless the agent says more
    parser_revision: ClassVar[int] = 1
    """Bump when our side of an agent's parsing changes; recorded with every ActionParsed."""
    options_type: ClassVar[type[AgentOptions]]
    released_spec: ClassVar[ReleasedSpec | None] = None
    """Where the prompt texts live in a clone of the released code (None: not read from one)."""
    max_response_chars: ClassVar[int] = 16_000

    prompt_source: str
    settings: LoopSettings
    style: TranslationStyle
    coordinate_frame: str = "smart-resize"
    """The frame of the model's points (``frames.FRAMES``), recorded with every parse."""

    def __init__(self, options: _O | None = None, released: Released | None = None) -> None:
        """
        Args:
            options: the agent's options (``options_type``; None: every default).
            released: texts read from a clone of the released code (None: built-in texts).
        """
        self.config: _O = options if options is not None else cast(_O, self.options_type())
        self.released = released
        self.prompt_source = released.source if released is not None else "built-in"
        self.parser_name = self.name
        self.parser_version = f"ownloop {self.parser_revision}"
        self.settings = self.loop_settings()
        self.style = self.translation_style()

    def loop_settings(self) -> LoopSettings:  # pragma: no cover - every agent writes its own
        """How the released harness runs the model, read from ``self.config``."""
        raise NotImplementedError

    def translation_style(self) -> TranslationStyle:
        """The translation knobs of the released executor (the defaults unless it differs)."""
        return TranslationStyle()

    def options(self) -> dict[str, Scalar]:
        """The agent's own settings, recorded in RunStarted."""
        return self.config.recorded()

    def sent_image_size(self, image_size: tuple[int, int]) -> tuple[int, int]:
        """The size a screenshot is sent at: as it is, unless the agent resizes as its released
        client does."""
        return image_size

    def task_text(self, task: Task) -> str:
        """The task as this agent states it (option ``task_text``: wrapped or bare)."""
        return task_text(task, self.config.task_text)

    def parse(
        self, text: str, image_size: tuple[int, int], history: Sequence[PastStep] = ()
    ) -> Parsed:
        """Actions in page coordinates for a screenshot of ``image_size`` (width, height).

        Raises:
            AgentParseError: whatever went wrong, in one line; nothing else escapes.
        """
        if not isinstance(text, str):
            raise AgentParseError(f"response is {type(text).__name__}, not text")
        if len(text) > self.max_response_chars:
            raise AgentParseError(
                f"response too long ({len(text)} characters; the limit is "
                f"{self.max_response_chars})"
            )
        try:
            return _inside(self.read(text, image_size, history), image_size, self.config.off_page)
        except AgentParseError:
            raise
        except Exception as error:  # noqa: BLE001 - the guard: any failure is a parse error
            reason = one_line(f"{type(error).__name__}: {error}", 200)
            raise AgentParseError(f"{self.name} parser failed: {reason}") from error

    def read(
        self, text: str, image_size: tuple[int, int], history: Sequence[PastStep]
    ) -> Parsed:  # pragma: no cover - every agent writes its own
        """The grammar: ``text`` (a string within the length limit) as actions."""
        raise NotImplementedError

    def translate(self, action: Action) -> tuple[Op, ...]:
        """The Playwright operations for one action (see ``translation.translate_action``)."""
        return translate_action(action, self.style)

    # Each agent writes these three (see ``Agent``).

    def build_messages(
        self, task: Task, history: Sequence[PastStep], now: Observation
    ) -> tuple[Message, ...]:  # pragma: no cover
        raise NotImplementedError

    def ending(
        self, parsed: Parsed, history: Sequence[PastStep]
    ) -> Ending | None:  # pragma: no cover
        raise NotImplementedError

    def render(
        self, thought: str, actions: Sequence[Action], image_size: tuple[int, int]
    ) -> str:  # pragma: no cover
        raise NotImplementedError


_POINTS = (("x", "y"), ("x2", "y2"))
OFF_PAGE_MARGIN = 1.0
"""How far outside the page an off-page point is moved (``off_page=chromium``): still outside,
so Chromium delivers the click to ``<html>`` as it delivers the model's own point, without
sending a browser coordinates such as 1e308."""


def _inside(parsed: Parsed, image_size: tuple[int, int], off_page: str = "chromium") -> Parsed:
    """Pointer actions outside the page, by ``off_page``:

    - ``chromium`` (the default): the point moves to just outside the page's edge
      (``OFF_PAGE_MARGIN``), so the browser does what Chromium does with the model's own point:
      a click there lands on ``<html>`` and blurs the focused input (measured; a test keeps it);
    - ``reject``: the action becomes a ``Rejected`` no-op that hits nothing, the episode goes on.
    """
    width, height = image_size
    actions = list(parsed.actions)
    for index, action in enumerate(actions):
        for x_field, y_field in _POINTS:
            x, y = getattr(action, x_field, None), getattr(action, y_field, None)
            if x is None or y is None or (0 <= x <= width and 0 <= y <= height):
                continue
            if off_page == "chromium":
                edge = {
                    x_field: _bounded(x, width),
                    y_field: _bounded(y, height),
                }
                action = actions[index] = msgspec.structs.replace(action, **edge)
                continue
            actions[index] = Rejected(
                raw=action.raw,
                reason=(
                    f"{type(action).__name__.lower()} at ({x:g}, {y:g}) is outside the "
                    f"{width}x{height} page"
                ),
            )
            break
    if actions == list(parsed.actions):
        return parsed
    return msgspec.structs.replace(parsed, actions=tuple(actions))


def _bounded(value: float, side: int) -> float:
    return float(min(max(value, -OFF_PAGE_MARGIN), side + OFF_PAGE_MARGIN))
