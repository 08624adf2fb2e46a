"""One episode: screenshot, call the model, parse, act, settle, append — until the agent ends it.

Every side effect becomes exactly one event, and a step's events are appended (and fsync'd)
together before the next step starts, so a kill at any moment loses at most the step in flight.

Replays reuse the loop: ``run_episode(play=...)`` swaps the agent's step for another one built
from :meth:`Episode.observe` and :meth:`Episode.step` (e.g. re-executing recorded operations, each
checked first by a replay's guard), and ``on_step`` may add events (fidelity) to each step's batch
before it is appended. The recorder's own step is the same :meth:`Episode.step` once the model's
answer is parsed. The model client is any ``ModelCaller`` (``ownloop.recorder.call``): the live
client or a cassette of recorded responses, each called with a ``CallRequest`` for the step.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import msgspec

from ownloop.agents.base import Agent, AgentParseError, Observation, Parsed, PastStep
from ownloop.agents.recorded import parsed_event
from ownloop.grading import UNGRADED, make_grader
from ownloop.grading.verdict import graded_event, verdict_of
from ownloop.recorder.call import CallContext, CallRequest, ModelCaller
from ownloop.recorder.sent_images import SentImages
from ownloop.store import Store
from ownloop.store.events import (
    ActionParsed,
    BrowserActed,
    Event,
    EvidenceCaptured,
    ImagePart,
    Op,
    ScreenshotTaken,
    SessionEnded,
    SessionGraded,
    SessionStarted,
    Status,
    StreamHead,
    now,
)
from ownloop.store.ids import SessionIds
from ownloop.store.journal import StreamWriter
from ownloop.world import World, WorldLost
from ownloop.world.browser import may_start_download
from ownloop.world.suites import Evidence, Suite

__all__ = [
    "Episode",
    "EpisodeLimits",
    "EpisodeResult",
    "EpisodeSetup",
    "OpCheck",
    "Play",
    "StepHook",
    "Turn",
    "Verdict",
    "run_episode",
]


class EpisodeLimits(NamedTuple):
    """A session's limits. ``max_steps`` is the step budget: policy turns (one model decision,
    however many actions it emits and however many re-samples it took), never exceeded."""

    max_steps: int = 40
    timeout_s: float = 1800.0


class EpisodeResult(NamedTuple):
    session_id: str
    task_id: str
    status: str
    answer: str | None
    steps: int
    seconds: float
    score: float | None
    passed: bool | None
    error: str | None
    head: StreamHead | None = None  # where the session's stream stood when it closed


class EpisodeSetup(NamedTuple):
    """What an episode runs with: the store it is recorded into, the agent and the model client
    it asks, the world it acts on (a ``BrowserWorld``, a desktop), the task's suite, its limits,
    the event that stops it (Ctrl-C; None: never) and the grader of its end."""

    store: Store
    agent: Agent
    client: ModelCaller
    world: World
    suite: Suite
    limits: EpisodeLimits = EpisodeLimits()
    stop: threading.Event | None = None
    grader_spec: str | None = None


class Verdict(NamedTuple):
    """What a step does with one operation (``OpCheck``): run ``op`` (``then == "act"``), or
    end the episode there (``stop``) or hand the step to the live model (``fork``); ``reason``
    says why when a check failed."""

    op: Op
    then: str
    reason: str = ""


OpCheck = Callable[[int, Op], Verdict]
"""Says, before the operation of a step's index runs, what to do with it (a replay's guard)."""


class Turn(NamedTuple):
    """What :meth:`Episode.step` carries out once the step's screenshot is taken.

    Attributes:
        observation: the step's screenshot, as the agent saw it (kept in its history).
        parsed: the step's actions (and thought), as the agent's history holds them.
        response: the model's text the actions were parsed from.
        ops: operations to run as they are, ``(index, action index, op)`` (a replay of recorded
            operations); None: the world's translation of ``parsed.actions``.
        check: asked before each operation; None: every operation runs.
        agent_ends: whether the agent says if the step ends the episode.
        settle: whether the page settles after the step (not after a replay's last).
        download_grace: see :meth:`Episode.settle`.
    """

    observation: Observation
    parsed: Parsed
    response: str = ""
    ops: Sequence[tuple[int, int, Op]] | None = None
    check: OpCheck | None = None
    agent_ends: bool = True
    settle: bool = True
    download_grace: bool = True


_ACT = "act"


class _Interrupted(Exception):
    pass


class Episode:
    """The state of one running episode; ``run`` drives it and always writes SessionEnded.

    ``play(episode, step, batch)`` does one step and returns the SessionEnded that ends the
    episode, or None to go on (default: :meth:`agent_step`); ``on_step(step, batch)`` sees each
    step's events before they are appended and may add its own. A step is made of
    :meth:`observe`, :meth:`step`, :meth:`settle` and :meth:`end`; the episode's state (the
    agent's history, its counts) is its own.
    """

    def __init__(
        self,
        setup: EpisodeSetup,
        stream: StreamWriter,
        started: SessionStarted,
        play: Play | None = None,
        on_step: StepHook | None = None,
    ) -> None:
        self._store, self._stream, self._started = setup.store, stream, started
        self._agent, self._client, self._suite = setup.agent, setup.client, setup.suite
        self._world = setup.world
        self._limits, self._grader_spec = setup.limits, setup.grader_spec
        self._stop = setup.stop or threading.Event()
        self._play: Play = play or Episode.agent_step
        self._on_step = on_step
        self._began = time.monotonic()
        self._history: list[PastStep] = []
        self._parse_failures = 0
        self._action_errors = 0
        # Images go out at the size the agent's released client sends (Fara: resized).
        self._sent_images = SentImages(
            getattr(setup.agent, "sent_image_size", None),
            setup.store.get_blob,
            setup.store.put_blob,
        )

    # ---------------------------------------------------------------- helpers
    def _elapsed(self) -> float:
        return time.monotonic() - self._began

    def _check_stop(self) -> None:
        """Stop here (the episode ends ``interrupted``) if Ctrl-C was pressed."""
        if self._stop.is_set():
            raise _Interrupted

    def ids(self) -> SessionIds:
        """The run and session ids every event of the episode carries."""
        return SessionIds(run_id=self._started.run_id, session_id=self._started.session_id)

    # ---------------------------------------------------------------- the parts of a step
    def observe(self, step: int, batch: list[Event], *, title: bool = True) -> Observation:
        """Take the step's screenshot, store it and add its ScreenshotTaken to ``batch``;
        without ``title`` (no prompt will show it, e.g. a replay of recorded ops) the page's
        title is not read (a round trip to the browser) and the observation's is ""."""
        shot = self._world.screenshot()
        sha = self._store.put_blob(shot.png)
        batch.append(
            ScreenshotTaken(
                at=now(),
                **self.ids(),
                step=step,
                sha256=sha,
                width=shot.width,
                height=shot.height,
                url=shot.url,
                capture_ms=shot.capture_ms,
                a11y=self._store.put_blob(shot.a11y) if shot.a11y is not None else None,
            )
        )
        return Observation(
            step,
            ImagePart(sha256=sha, width=shot.width, height=shot.height),
            shot.url,
            self._world.title() if title else "",
        )

    def _act(self, step: int, index: int, action_idx: int, op: Op, batch: list[Event]) -> None:
        """Execute one operation on the world and add its BrowserActed to ``batch``: the
        effect's fields, its download stored as a blob."""
        self._check_stop()
        effect = self._world.execute(op)
        if not effect.ok:
            self._action_errors += 1
        fields = effect._asdict()
        fields["download"] = self._store.put_blob(effect.download) if effect.download else None
        batch.append(
            BrowserActed(
                at=now(), **self.ids(), step=step, idx=index, action_idx=action_idx, op=op, **fields
            )
        )

    def settle(self, batch: list[Event], *, download_grace: bool = True) -> None:
        """Let the page settle after a step. A download its operations started that came only
        now, and a navigation they started that the guard refused only now, are recorded on the
        step's last operation that could have started them (``download_grace``: see
        ``BrowserSession.settle``)."""
        late = self._world.settle(download_grace=download_grace)
        refusal = self._world.late_refusal()
        if late is None and refusal is None:
            return
        sha = self._store.put_blob(late) if late is not None else None
        for i in range(len(batch) - 1, -1, -1):
            event = batch[i]
            if isinstance(event, BrowserActed) and may_start_download(event.op):
                changes: dict[str, object] = {}
                if sha is not None and event.download is None:
                    changes["download"] = sha
                if refusal is not None and event.error is None:
                    changes.update(ok=False, error=refusal)
                batch[i] = msgspec.structs.replace(event, **changes)
                return

    # ---------------------------------------------------------------- one step
    def agent_step(self, step: int, batch: list[Event]) -> SessionEnded | None:
        """The recorder's step: screenshot, call the model, parse, act, settle."""
        return self._answer(step, self.observe(step, batch), batch)

    def step(self, step: int, batch: list[Event], turn: Turn) -> SessionEnded | None:
        """Carry out a step whose screenshot is taken and whose actions are known: run its
        operations (each asked of ``turn.check`` first), let the agent say whether it ends the
        episode, keep it in the agent's history and let the page settle; the SessionEnded that
        ends the episode, or None to go on. A check that says ``fork`` hands the step, from its
        screenshot on, to the live model (:meth:`agent_step` without the screenshot)."""
        then, reason, index = _ACT, "", 0
        for index, action_idx, op in self._operations(turn):
            if turn.check is not None:
                op, then, reason = turn.check(index, op)
                if then != _ACT:
                    break
            self._act(step, index, action_idx, op, batch)
        if then == "stop":
            return self.end(
                "error", step, error=f"stopped at step {step}, operation {index}: {reason}"
            )
        if then == "fork":  # this step and the rest are the live model's
            return self._answer(step, turn.observation, batch)
        parsed = turn.parsed
        ending = self._agent.ending(parsed, self._history) if turn.agent_ends else None
        self._history.append(PastStep(turn.observation, turn.response, parsed))
        if ending is not None:
            return self.end(
                ending.status, step, agent_status=ending.agent_status, answer=ending.answer
            )
        if turn.settle:
            self.settle(batch, download_grace=turn.download_grace)
        return None

    def _operations(self, turn: Turn) -> Iterator[tuple[int, int, Op]]:
        """The step's operations as ``(index, action index, op)``: the turn's own, else each
        action's translation, translated only once the operations before it ran."""
        if turn.ops is not None:
            yield from turn.ops
            return
        index = 0
        for action_idx, action in enumerate(turn.parsed.actions):
            for op in self._world.translate(self._agent, action):
                yield index, action_idx, op
                index += 1

    def _answer(
        self, step: int, observation: Observation, batch: list[Event]
    ) -> SessionEnded | None:
        """The recorder's step once its screenshot is taken: call the model, parse, then
        :meth:`step` (a guarded replay hands a step to the live model so)."""
        agent = self._agent
        settings = agent.settings
        shot_size = (observation.screenshot.width, observation.screenshot.height)
        messages = self._sent_images(
            agent.build_messages(self._started.task, self._history, observation)
        )

        parsed: Parsed | None = None
        response = ""
        for attempt in range(1, settings.calls_per_step + 1):
            self._check_stop()
            sampling = settings.sampling
            if attempt > 1 and settings.resample_temperature is not None:
                sampling = msgspec.structs.replace(
                    sampling,
                    temperature=max(settings.resample_temperature, sampling.temperature or 0.0),
                )
            context = CallContext(
                self._started.run_id,
                self._started.session_id,
                step,
                attempt,
                "step" if attempt == 1 else "resample",
            )
            outcome = self._client.call(CallRequest(messages, sampling, context, self._stop.is_set))
            batch.extend(outcome.events)
            if outcome.text is None:
                self._check_stop()
                return self.end("endpoint_error", step - 1, error=outcome.error)
            call_id = outcome.events[-1].call_id
            try:
                if settings.stop_only and outcome.finish_reason != "stop":
                    raise AgentParseError(f"finish reason {outcome.finish_reason!r}, not 'stop'")
                parsed = agent.parse(outcome.text, shot_size, self._history)
            except AgentParseError as exc:
                self._parse_failures += 1
                batch.append(self._parsed(step, call_id, None, str(exc)[:1000]))
                continue
            response = outcome.text
            batch.append(self._parsed(step, call_id, parsed))
            break
        if parsed is None:
            return self.end(
                "parse_error",
                step,
                error=f"no parsable response after {settings.calls_per_step} calls",
            )
        if not parsed.actions:
            return self.end("no_action", step)
        ended = self.step(step, batch, Turn(observation, parsed, response))
        if ended is None and settings.pause_s:
            time.sleep(settings.pause_s)
        return ended

    def _parsed(
        self, step: int, call_id: str, parsed: Parsed | None, error: str | None = None
    ) -> ActionParsed:
        agent = self._agent
        frame = agent.coordinate_frame
        return parsed_event(self.ids(), step, call_id, agent, parsed, error, coordinate_frame=frame)

    # ---------------------------------------------------------------- the end
    def end(
        self,
        status: Status,
        steps: int,
        *,
        agent_status: str = "",
        answer: str | None = None,
        error: str | None = None,
    ) -> SessionEnded:
        """The SessionEnded of this episode (not yet appended)."""
        return SessionEnded(
            at=now(),
            **self.ids(),
            status=status,
            agent_status=agent_status or status,
            answer=answer,
            steps=steps,
            seconds=round(self._elapsed(), 3),
            parse_failures=self._parse_failures,
            action_errors=self._action_errors,
            error=error,
        )

    def _evidence(self, ended: SessionEnded) -> list[EvidenceCaptured]:
        pieces: list[Evidence] = []
        try:
            pieces.extend(self._world.end_state())
            pieces.extend(self._world.capture(self._suite, self._started.task, ended))
        except Exception as exc:  # noqa: BLE001 - a dead browser must not lose the session
            pieces.append(Evidence("capture_error", value_json=_json_string(str(exc)[:500])))
        events = []
        for piece in pieces:
            sha = self._store.put_blob(piece.data) if piece.data is not None else None
            events.append(
                EvidenceCaptured(
                    at=now(),
                    **self.ids(),
                    name=piece.name,
                    value_json=piece.value_json,
                    sha256=sha,
                    media_type=piece.media_type,
                    source=piece.source,
                )
            )
        return events

    def _grade(self, ended: SessionEnded, evidence: list[EvidenceCaptured]) -> SessionGraded | None:
        if ended.status in UNGRADED or not self._grader_spec or self._grader_spec == "none":
            return None
        grader = make_grader(self._grader_spec)
        grade = verdict_of(grader, ended.answer, evidence, self._store.get_blob)
        if grade is None:  # no verdict: a later regrade grades it once support lands
            return None
        return graded_event(grader, grade, self.ids(), at=now(), source="record")

    def run(self) -> tuple[SessionEnded, SessionGraded | None]:
        """Append the SessionStarted, play step after step until one ends the episode, then
        append its evidence, its end and its grade."""
        self._stream.append([self._started])
        ended: SessionEnded | None = None
        step = 0
        try:
            self._world.prepare(self._suite, self._started.task)
            while ended is None:
                step += 1
                # One step is one policy turn (its re-samples included): the budget holds.
                if step > self._limits.max_steps:
                    ended = self.end("max_steps", step - 1)
                    break
                if self._elapsed() > self._limits.timeout_s:
                    ended = self.end("timeout", step - 1)
                    break
                batch: list[Event] = []
                try:
                    ended = self._play(self, step, batch)
                finally:
                    if self._on_step is not None and batch:
                        self._on_step(step, batch)
                    self._stream.append(batch)
        except _Interrupted:
            ended = self.end("interrupted", step, error="interrupted (Ctrl-C)")
        except WorldLost as exc:  # the desktop stopped answering: not the agent's doing
            ended = self.end("env_error", step, error=str(exc)[:1000])
        except Exception as exc:  # noqa: BLE001 - a crashed browser ends this session only
            if self._stop.is_set():  # the browser went down with the same Ctrl-C
                ended = self.end("interrupted", step, error="interrupted (Ctrl-C)")
            else:
                ended = self.end("error", step, error=f"{type(exc).__name__}: {exc}"[:1000])
        # A world that stopped answering has no end state to read (each read would time out).
        evidence = self._evidence(ended) if ended.status not in ("interrupted", "env_error") else []
        grade = self._grade(ended, evidence)
        self._stream.append([*evidence, ended, *([grade] if grade else [])])
        return ended, grade


Play = Callable[[Episode, int, list[Event]], SessionEnded | None]
"""One step of an episode: (episode, step number, the step's batch) -> the end, or None."""

StepHook = Callable[[int, list[Event]], None]
"""Sees a step's events (and may add some) before they are appended."""


def _json_string(text: str) -> str:
    return json.dumps(text)


def run_episode(
    setup: EpisodeSetup,
    started: SessionStarted,
    *,
    on_stream: Callable[[StreamWriter], None] | None = None,
    play: Play | None = None,
    on_step: StepHook | None = None,
) -> EpisodeResult:
    """Record one episode of ``started.task`` into a new stream named by its session id.

    Args:
        setup: what the episode runs with (store, agent, client, world, suite, limits...).
        started: the session's start, written first (its ``budget`` is the limits' steps).
        on_stream: told the session's stream once it is open.
        play: does one step in place of the agent's (replays); see :class:`Episode`.
        on_step: sees (and may add to) each step's events before they are appended.
    """
    # The session declares the budget the loop enforces: they cannot differ.
    started = msgspec.structs.replace(started, budget=setup.limits.max_steps)
    with setup.store.stream(started.session_id) as stream:
        if on_stream:
            on_stream(stream)
        ended, grade = Episode(setup, stream, started, play, on_step).run()
        head = stream.head()
    return EpisodeResult(
        started.session_id,
        started.task.task_id,
        ended.status,
        ended.answer,
        ended.steps,
        ended.seconds,
        grade.score if grade else None,
        grade.passed if grade else None,
        ended.error,
        head,
    )
