"""Synthetic sessions for the viewer tests, appended through the store API: a hostile one (script
in the thought, the page title, the URL, the typed text, the element, the answer, the DOM), a
replay of it with fidelity per step, and one with a drag, a scroll and a double click."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import NamedTuple

from PIL import Image, ImageDraw

from ownloop.store import Store
from ownloop.store import events as E
from ownloop.testing.synthetic import SIZE, Evidence, Grade, Session, Step, at, write_sessions

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
    number: int,
    sha: str,
    t: float,
    thought: str,
    actions: tuple[E.Action, ...],
    ops: tuple[E.Op, ...],
    url: str,
    element: E.Element | None = None,
    op_error: str | None = None,
) -> Step:
    return Step(
        actions=actions,
        thought=thought,
        ops=ops,
        url=url,
        url_after=url + "#after",
        sha256=sha,
        at=t,
        latency_ms=250.0 + number,
        prompt_tokens=1200,
        completion_tokens=30,
        element=element,
        op_error=op_error,
    )


def _session(
    store: Store,
    session_id: str,
    task_id: str,
    steps: list[Step],
    t: float,
    *,
    parent: str | None = None,
    answer: str | None = "done",
    evidence: tuple[Evidence, ...] = (),
    passed: bool = True,
) -> None:
    task = E.Task(
        task_id=task_id, prompt=f"Do {task_id} <b>now</b>", start_url="http://site.test/start"
    )
    grade = Grade("answer:contains:done", 1.0 if passed else 0.0, passed, details=HOSTILE_ELEMENT)
    session = Session(
        session_id,
        steps,
        run_id="synthetic",
        task=task,
        agent="synthetic-agent",
        model="synthetic-model",
        parent_session_id=parent,
        replay_mode="ops" if parent else None,
        answer=answer,
        evidence=evidence,
        grades=(grade,),
        start=t,
        end=50.0,
        call_ids="{session}-{step}",
    )
    write_sessions(store, session, run_started=False)


def append_synthetic(store: Store) -> tuple[str, str, str]:
    """Append the hostile session, its replay and the gestures session; returns their ids."""
    shot_a, shot_b = store.put_blob(png((240, 240, 250))), store.put_blob(png((250, 240, 230)))
    dom = store.put_blob(HOSTILE_DOM.encode())

    def ids(session_id: str) -> dict[str, str]:
        return {"run_id": "synthetic", "session_id": session_id}

    hostile, replay, gestures = "hostile0001", "replay00001", "gestures001"
    bad_url = 'http://site.test/"><script>window.pwned=3</script>'
    element = E.Element(tag="button", id="go", name=HOSTILE_ELEMENT, role="button")

    def hostile_steps() -> list[Step]:
        return [
            _step(
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
        Evidence("title", json.dumps(HOSTILE_TITLE)),
        Evidence("dom", sha256=dom, media_type="text/html"),
    )
    _session(
        store,
        hostile,
        "hostile-task",
        hostile_steps(),
        0,
        answer=HOSTILE_ANSWER,
        evidence=evidence,
        passed=False,
    )
    replay_steps = hostile_steps()
    for number, (step, (rung, ops)) in enumerate(zip(replay_steps, REPLAY_RUNGS, strict=True), 1):
        step.after = (
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
            ),
        )
    _session(store, replay, "hostile-task", replay_steps, 100, parent=hostile)
    _session(
        store,
        gestures,
        "gestures-task",
        [
            _step(
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
                2,
                shot_b,
                203,
                "Scroll down.",
                (E.Scroll(direction="down", amount=5, x=640.0, y=400.0),),
                (E.MouseMove(x=640.0, y=400.0), E.MouseWheel(dy=500.0)),
                "http://site.test/g",
            ),
            _step(
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
