"""Synthetic sessions for the viewer tests, appended through the store API: a hostile one (script
in the thought, the page title, the URL, the typed text, the element, the answer, the DOM), a
replay of it with fidelity per step, and one with a drag, a scroll and a double click."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from PIL import Image, ImageDraw

from ownloop.store import Store
from ownloop.store import events as E

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SIZE = (1280, 800)
HOSTILE_THOUGHT = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
HOSTILE_TITLE = "<script>window.pwned=4</script>Title"
HOSTILE_TYPED = "<script>window.pwned=7</script>"
HOSTILE_ELEMENT = "<img src=x onerror=window.pwned=8>"
HOSTILE_ANSWER = "</td><script>window.pwned=6</script>"
HOSTILE_DOM = "<html><body><script>window.pwned=5</script>dom</body></html>"
HOSTILE_RUNG = '"><img src=x onerror="window.pwned=9">'  # a rung no replay writes: shown as text
# the replay's steps by rung: (the step's rung, its operations by rung)
REPLAY_RUNGS = (
    ("exact", {"exact_ops": 1}),
    ("failed", {"failed_ops": 1}),
    (HOSTILE_RUNG, {"retargeted_ops": 1}),
)


class ViewStore(NamedTuple):
    """The store the viewer tests read, and the ids of its synthetic sessions."""

    store: Store
    root: Path
    hostile: str  # a session full of hostile text
    replay: str  # a replay of ``hostile`` with fidelity per step
    gestures: str  # a session with a drag, a scroll and a double click


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def png(colour: tuple[int, int, int], size: tuple[int, int] = SIZE) -> bytes:
    """A screenshot-sized PNG of one colour with a grid, so markers have something to sit on."""
    image = Image.new("RGB", size, colour)
    draw = ImageDraw.Draw(image)
    for x in range(0, size[0], 100):
        draw.line((x, 0, x, size[1]), fill=(200, 200, 200))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _step(
    ids: dict[str, str],
    number: int,
    sha: str,
    t: float,
    thought: str,
    actions: tuple[E.Action, ...],
    ops: tuple[E.Op, ...],
    url: str,
    element: E.Element | None = None,
    op_error: str | None = None,
) -> list[E.Event]:
    call = f"{ids['session_id']}-{number}"
    events: list[E.Event] = [
        E.ScreenshotTaken(
            at=at(t), **ids, step=number, sha256=sha, width=SIZE[0], height=SIZE[1], url=url
        ),
        E.ModelCalled(
            at=at(t + 0.1),
            **ids,
            step=number,
            call_id=call,
            response=f"Thought: {thought}\nAction: ...",
            latency_ms=250.0 + number,
            prompt_tokens=1200,
            completion_tokens=30,
            finish_reason="stop",
        ),
        E.ActionParsed(
            at=at(t + 0.2),
            **ids,
            step=number,
            call_id=call,
            parser="uitars",
            thought=thought,
            actions=actions,
        ),
    ]
    for idx, op in enumerate(ops):
        events.append(
            E.BrowserActed(
                at=at(t + 0.3 + idx / 100),
                **ids,
                step=number,
                idx=idx,
                op=op,
                ok=op_error is None,
                error=op_error,
                url_before=url,
                url_after=url + "#after",
                element=element,
            )
        )
    return events


def _session(
    store: Store,
    session_id: str,
    task_id: str,
    steps: list[list[E.Event]],
    t: float,
    *,
    parent: str | None = None,
    answer: str | None = "done",
    evidence: tuple[E.EvidenceCaptured, ...] = (),
    passed: bool = True,
) -> None:
    ids = {"run_id": "synthetic", "session_id": session_id}
    task = E.Task(
        task_id=task_id, prompt=f"Do {task_id} <b>now</b>", start_url="http://site.test/start"
    )
    events: list[E.Event] = [
        E.SessionStarted(
            at=at(t),
            **ids,
            task=task,
            agent="synthetic-agent",
            model="synthetic-model",
            viewport=SIZE,
            parent_session_id=parent,
            replay_mode="ops" if parent else None,
        )
    ]
    for step in steps:
        events.extend(step)
    events.extend(evidence)
    events.append(
        E.SessionEnded(
            at=at(t + 50), **ids, status="finished", answer=answer, steps=len(steps), seconds=50.0
        )
    )
    events.append(
        E.SessionGraded(
            at=at(t + 51),
            **ids,
            grader="answer:contains:done",
            score=1.0 if passed else 0.0,
            passed=passed,
            details=HOSTILE_ELEMENT,
        )
    )
    with store.stream() as stream:
        stream.append(events)


def append_synthetic(store: Store) -> tuple[str, str, str]:
    """Append the hostile session, its replay and the gestures session; returns their ids."""
    shot_a, shot_b = store.put_blob(png((240, 240, 250))), store.put_blob(png((250, 240, 230)))
    dom = store.put_blob(HOSTILE_DOM.encode())

    def ids(session_id: str) -> dict[str, str]:
        return {"run_id": "synthetic", "session_id": session_id}

    hostile, replay, gestures = "hostile0001", "replay00001", "gestures001"
    bad_url = 'http://site.test/"><script>window.pwned=3</script>'
    element = E.Element(tag="button", id="go", name=HOSTILE_ELEMENT, role="button")

    def hostile_steps(session_id: str) -> list[list[E.Event]]:
        return [
            _step(
                ids(session_id),
                1,
                shot_a,
                1,
                HOSTILE_THOUGHT,
                (E.Click(x=321.5, y=123.25),),
                (E.MouseClick(x=321.5, y=123.25),),
                bad_url,
                element,
            ),
            _step(
                ids(session_id),
                2,
                shot_b,
                3,
                "I type.",
                (E.TypeText(text=HOSTILE_TYPED),),
                (E.KeyboardType(text=HOSTILE_TYPED),),
                bad_url,
                op_error=HOSTILE_ELEMENT,
            ),
            _step(
                ids(session_id),
                3,
                shot_a,
                5,
                "Done.",
                (E.Finish(answer=HOSTILE_ANSWER),),
                (),
                bad_url,
            ),
        ]

    evidence = (
        E.EvidenceCaptured(
            at=at(40), **ids(hostile), name="title", value_json=json.dumps(HOSTILE_TITLE)
        ),
        E.EvidenceCaptured(
            at=at(40), **ids(hostile), name="dom", sha256=dom, media_type="text/html"
        ),
    )
    _session(
        store,
        hostile,
        "hostile-task",
        hostile_steps(hostile),
        0,
        answer=HOSTILE_ANSWER,
        evidence=evidence,
        passed=False,
    )
    replay_steps = hostile_steps(replay)
    for number, (step, (rung, ops)) in enumerate(zip(replay_steps, REPLAY_RUNGS, strict=True), 1):
        step.append(
            E.FidelityMeasured(
                at=at(2 * number + 0.5),
                **ids(replay),
                step=number,
                parent_session_id=hostile,
                screenshot_identical=number != 2,
                pixel_diff=0.0 if number != 2 else 0.25,
                url_equal=True,
                element_equal=True,
                diverged=number == 2,
                rung=rung,
                **ops,
            )
        )
    _session(store, replay, "hostile-task", replay_steps, 100, parent=hostile)
    _session(
        store,
        gestures,
        "gestures-task",
        [
            _step(
                ids(gestures),
                1,
                shot_a,
                201,
                "Drag it.",
                (E.Drag(x=100.0, y=200.0, x2=600.0, y2=420.0),),
                (
                    E.MouseMove(x=100.0, y=200.0),
                    E.MouseDown(),
                    E.MouseMove(x=600.0, y=420.0),
                    E.MouseUp(),
                ),
                "http://site.test/g",
            ),
            _step(
                ids(gestures),
                2,
                shot_b,
                203,
                "Scroll down.",
                (E.Scroll(direction="down", amount=5, x=640.0, y=400.0),),
                (E.MouseMove(x=640.0, y=400.0), E.MouseWheel(dy=500.0)),
                "http://site.test/g",
            ),
            _step(
                ids(gestures),
                3,
                shot_a,
                205,
                "Open it.",
                (E.Click(x=900.0, y=700.0, count=2),),
                (E.MouseClick(x=900.0, y=700.0, click_count=2),),
                "http://site.test/g",
            ),
        ],
        200,
    )
    return hostile, replay, gestures
