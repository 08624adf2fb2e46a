"""One episode: screenshot, call the model, parse, act, settle, append — until the agent ends it.

Every side effect becomes exactly one event, and a step's events are appended (and fsync'd)
together before the next step starts, so a kill at any moment loses at most the step in flight.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from ownloop.agents.base import Agent, AgentParseError, Observation, Parsed, PastStep
from ownloop.grading import make_grader
from ownloop.recorder.browser import BrowserSession
from ownloop.recorder.evidence import capture_end_state
from ownloop.recorder.model import ModelClient
from ownloop.recorder.suites import Evidence, Suite
from ownloop.store import Store
from ownloop.store.events import (
    ActionParsed,
    BrowserActed,
    Event,
    EvidenceCaptured,
    ImagePart,
    Sampling,
    ScreenshotTaken,
    SessionEnded,
    SessionGraded,
    SessionStarted,
    Task,
    now,
)
from ownloop.store.journal import StreamWriter

__all__ = ["EpisodeLimits", "EpisodeResult", "run_episode", "UNGRADED"]

UNGRADED = frozenset({"endpoint_error", "interrupted", "crashed"})


class EpisodeLimits(NamedTuple):
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


class _Interrupted(Exception):
    pass


class _Episode:
    """The state of one running episode; ``run`` drives it and always writes SessionEnded."""

    def __init__(
        self,
        *,
        store: Store,
        stream: StreamWriter,
        agent: Agent,
        client: ModelClient,
        browser: BrowserSession,
        suite: Suite,
        task: Task,
        run_id: str,
        session_id: str,
        limits: EpisodeLimits,
        stop: threading.Event,
        grader_spec: str | None,
    ) -> None:
        self.store, self.stream, self.agent, self.client = store, stream, agent, client
        self.browser, self.suite, self.task = browser, suite, task
        self.run_id, self.session_id = run_id, session_id
        self.limits, self.stop, self.grader_spec = limits, stop, grader_spec
        self.started = time.monotonic()
        self.history: list[PastStep] = []
        self.parse_failures = 0
        self.action_errors = 0

    # ---------------------------------------------------------------- helpers
    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _check(self) -> None:
        if self.stop.is_set():
            raise _Interrupted

    def _ids(self) -> dict[str, str]:
        return {"run_id": self.run_id, "session_id": self.session_id}

    # ---------------------------------------------------------------- one step
    def _step(self, step: int, batch: list[Event]) -> SessionEnded | None:
        settings = self.agent.settings
        shot = self.browser.screenshot()
        sha = self.store.put_blob(shot.png)
        batch.append(ScreenshotTaken(
            at=now(), **self._ids(), step=step, sha256=sha, width=shot.width,
            height=shot.height, url=shot.url, capture_ms=shot.capture_ms))
        observation = Observation(step, ImagePart(
            sha256=sha, width=shot.width, height=shot.height), shot.url)
        messages = self.agent.build_messages(self.task, self.history, observation)

        parsed: Parsed | None = None
        response = ""
        for attempt in range(1, settings.calls_per_step + 1):
            self._check()
            sampling = settings.sampling
            if attempt > 1 and settings.resample_temperature is not None:
                sampling = Sampling(
                    temperature=max(settings.resample_temperature, sampling.temperature or 0.0),
                    top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                    frequency_penalty=sampling.frequency_penalty)
            outcome = self.client.call(
                messages, sampling, **self._ids(), step=step, attempt=attempt,
                purpose="step" if attempt == 1 else "resample", should_stop=self.stop.is_set)
            batch.extend(outcome.events)
            if outcome.text is None:
                self._check()
                return self._end("endpoint_error", step - 1, error=outcome.error)
            call_id = outcome.events[-1].call_id
            try:
                if settings.stop_only and outcome.finish_reason != "stop":
                    raise AgentParseError(f"finish reason {outcome.finish_reason!r}, not 'stop'")
                parsed = self.agent.parse(outcome.text, (shot.width, shot.height))
            except AgentParseError as exc:
                self.parse_failures += 1
                batch.append(ActionParsed(
                    at=now(), **self._ids(), step=step, call_id=call_id,
                    parser=self.agent.parser_name, parser_version=self.agent.parser_version,
                    error=str(exc)[:1000]))
                continue
            response = outcome.text
            batch.append(ActionParsed(
                at=now(), **self._ids(), step=step, call_id=call_id,
                parser=self.agent.parser_name, parser_version=self.agent.parser_version,
                thought=parsed.thought, actions=parsed.actions, model_size=parsed.model_size))
            break
        if parsed is None:
            return self._end("parse_error", step, error="no parsable response after "
                             f"{settings.calls_per_step} calls")
        if not parsed.actions:
            return self._end("no_action", step)

        index = 0
        for action_idx, action in enumerate(parsed.actions):
            for op in self.agent.translate(action):
                self._check()
                effect = self.browser.execute(op)
                download = self.store.put_blob(effect.download) if effect.download else None
                if not effect.ok:
                    self.action_errors += 1
                batch.append(BrowserActed(
                    at=now(), **self._ids(), step=step, idx=index, action_idx=action_idx, op=op,
                    ok=effect.ok, error=effect.error, url_before=effect.url_before,
                    url_after=effect.url_after, element=effect.element,
                    pages_opened=effect.pages_opened, dialog=effect.dialog, download=download,
                    duration_ms=effect.duration_ms))
                index += 1
        ending = self.agent.ending(parsed, self.history)
        self.history.append(PastStep(observation, response, parsed))
        if ending is not None:
            return self._end(ending.status, step, agent_status=ending.agent_status,
                             answer=ending.answer)
        self.browser.settle()
        if settings.pause_s:
            time.sleep(settings.pause_s)
        return None

    # ---------------------------------------------------------------- the end
    def _end(self, status: str, steps: int, *, agent_status: str = "", answer: str | None = None,
             error: str | None = None) -> SessionEnded:
        return SessionEnded(
            at=now(), **self._ids(), status=status,  # type: ignore[arg-type]
            agent_status=agent_status or status, answer=answer, steps=steps,
            seconds=round(self._elapsed(), 3), parse_failures=self.parse_failures,
            action_errors=self.action_errors, error=error)

    def _evidence(self) -> list[EvidenceCaptured]:
        pieces: list[Evidence] = []
        try:
            pieces.extend(capture_end_state(self.browser))
            pieces.extend(self.suite.capture(self.browser, self.task))
        except Exception as exc:  # noqa: BLE001 - a dead browser must not lose the session
            pieces.append(Evidence("capture_error", value_json=_json_string(str(exc)[:500])))
        events = []
        for piece in pieces:
            sha = self.store.put_blob(piece.data) if piece.data is not None else None
            events.append(EvidenceCaptured(
                at=now(), **self._ids(), name=piece.name, value_json=piece.value_json,
                sha256=sha, media_type=piece.media_type, source=piece.source))
        return events

    def _grade(self, ended: SessionEnded, evidence: list[EvidenceCaptured]) -> SessionGraded | None:
        if ended.status in UNGRADED or not self.grader_spec or self.grader_spec == "none":
            return None
        grader = make_grader(self.grader_spec)
        grade = grader.grade(ended.answer, evidence)
        return SessionGraded(
            at=now(), **self._ids(), grader=grader.name, grader_version=grader.version,
            score=grade.score, passed=grade.passed, details=grade.details, source="record")

    def run(self, started: SessionStarted) -> tuple[SessionEnded, SessionGraded | None]:
        self.stream.append([started])
        ended: SessionEnded | None = None
        step = 0
        try:
            self.suite.prepare(self.browser, self.task)
            while ended is None:
                step += 1
                if step > self.limits.max_steps:
                    ended = self._end("max_steps", step - 1)
                    break
                if self._elapsed() > self.limits.timeout_s:
                    ended = self._end("timeout", step - 1)
                    break
                batch: list[Event] = []
                try:
                    ended = self._step(step, batch)
                finally:
                    self.stream.append(batch)
        except _Interrupted:
            ended = self._end("interrupted", step, error="interrupted (Ctrl-C)")
        except Exception as exc:  # noqa: BLE001 - a crashed browser ends this session only
            ended = self._end("error", step, error=f"{type(exc).__name__}: {exc}"[:1000])
        evidence = self._evidence() if ended.status != "interrupted" else []
        grade = self._grade(ended, evidence)
        self.stream.append([*evidence, ended, *([grade] if grade else [])])
        return ended, grade


def _json_string(text: str) -> str:
    return json.dumps(text)


def run_episode(
    *,
    store: Store,
    agent: Agent,
    client: ModelClient,
    browser: BrowserSession,
    suite: Suite,
    started: SessionStarted,
    limits: EpisodeLimits | None = None,
    stop: threading.Event | None = None,
    grader_spec: str | None = None,
    on_stream: Callable[[StreamWriter], None] | None = None,
) -> EpisodeResult:
    """Record one episode of ``started.task`` into a new stream named by its session id."""
    with store.stream(started.session_id) as stream:
        if on_stream:
            on_stream(stream)
        episode = _Episode(
            store=store, stream=stream, agent=agent, client=client, browser=browser, suite=suite,
            task=started.task, run_id=started.run_id, session_id=started.session_id,
            limits=limits or EpisodeLimits(), stop=stop or threading.Event(),
            grader_spec=grader_spec)
        ended, grade = episode.run(started)
    return EpisodeResult(
        started.session_id, started.task.task_id, ended.status, ended.answer, ended.steps,
        ended.seconds, grade.score if grade else None, grade.passed if grade else None,
        ended.error)
