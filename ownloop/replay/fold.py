"""Folding events into sessions: the typed, read-only state every replay command starts from.

``fold`` rebuilds one session from its events; ``fold_many`` rebuilds every session in a stream of
events in one pass (regrading thousands of sessions a second depends on it). Both are pure: they
read nothing but the events they are given. Steps are put in step order, a step's model calls in
attempt order, its parses in the order of their calls and its operations in operation order;
everything else (evidence, ends, grades) keeps the order given.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from operator import attrgetter
from typing import Any

import msgspec

from ownloop.errors import OwnloopError
from ownloop.store.events import (
    Action,
    ActionParsed,
    BrowserActed,
    Event,
    EvidenceCaptured,
    FidelityMeasured,
    ModelCalled,
    ScreenshotTaken,
    SessionEnded,
    SessionGraded,
    SessionStarted,
    Task,
)

__all__ = ["NoSessionEvents", "Session", "Step", "fold", "fold_many"]

_encode = msgspec.json.encode
_by_idx = attrgetter("idx")
_by_attempt = attrgetter("attempt")


class NoSessionEvents(OwnloopError):
    """There was nothing to fold for the session asked for."""


class Step(msgspec.Struct, frozen=True, gc=False):
    """One step: what the agent saw, every model call, its parses, what the browser did.

    ``parsed`` is the step's last parse, the one the recorder acted on; ``parses`` keeps all of
    them (re-samples after a parse failure come first). ``effects`` are in operation order.
    Not tracked by the garbage collector: a step never refers back to itself.
    """

    step: int
    screenshot: ScreenshotTaken | None = None
    calls: tuple[ModelCalled, ...] = ()
    parsed: ActionParsed | None = None
    parses: tuple[ActionParsed, ...] = ()
    effects: tuple[BrowserActed, ...] = ()
    fidelity: FidelityMeasured | None = None

    @property
    def actions(self) -> tuple[Action, ...]:
        """The accepted parse's actions, or () when the step has none."""
        return self.parsed.actions if self.parsed is not None else ()

    @property
    def thought(self) -> str:
        """The accepted parse's thought, or ""."""
        return self.parsed.thought if self.parsed is not None else ""

    @property
    def response(self) -> str | None:
        """The text of the step's last model call, or None."""
        return self.calls[-1].response if self.calls else None


class Session(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A session rebuilt from its events.

    ``outcome`` is the last ``SessionEnded`` given (a "crashed" end appended later by another
    stream counts); ``grades`` are in the order given, so the last is the latest.
    """

    session_id: str
    run_id: str = ""
    task: Task | None = None
    agent: str = ""
    model: str = ""
    attempt: int = 1
    parent_session_id: str | None = None
    replay_mode: str | None = None
    fork_step: int | None = None
    viewport: tuple[int, int] = (0, 0)
    started_at: datetime | None = None
    steps: tuple[Step, ...] = ()
    outcome: SessionEnded | None = None
    evidence: tuple[EvidenceCaptured, ...] = ()
    grades: tuple[SessionGraded, ...] = ()
    judgements: tuple[SessionGraded, ...] = ()  # a model judge's verdicts (``ownloop judge``)

    @property
    def task_id(self) -> str:
        """The task's id, or "" when the session's start was not among the events."""
        return self.task.task_id if self.task is not None else ""

    @property
    def latest_grade(self) -> SessionGraded | None:
        """The most recent grade, or None if the session was never graded."""
        return self.grades[-1] if self.grades else None

    @property
    def answer(self) -> str | None:
        """The agent's final answer as the session's end recorded it."""
        return self.outcome.answer if self.outcome is not None else None

    @property
    def status(self) -> str:
        """The end status (see DESIGN §5), or "unfinished" when no end was recorded yet."""
        return self.outcome.status if self.outcome is not None else "unfinished"

    @property
    def first_divergence(self) -> int | None:
        """For a replayed session, the first step whose fidelity says it diverged, else None."""
        for step in self.steps:
            if step.fidelity is not None and step.fidelity.diverged:
                return step.step
        return None

    def summary_line(self) -> str:
        """One line: id, task, status, steps, latest grade, answer.

        ``3f2a9c  click-button-7  finished  4 steps  pass 1.00 (miniwob)  answer='ok'``
        """
        parts = [self.session_id, self.task_id or "?", self.status, f"{len(self.steps)} steps"]
        grade = self.latest_grade
        if grade is not None:
            verdict = "pass" if grade.passed else "fail"
            parts.append(f"{verdict} {grade.score:.2f} ({_shorten(grade.grader, 40)})")
        else:
            parts.append("ungraded")
        if self.parent_session_id is not None:
            mode = f" {self.replay_mode}" if self.replay_mode else ""
            fork = f" from step {self.fork_step}" if self.fork_step is not None else ""
            parts.append(f"replay{mode} of {self.parent_session_id}{fork}")
        if self.answer is not None:
            parts.append(f"answer={_shorten(self.answer, 40)!r}")
        return "  ".join(parts)

    def to_json(self) -> str:
        """The whole session as JSON (events keep their ``kind`` tags)."""
        return _encode(self).decode()


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fold(events: Iterable[Event], session_id: str | None = None) -> Session:
    """Rebuild one session from events in the order they happened.

    Args:
        events: events of one or more sessions, from one or several streams, ordered by time.
        session_id: the session to rebuild; by default the session of the first event that
            belongs to a session. Events of other sessions and run-level events are ignored.

    Raises:
        NoSessionEvents: no event belongs to the session.
    """
    mine: list[Event] = []
    for event in events:
        owner = event.session_id
        if not owner:
            continue
        if session_id is None:
            session_id = owner
        if owner == session_id:
            mine.append(event)
    if not mine:
        wanted = f"session {session_id!r}" if session_id else "any session"
        raise NoSessionEvents(
            f'no events for {wanted}. List sessions with: ownloop sql "select * from sessions"'
        )
    return _build(mine[0].session_id, mine)


def fold_many(events: Iterable[Event]) -> dict[str, Session]:
    """Rebuild every session the events mention, in one pass; keyed by session id, in first-seen
    order. Run-level events are ignored."""
    groups: dict[str, list[Event]] = {}
    for event in events:
        owner = event.session_id
        if owner:
            group = groups.get(owner)
            if group is None:
                groups[owner] = group = []
            group.append(event)
    return {owner: _build(owner, group) for owner, group in groups.items()}


# Where each kind of event goes: slots 0-4 are per step (their index in a step's bucket).
_SLOT: dict[type, int] = {
    ScreenshotTaken: 0,
    ModelCalled: 1,
    ActionParsed: 2,
    BrowserActed: 3,
    FidelityMeasured: 4,
    EvidenceCaptured: 5,
    SessionGraded: 6,
    SessionEnded: 7,
    SessionStarted: 8,
}


def _build(session_id: str, events: list[Event]) -> Session:
    # The hot loop of a regrade: one dict look-up per event, no per-event function calls.
    slot_of = _SLOT.get
    buckets: dict[int, list[Any]] = {}  # step -> [screenshot, calls, parses, effects, fidelity]
    started: SessionStarted | None = None
    outcome: SessionEnded | None = None
    evidence: list[EvidenceCaptured] = []
    grades: list[SessionGraded] = []
    judgements: list[SessionGraded] = []
    for event in events:
        slot = slot_of(type(event), -1)
        if slot < 5:
            if slot < 0:
                continue
            number = event.step  # type: ignore[union-attr]
            if number < 0:
                continue  # a judge's call about the session (ownloop judge): no step of it
            bucket = buckets.get(number)
            if bucket is None:
                buckets[number] = bucket = [None, [], [], [], None]
            if slot == 0 or slot == 4:
                bucket[slot] = event  # the last screenshot / fidelity of a step wins
            else:
                bucket[slot].append(event)
        elif slot == 5:
            evidence.append(event)  # type: ignore[arg-type]
        elif slot == 6:
            if event.source == "judge":  # type: ignore[union-attr]
                judgements.append(event)  # type: ignore[arg-type]
            else:
                grades.append(event)  # type: ignore[arg-type]
        elif slot == 7:
            outcome = event  # type: ignore[assignment]
        elif started is None:
            started = event  # type: ignore[assignment]
    steps = []
    for number in sorted(buckets):
        shot, calls, parses, effects, fidelity = buckets[number]
        # Several streams may interleave a step's events in any order: put them in the order the
        # recorder made them (stable sorts, so equal keys keep the order given).
        if len(calls) > 1:
            calls.sort(key=_by_attempt)
            if len(parses) > 1:
                order = {call.call_id: i for i, call in enumerate(calls)}
                parses.sort(key=lambda parse: order.get(parse.call_id, len(order)))
        if len(effects) > 1:
            effects.sort(key=_by_idx)
        parsed = parses[-1] if parses else None
        steps.append(
            Step(number, shot, tuple(calls), parsed, tuple(parses), tuple(effects), fidelity)
        )
    if started is None:  # e.g. a journal whose start line was lost: keep what is known
        return Session(
            session_id=session_id,
            run_id=events[0].run_id,
            steps=tuple(steps),
            outcome=outcome,
            evidence=tuple(evidence),
            grades=tuple(grades),
            judgements=tuple(judgements),
        )
    return Session(
        session_id=session_id,
        run_id=started.run_id,
        task=started.task,
        agent=started.agent,
        model=started.model,
        attempt=started.attempt,
        parent_session_id=started.parent_session_id,
        replay_mode=started.replay_mode,
        fork_step=started.fork_step,
        viewport=started.viewport,
        started_at=started.at,
        steps=tuple(steps),
        outcome=outcome,
        evidence=tuple(evidence),
        grades=tuple(grades),
        judgements=tuple(judgements),
    )
