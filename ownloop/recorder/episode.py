"""One episode: screenshot, call the model, parse, act, settle, append — until the agent ends it.

Every side effect becomes exactly one event, and a step's events are appended (and fsync'd)
together before the next step starts, so a kill at any moment loses at most the step in flight.

Replays reuse the loop: ``run_episode(play=...)`` swaps the agent's step for another one built
from :meth:`Episode.observe` and :meth:`Episode.act` (e.g. re-executing recorded operations), and
``on_step`` may add events (fidelity) to each step's batch before it is appended. The model client
is any ``ModelCaller`` (``ownloop.recorder.call``): the live client or a cassette of recorded
responses, each called with the step's ``CallContext``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from ownloop.agents.base import Agent, AgentParseError, Observation, Parsed, PastStep
from ownloop.grading import UNGRADED, make_grader, wants_network, with_network
from ownloop.grading.osworld import is_unsupported, wants_getter_blobs, with_getter_blobs
from ownloop.grading.version import grader_version
from ownloop.recorder.call import CallContext, ModelCaller
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
    Task,
    now,
)
from ownloop.store.ids import SessionIds
from ownloop.store.journal import StreamWriter
from ownloop.world import World, WorldLost
from ownloop.world.browser import BrowserSession, may_start_download
from ownloop.world.browser_world import BrowserWorld
from ownloop.world.suites import Evidence, Suite

__all__ = [
    "Episode",
    "EpisodeLimits",
    "EpisodeResult",
    "Play",
    "StepHook",
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


class _Interrupted(Exception):
    pass


class Episode:
    """The state of one running episode; ``run`` drives it and always writes SessionEnded.

    ``play(episode, step, batch)`` does one step and returns the SessionEnded that ends the
    episode, or None to go on (default: :meth:`agent_step`); ``on_step(step, batch)`` sees each
    step's events before they are appended and may add its own.
    """

    def __init__(
        self,
        *,
        store: Store,
        stream: StreamWriter,
        agent: Agent,
        client: ModelCaller,
        browser: World | BrowserSession,
        suite: Suite,
        task: Task,
        run_id: str,
        session_id: str,
        limits: EpisodeLimits,
        stop: threading.Event,
        grader_spec: str | None,
        play: Play | None = None,
        on_step: StepHook | None = None,
    ) -> None:
        self.store, self.stream, self.agent, self.client = store, stream, agent, client
        # The world the loop acts on (a bare BrowserSession is the browser world).
        self.world: World = (
            BrowserWorld(browser) if isinstance(browser, BrowserSession) else browser
        )
        self.suite, self.task = suite, task
        self.run_id, self.session_id = run_id, session_id
        self.limits, self.stop, self.grader_spec = limits, stop, grader_spec
        self.play: Play = play or Episode.agent_step
        self.on_step = on_step
        self.started = time.monotonic()
        self.history: list[PastStep] = []
        self.parse_failures = 0
        self.action_errors = 0
        # Images go out at the size the agent's released client sends (Fara: resized).
        self.sent_images = SentImages(
            getattr(agent, "sent_image_size", None), store.get_blob, store.put_blob
        )

    @property
    def browser(self) -> BrowserSession:
        """The browser session of a browser world (replay's guard reads its page)."""
        if not isinstance(self.world, BrowserWorld):
            raise TypeError("this episode runs on a desktop, not in a browser")
        return self.world.session

    # ---------------------------------------------------------------- helpers
    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def check(self) -> None:
        """Stop here (the episode ends ``interrupted``) if Ctrl-C was pressed."""
        if self.stop.is_set():
            raise _Interrupted

    def ids(self) -> SessionIds:
        """The run and session ids every event of the episode carries."""
        return SessionIds(run_id=self.run_id, session_id=self.session_id)

    # ---------------------------------------------------------------- the parts of a step
    def observe(self, step: int, batch: list[Event], *, title: bool = True) -> Observation:
        """Take the step's screenshot, store it and add its ScreenshotTaken to ``batch``;
        without ``title`` (no prompt will show it, e.g. a replay of recorded ops) the page's
        title is not read (a round trip to the browser) and the observation's is ""."""
        shot = self.world.screenshot()
        sha = self.store.put_blob(shot.png)
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
                a11y=self.store.put_blob(shot.a11y) if shot.a11y is not None else None,
            )
        )
        return Observation(
            step,
            ImagePart(sha256=sha, width=shot.width, height=shot.height),
            shot.url,
            self.world.title() if title else "",
        )

    def act(self, step: int, index: int, action_idx: int, op: Op, batch: list[Event]) -> None:
        """Execute one operation on the world and add its BrowserActed to ``batch``."""
        self.check()
        effect = self.world.execute(op)
        download = self.store.put_blob(effect.download) if effect.download else None
        if not effect.ok:
            self.action_errors += 1
        batch.append(
            BrowserActed(
                at=now(),
                **self.ids(),
                step=step,
                idx=index,
                action_idx=action_idx,
                op=op,
                ok=effect.ok,
                error=effect.error,
                url_before=effect.url_before,
                url_after=effect.url_after,
                element=effect.element,
                pages_opened=effect.pages_opened,
                dialog=effect.dialog,
                download=download,
                duration_ms=effect.duration_ms,
                command=effect.command,
                http_status=effect.http_status,
                returncode=effect.returncode,
                output=effect.output,
                guest_error=effect.guest_error,
            )
        )

    def settle(self, batch: list[Event], *, download_grace: bool = True) -> None:
        """Let the page settle after a step. A download its operations started that came only
        now, and a navigation they started that the guard refused only now, are recorded on the
        step's last operation that could have started them (``download_grace``: see
        ``BrowserSession.settle``)."""
        late = self.world.settle(download_grace=download_grace)
        refusal = self.world.late_refusal()
        if late is None and refusal is None:
            return
        sha = self.store.put_blob(late) if late is not None else None
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
        return self.answer(step, self.observe(step, batch), batch)

    def answer(
        self, step: int, observation: Observation, batch: list[Event]
    ) -> SessionEnded | None:
        """The recorder's step once its screenshot is taken: call the model, parse, act, settle
        (a guarded replay hands a step to the live model so)."""
        settings = self.agent.settings
        shot_size = (observation.screenshot.width, observation.screenshot.height)
        messages = self.sent_images(self.agent.build_messages(self.task, self.history, observation))

        parsed: Parsed | None = None
        response = ""
        for attempt in range(1, settings.calls_per_step + 1):
            self.check()
            sampling = settings.sampling
            if attempt > 1 and settings.resample_temperature is not None:
                sampling = msgspec.structs.replace(
                    sampling,
                    temperature=max(settings.resample_temperature, sampling.temperature or 0.0),
                )
            outcome = self.client.call(
                messages,
                sampling,
                CallContext(
                    self.run_id,
                    self.session_id,
                    step,
                    attempt,
                    "step" if attempt == 1 else "resample",
                ),
                should_stop=self.stop.is_set,
            )
            batch.extend(outcome.events)
            if outcome.text is None:
                self.check()
                return self.end("endpoint_error", step - 1, error=outcome.error)
            call_id = outcome.events[-1].call_id
            try:
                if settings.stop_only and outcome.finish_reason != "stop":
                    raise AgentParseError(f"finish reason {outcome.finish_reason!r}, not 'stop'")
                parsed = self.agent.parse(outcome.text, shot_size, self.history)
            except AgentParseError as exc:
                self.parse_failures += 1
                batch.append(
                    ActionParsed(
                        at=now(),
                        **self.ids(),
                        step=step,
                        call_id=call_id,
                        parser=self.agent.parser_name,
                        parser_version=self.agent.parser_version,
                        error=str(exc)[:1000],
                        coordinate_frame=self.agent.coordinate_frame,
                    )
                )
                continue
            response = outcome.text
            batch.append(
                ActionParsed(
                    at=now(),
                    **self.ids(),
                    step=step,
                    call_id=call_id,
                    parser=self.agent.parser_name,
                    parser_version=self.agent.parser_version,
                    thought=parsed.thought,
                    actions=parsed.actions,
                    model_size=parsed.model_size,
                    coordinate_frame=self.agent.coordinate_frame,
                )
            )
            break
        if parsed is None:
            return self.end(
                "parse_error",
                step,
                error=f"no parsable response after {settings.calls_per_step} calls",
            )
        if not parsed.actions:
            return self.end("no_action", step)

        index = 0
        for action_idx, action in enumerate(parsed.actions):
            for op in self.world.translate(self.agent, action):
                self.act(step, index, action_idx, op, batch)
                index += 1
        ending = self.agent.ending(parsed, self.history)
        self.history.append(PastStep(observation, response, parsed))
        if ending is not None:
            return self.end(
                ending.status, step, agent_status=ending.agent_status, answer=ending.answer
            )
        self.settle(batch)
        if settings.pause_s:
            time.sleep(settings.pause_s)
        return None

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
            parse_failures=self.parse_failures,
            action_errors=self.action_errors,
            error=error,
        )

    def _evidence(self, ended: SessionEnded) -> list[EvidenceCaptured]:
        pieces: list[Evidence] = []
        try:
            pieces.extend(self.world.end_state())
            pieces.extend(self.world.capture(self.suite, self.task, ended))
        except Exception as exc:  # noqa: BLE001 - a dead browser must not lose the session
            pieces.append(Evidence("capture_error", value_json=_json_string(str(exc)[:500])))
        events = []
        for piece in pieces:
            sha = self.store.put_blob(piece.data) if piece.data is not None else None
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
        if ended.status in UNGRADED or not self.grader_spec or self.grader_spec == "none":
            return None
        grader = make_grader(self.grader_spec)
        if wants_network(grader):  # the HAR is a blob: read back what was just stored
            evidence = with_network(evidence, self.store.get_blob)
        if wants_getter_blobs(grader):  # an OSWorld getter's office file is a blob
            evidence = with_getter_blobs(evidence, self.store.get_blob)
        grade = grader.grade(ended.answer, evidence)
        if is_unsupported(grade):  # no verdict: a later regrade grades it once support lands
            return None
        return SessionGraded(
            at=now(),
            **self.ids(),
            grader=grader.name,
            grader_version=grader_version(grader),
            score=grade.score,
            passed=grade.passed,
            details=grade.details,
            source="record",
            checks=grade.checks,
        )

    def run(self, started: SessionStarted) -> tuple[SessionEnded, SessionGraded | None]:
        self.stream.append([started])
        ended: SessionEnded | None = None
        step = 0
        try:
            self.world.prepare(self.suite, self.task)
            while ended is None:
                step += 1
                # One step is one policy turn (its re-samples included): the budget holds.
                if step > self.limits.max_steps:
                    ended = self.end("max_steps", step - 1)
                    break
                if self._elapsed() > self.limits.timeout_s:
                    ended = self.end("timeout", step - 1)
                    break
                batch: list[Event] = []
                try:
                    ended = self.play(self, step, batch)
                finally:
                    if self.on_step is not None and batch:
                        self.on_step(step, batch)
                    self.stream.append(batch)
        except _Interrupted:
            ended = self.end("interrupted", step, error="interrupted (Ctrl-C)")
        except WorldLost as exc:  # the desktop stopped answering: not the agent's doing
            ended = self.end("env_error", step, error=str(exc)[:1000])
        except Exception as exc:  # noqa: BLE001 - a crashed browser ends this session only
            if self.stop.is_set():  # the browser went down with the same Ctrl-C
                ended = self.end("interrupted", step, error="interrupted (Ctrl-C)")
            else:
                ended = self.end("error", step, error=f"{type(exc).__name__}: {exc}"[:1000])
        # A world that stopped answering has no end state to read (each read would time out).
        evidence = self._evidence(ended) if ended.status not in ("interrupted", "env_error") else []
        grade = self._grade(ended, evidence)
        self.stream.append([*evidence, ended, *([grade] if grade else [])])
        return ended, grade


Play = Callable[[Episode, int, list[Event]], SessionEnded | None]
"""One step of an episode: (episode, step number, the step's batch) -> the end, or None."""

StepHook = Callable[[int, list[Event]], None]
"""Sees a step's events (and may add some) before they are appended."""


def _json_string(text: str) -> str:
    return json.dumps(text)


def run_episode(
    *,
    store: Store,
    agent: Agent,
    client: ModelCaller,
    browser: World | BrowserSession,
    suite: Suite,
    started: SessionStarted,
    limits: EpisodeLimits | None = None,
    stop: threading.Event | None = None,
    grader_spec: str | None = None,
    on_stream: Callable[[StreamWriter], None] | None = None,
    play: Play | None = None,
    on_step: StepHook | None = None,
) -> EpisodeResult:
    """Record one episode of ``started.task`` into a new stream named by its session id.

    Args:
        play: does one step in place of the agent's (replays); see :class:`Episode`.
        on_step: sees (and may add to) each step's events before they are appended.
    """
    limits = limits or EpisodeLimits()
    # The session declares the budget the loop enforces: they cannot differ.
    started = msgspec.structs.replace(started, budget=limits.max_steps)
    with store.stream(started.session_id) as stream:
        if on_stream:
            on_stream(stream)
        episode = Episode(
            store=store,
            stream=stream,
            agent=agent,
            client=client,
            browser=browser,
            suite=suite,
            task=started.task,
            run_id=started.run_id,
            session_id=started.session_id,
            limits=limits,
            stop=stop or threading.Event(),
            grader_spec=grader_spec,
            play=play,
            on_step=on_step,
        )
        ended, grade = episode.run(started)
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
