"""Synthetic sessions for fast replay tests, written through the store API.

Each step is "recorded" the way the recorder does it, with the real uitars agent: the response is
what the model would write for the step's actions (``agent.render``), the parse is the agent's
parse of it, and the operations are the agent's translation; so a re-parse with the same options
changes nothing unless a step says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ownloop.agents import make_agent
from ownloop.store import Store
from ownloop.store import events as E

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SIZE = (1280, 800)


@dataclass
class StepSpec:
    """One step: actions (page coordinates), and ways to make its record differ from today's."""

    actions: Sequence[E.Action]
    thought: str = "I do the next thing."
    failed_first: str | None = None  # a response that failed to parse before the accepted one
    recorded_error: str | None = None  # record the accepted response as a parse failure
    recorded_actions: Sequence[E.Action] | None = None  # record these instead of today's parse
    url: str = "http://site.test/page"
    op_error: str | None = None


@dataclass
class SessionSpec:
    session_id: str
    task_id: str = "task-1"
    run_id: str = "r1"
    steps: Sequence[StepSpec] = ()
    status: str = "finished"
    answer: str | None = "done"
    grader: str | None = "answer:contains:done"
    grades: Sequence[tuple[str, float, bool]] = (("answer:contains:done", 1.0, True),)
    start: float = 0.0  # seconds after T0
    agent_options: dict[str, Any] = field(default_factory=dict)
    evidence: Sequence[tuple[str, str]] = (("final_url", '"http://site.test/done"'),)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def session_events(spec: SessionSpec, sha: str) -> list[E.Event]:
    """The events of one synthetic session, in the order the recorder would append them."""
    agent = make_agent("uitars", **spec.agent_options)
    ids = {"run_id": spec.run_id, "session_id": spec.session_id}
    t = spec.start
    task = E.Task(
        task_id=spec.task_id,
        prompt=f"Do {spec.task_id}",
        start_url="http://site.test/start",
        grader=spec.grader,
    )
    events: list[E.Event] = [
        E.SessionStarted(
            at=at(t), **ids, task=task, agent="uitars", model="synthetic", viewport=SIZE
        )
    ]
    for number, step in enumerate(spec.steps, 1):
        t += 1
        events.append(
            E.ScreenshotTaken(
                at=at(t),
                **ids,
                step=number,
                sha256=sha,
                width=SIZE[0],
                height=SIZE[1],
                url=step.url,
            )
        )
        attempt = 1
        if step.failed_first is not None:
            call = f"{spec.session_id}-{number}-0"
            events.append(
                E.ModelCalled(
                    at=at(t + 0.1), **ids, step=number, call_id=call, response=step.failed_first
                )
            )
            events.append(
                E.ActionParsed(
                    at=at(t + 0.2),
                    **ids,
                    step=number,
                    call_id=call,
                    parser="uitars",
                    error="could not parse",
                )
            )
            attempt = 2
        response = agent.render(step.thought, step.actions, SIZE)
        parsed = agent.parse(response, SIZE)
        call = f"{spec.session_id}-{number}-1"
        events.append(
            E.ModelCalled(
                at=at(t + 0.3),
                **ids,
                step=number,
                call_id=call,
                attempt=attempt,
                purpose="step" if attempt == 1 else "resample",
                response=response,
                finish_reason="stop",
                latency_ms=12.0,
            )
        )
        if step.recorded_error is not None:
            events.append(
                E.ActionParsed(
                    at=at(t + 0.4),
                    **ids,
                    step=number,
                    call_id=call,
                    parser="uitars",
                    error=step.recorded_error,
                )
            )
            continue
        actions = tuple(step.recorded_actions or parsed.actions)
        events.append(
            E.ActionParsed(
                at=at(t + 0.4),
                **ids,
                step=number,
                call_id=call,
                parser="uitars",
                thought=parsed.thought,
                actions=actions,
                model_size=parsed.model_size,
            )
        )
        index = 0
        for action_idx, action in enumerate(actions):
            for op in agent.translate(action):
                events.append(
                    E.BrowserActed(
                        at=at(t + 0.5 + index / 100),
                        **ids,
                        step=number,
                        idx=index,
                        action_idx=action_idx,
                        op=op,
                        ok=step.op_error is None,
                        error=step.op_error,
                        url_before=step.url,
                        url_after=step.url,
                        element=E.Element(tag="button", id="go", name="Go", role="button"),
                    )
                )
                index += 1
    t += 1
    for name, value in spec.evidence:
        events.append(E.EvidenceCaptured(at=at(t), **ids, name=name, value_json=value))
    events.append(
        E.SessionEnded(
            at=at(t),
            **ids,
            status=spec.status,  # type: ignore[arg-type]
            answer=spec.answer,
            steps=len(spec.steps),
            seconds=t - spec.start,
        )
    )
    for offset, (grader, score, passed) in enumerate(spec.grades):
        events.append(
            E.SessionGraded(
                at=at(t + 0.1 + offset / 10),
                **ids,
                grader=grader,
                score=score,
                passed=passed,
                source="record",
            )
        )
    return events


def write_sessions(store: Store, *specs: SessionSpec) -> None:
    """Each session in its own stream (named by its id), and a RunStarted per run."""
    sha = store.put_blob(b"synthetic screenshot")
    runs: dict[str, SessionSpec] = {}
    for spec in specs:
        runs.setdefault(spec.run_id, spec)
    for run_id, first in runs.items():
        settings = make_agent("uitars", **first.agent_options).options()
        with store.stream(f"run-{run_id}") as stream:
            stream.append(
                [
                    E.RunStarted(
                        at=at(first.start - 0.5),
                        run_id=run_id,
                        agent="uitars",
                        agent_settings=settings,
                    )
                ]
            )
    for spec in specs:
        with store.stream(spec.session_id) as stream:
            stream.append(session_events(spec, sha))


def click(x: float = 640, y: float = 400) -> E.Click:
    return E.Click(x=x, y=y)


def scroll(direction: str = "down") -> E.Scroll:
    return E.Scroll(direction=direction, x=300, y=400)  # type: ignore[arg-type]


def drag() -> E.Drag:
    return E.Drag(x=100, y=100, x2=300, y2=100)


def finish(answer: str = "done") -> E.Finish:
    return E.Finish(answer=answer)
