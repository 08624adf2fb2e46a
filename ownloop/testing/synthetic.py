"""Synthetic sessions: the events a recording would append, built without a browser or a model,
for tests and benches (a test tool we ship, as ``ownloop.modelserver`` is).

A session is a ``Session`` of ``Step`` s; ``session_events`` turns it into its events in the order
the recorder appends them (start, per step a screenshot, a model call, its parse and the browser's
operations, then the evidence, the end and the grades), and ``write_sessions`` appends them
through the store API, one stream per session. ``agent_step`` makes a step the way a real agent
records it: the response is what the model would write for the actions (``agent.render``), the
parse is the agent's and the operations are its translation, so a re-parse changes nothing.

Times are seconds after ``T0`` (``at``): a session starts at ``start``, step ``n`` at
``start + n * step_seconds`` (or its own ``at``), and within a step the events are ``tick``
seconds apart (0: all at the step's instant, as the benches write them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, TypeVar

import msgspec

from ownloop.agents import make_agent
from ownloop.store import Store
from ownloop.store import events as E

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SIZE = (1280, 800)
SCREENSHOT = b"synthetic screenshot"  # the blob a step shows unless it names its own


_Event = TypeVar("_Event", bound=E.Event)


def _event(kind: type[_Event], **fields: Any) -> _Event:
    """An event of ``kind`` with the ``fields`` that differ from its defaults: one given its
    default would be written out (``omit_defaults`` omits a default only when not passed)."""
    defaults = _defaults(kind)
    return kind(
        **{
            name: value
            for name, value in fields.items()
            if name not in defaults
            or value != defaults[name]
            or type(value) is not type(defaults[name])
        }
    )


_DEFAULTS: dict[type[msgspec.Struct], dict[str, Any]] = {}


def _defaults(kind: type[msgspec.Struct]) -> dict[str, Any]:
    """The fields of ``kind`` that have a default, with it (read once a kind: it is slow)."""
    found = _DEFAULTS.get(kind)
    if found is None:
        found = _DEFAULTS[kind] = {
            f.name: f.default
            for f in msgspec.structs.fields(kind)
            if f.default is not msgspec.NODEFAULT
        }
    return found


def at(seconds: float) -> datetime:
    """``seconds`` after ``T0``."""
    return T0 + timedelta(seconds=seconds)


class Acted(NamedTuple):
    """One browser operation of a step, and what the step's defaults do not say about it."""

    op: E.Op
    action_idx: int = 0
    element: E.Element | None = None  # None: the step's element
    duration_ms: float = 0.0


class Evidence(NamedTuple):
    """A piece of evidence captured at the session's end; ``(name, value_json)`` will do. Each
    field is the ``EvidenceCaptured`` field of the same name."""

    name: str
    value_json: str | None = None
    sha256: str | None = None
    media_type: str = "application/json"


class Grade(NamedTuple):
    """A grade recorded after the session's end; ``(grader, score, passed)`` will do. Each field
    is the ``SessionGraded`` field of the same name."""

    grader: str
    score: float
    passed: bool
    source: E.GradeSource = "record"
    details: str = ""
    grader_version: str = ""


@dataclass
class Step:
    """One recorded step: a screenshot, a model call, its parse, and the browser's operations."""

    actions: Sequence[E.Action] = ()
    thought: str = "I do the next thing."
    ops: Sequence[E.Op | Acted] = ()
    response: str | None = None  # None: "Thought: <thought>\nAction: ..."
    url: str = "http://site.test/page"
    url_after: str | None = None  # None: ``url``
    op_urls: bool = True  # the operations record the page's URL before and after
    sha256: str | None = None  # the screenshot; None: the session's
    capture_ms: float = 0.0
    at: float | None = None  # seconds after T0; None: the session's start + n * step_seconds
    model: str = ""
    messages: tuple[E.Message, ...] = ()
    sampling: E.Sampling = field(default_factory=E.Sampling)
    finish_reason: str | None = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float = 12.0
    attempt: int = 1
    parser: str = "uitars"
    model_size: tuple[int, int] | None = None
    failed_first: str | None = None  # a response that failed to parse before this one
    parse_error: str | None = None  # the response was recorded as a parse failure (no ops)
    element: E.Element | None = None  # each operation's element (unless it names its own)
    op_error: str | None = None  # every operation failed with this error
    after: Sequence[E.Event] = ()  # events appended after the step's own (a fidelity, say)
    # As the session's agent records it (``agent_step``): the response rendered for ``actions``,
    # their parse (or ``recorded_actions``, as an older parser read it) and their translation.
    from_agent: bool = False
    recorded_actions: Sequence[E.Action] | None = None


@dataclass
class Session:
    """One session; its fields are the recording's, its times seconds after ``T0``."""

    session_id: str
    steps: Sequence[Step] = ()
    run_id: str = "r1"
    task: E.Task | None = None  # None: task ``task_id``, prompt "Do <task_id>", ``grader``
    task_id: str = "task-1"
    grader: str | None = "answer:contains:done"
    agent: str = "uitars"
    model: str = "synthetic"
    viewport: tuple[int, int] = SIZE
    parent_session_id: str | None = None
    replay_mode: str | None = None
    status: E.Status = "finished"
    answer: str | None = "done"
    evidence: Sequence[Evidence | tuple[str, str]] = (
        Evidence("final_url", '"http://site.test/done"'),
    )
    grades: Sequence[Grade | tuple[str, float, bool]] = (Grade("answer:contains:done", 1.0, True),)
    start: float = 0.0
    step_seconds: float = 1.0
    tick: float = 0.1  # between a step's events; the grades follow the end by one tick each
    end: float | None = None  # after start; None: one step_seconds after the last step
    seconds: float | None = None  # SessionEnded.seconds; None: ``end``
    sha256: str = ""  # every step's screenshot unless it names its own (write_sessions sets it)
    agent_options: dict[str, Any] = field(default_factory=dict)  # the agent's, and the run's
    # a model call's id: {session}, {step}, and {call}: 0 for a failed first call, 1 for the next
    call_ids: str = "{session}-{step}-{call}"


def step_events(session: Session, number: int, step: Step) -> list[E.Event]:
    """The events of step ``number`` of ``session`` (``step``), as the recorder appends them."""
    if step.from_agent:
        step = _rendered(session, step)
    t = step.at if step.at is not None else session.start + number * session.step_seconds
    tick = session.tick
    ids = {"run_id": session.run_id, "session_id": session.session_id, "step": number}
    width, height = session.viewport
    events: list[E.Event] = [
        _event(
            E.ScreenshotTaken,
            at=at(t),
            **ids,
            sha256=step.sha256 or session.sha256,
            width=width,
            height=height,
            url=step.url,
            capture_ms=step.capture_ms,
        )
    ]
    attempt = step.attempt
    if step.failed_first is not None:
        failed = session.call_ids.format(session=session.session_id, step=number, call=0)
        events += [
            _event(
                E.ModelCalled, at=at(t + tick), **ids, call_id=failed, response=step.failed_first
            ),
            _parsed(step, at(t + 2 * tick), ids, failed, error="could not parse"),
        ]
        attempt += 1
    call = session.call_ids.format(session=session.session_id, step=number, call=1)
    events.append(_called(step, at(t + 3 * tick), ids, call, attempt))
    if step.parse_error is not None:
        events.append(_parsed(step, at(t + 4 * tick), ids, call, error=step.parse_error))
    else:
        events.append(
            _parsed(
                step,
                at(t + 4 * tick),
                ids,
                call,
                thought=step.thought,
                actions=tuple(step.actions),
                model_size=step.model_size,
            )
        )
        events += _acted(step, t, tick, ids)
    return [*events, *step.after]


def _called(step: Step, when: datetime, ids: dict[str, Any], call: str, attempt: int) -> E.Event:
    """The step's model call ``call`` (attempt ``attempt``) at ``when``."""
    return _event(
        E.ModelCalled,
        at=when,
        **ids,
        call_id=call,
        attempt=attempt,
        purpose="step" if attempt == 1 else "resample",
        model=step.model,
        messages=step.messages,
        sampling=step.sampling,
        response=step.response
        if step.response is not None
        else f"Thought: {step.thought}\nAction: ...",
        finish_reason=step.finish_reason,
        prompt_tokens=step.prompt_tokens,
        completion_tokens=step.completion_tokens,
        latency_ms=step.latency_ms,
    )


def _parsed(step: Step, when: datetime, ids: dict[str, Any], call: str, **fields: Any) -> E.Event:
    """The ActionParsed of ``call``'s answer at ``when``: its ``fields`` (an error, or the
    thought, actions and model size)."""
    return _event(E.ActionParsed, at=when, **ids, call_id=call, parser=step.parser, **fields)


def _acted(step: Step, t: float, tick: float, ids: dict[str, Any]) -> list[E.Event]:
    """One BrowserActed a ``step.ops`` entry, a tenth of a ``tick`` apart from ``t + 5 tick``."""
    events: list[E.Event] = []
    for idx, op in enumerate(step.ops):
        acted = op if isinstance(op, Acted) else Acted(op)
        url_after = step.url if step.url_after is None else step.url_after
        url_after = url_after if step.op_urls else ""
        events.append(
            _event(
                E.BrowserActed,
                at=at(t + (5 + idx / 10) * tick),
                **ids,
                idx=idx,
                action_idx=acted.action_idx,
                op=acted.op,
                ok=step.op_error is None,
                error=step.op_error,
                url_before=step.url if step.op_urls else "",
                url_after=url_after,
                element=acted.element or step.element,
                duration_ms=acted.duration_ms,
            )
        )
    return events


def session_events(session: Session, sha256: str = "") -> list[E.Event]:
    """The events of ``session``, in the order the recorder appends them; ``sha256``: the
    screenshot of every step that names none (when the session names none either)."""
    session = replace(session, sha256=session.sha256 or sha256)
    ids = {"run_id": session.run_id, "session_id": session.session_id}
    task = session.task or E.Task(
        task_id=session.task_id,
        prompt=f"Do {session.task_id}",
        start_url="http://site.test/start",
        grader=session.grader,
    )
    events: list[E.Event] = [
        _event(
            E.SessionStarted,
            at=at(session.start),
            **ids,
            task=task,
            agent=session.agent,
            model=session.model,
            viewport=session.viewport,
            parent_session_id=session.parent_session_id,
            replay_mode=session.replay_mode,
        )
    ]
    for number, step in enumerate(session.steps, 1):
        events += step_events(session, number, step)
    end = session.end
    if end is None:
        end = (len(session.steps) + 1) * session.step_seconds
    for piece in session.evidence:
        fields = Evidence(*piece)._asdict()
        events.append(_event(E.EvidenceCaptured, at=at(session.start + end), **ids, **fields))
    events.append(
        _event(
            E.SessionEnded,
            at=at(session.start + end),
            **ids,
            status=session.status,
            answer=session.answer,
            steps=len(session.steps),
            seconds=end if session.seconds is None else session.seconds,
        )
    )
    for offset, item in enumerate(session.grades, 1):
        fields = Grade(*item)._asdict()
        when = at(session.start + end + offset * session.tick)
        events.append(_event(E.SessionGraded, at=when, **ids, **fields))
    return events


def write_sessions(store: Store, *sessions: Session, run_started: bool = True) -> None:
    """A ``RunStarted`` per run (in stream ``run-<id>``, with its agent's settings; none with
    ``run_started=False``), then each session in its own stream, named by its id; a session
    without a screenshot of its own shows ``SCREENSHOT``."""
    sha = store.put_blob(SCREENSHOT)
    runs: dict[str, Session] = {}
    for session in sessions if run_started else ():
        runs.setdefault(session.run_id, session)
    for run_id, first in runs.items():
        settings = make_agent(first.agent, **first.agent_options).options()
        with store.stream(f"run-{run_id}") as stream:
            stream.append(
                [
                    E.RunStarted(
                        at=at(first.start - 0.5),
                        run_id=run_id,
                        agent=first.agent,
                        agent_settings=settings,
                    )
                ]
            )
    for session in sessions:
        with store.stream(session.session_id) as stream:
            stream.append(session_events(session, sha))


def _rendered(session: Session, step: Step) -> Step:
    """``step`` as the session's agent (with its options) records it."""
    agent = make_agent(session.agent, **session.agent_options)
    response = agent.render(step.thought, step.actions, session.viewport)
    parsed = agent.parse(response, session.viewport)
    actions = tuple(step.recorded_actions or parsed.actions)
    ops = [
        Acted(op, action_idx)
        for action_idx, action in enumerate(actions)
        for op in agent.translate(action)
    ]
    return replace(
        step,
        actions=actions,
        thought=parsed.thought,
        ops=ops,
        response=response,
        model_size=parsed.model_size,
        parser=session.agent,
        from_agent=False,
    )


def agent_step(actions: Sequence[E.Action], **fields: Any) -> Step:
    """A step as the session's agent records it: the model's response for ``actions`` rendered
    by the agent (with the session's ``agent_options``), the agent's parse of it, and its
    translation of each action into operations, on a button. ``fields`` are the ``Step``'s
    others (``thought``, ``failed_first``, ``parse_error``, ``recorded_actions``, ``url``, ...)."""
    fields.setdefault("element", E.Element(tag="button", id="go", name="Go", role="button"))
    return Step(actions=actions, from_agent=True, **fields)


def click(x: float = 640, y: float = 400) -> E.Click:
    return E.Click(x=x, y=y)


def scroll(direction: str = "down") -> E.Scroll:
    return E.Scroll(direction=direction, x=300, y=400)  # type: ignore[arg-type]


def drag() -> E.Drag:
    return E.Drag(x=100, y=100, x2=300, y2=100)


def finish(answer: str = "done") -> E.Finish:
    return E.Finish(answer=answer)
