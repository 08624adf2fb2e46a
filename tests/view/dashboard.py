"""A store for the dashboard tests, written through the store API: two runs of the same four
tasks with three repeats each, where one task flips between the runs and another's repeats
disagree, one thought with a word said nowhere else, hostile text in searchable places, and
screenshots whose content sits in a known box on a white page."""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, TypedDict

from PIL import Image, ImageDraw

from ownloop.store import Store
from ownloop.store import events as E

T0 = datetime(2026, 4, 1, 9, 0, 0, tzinfo=UTC)
SIZE = (1280, 800)
CONTENT = (200, 150, 600, 400)  # the non-white box of every screenshot (left, top, right, bottom)
RARE_WORD = "quokkaflux"
HOSTILE_SEARCH = '<script>window.pwned=11</script><img src=x onerror="window.pwned=12">'
HOSTILE_RUN = "<b>run</b>"
TASKS = ("t-flip", "t-mixed", "t-pass", "t-fail")
# passes per repeat: run A, run B
OUTCOMES = {
    "t-flip": ((True, True, True), (False, False, True)),
    "t-mixed": ((True, False, True), (True, True, True)),
    "t-pass": ((True, True, True), (True, True, True)),
    "t-fail": ((False, False, False), (False, False, False)),
}


class DashboardStore(NamedTuple):
    store: Store
    run_a: str
    run_b: str
    rare_session: str  # the session whose step 2 thought has RARE_WORD
    flip_pair: tuple[str, str]  # the representative sessions of t-flip (A's pass, B's fail)


class Ids(TypedDict):
    """The ids every event of a session carries, to pass as ``**ids``."""

    run_id: str
    session_id: str


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def page_png(shade: int) -> bytes:
    """A white 1280x800 page with content only inside CONTENT."""
    image = Image.new("RGB", SIZE, (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.rectangle(CONTENT, fill=(shade, 120, 200), outline=(0, 0, 0))
    draw.text((CONTENT[0] + 20, CONTENT[1] + 20), f"content {shade}", fill=(0, 0, 0))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _session(
    store: Store,
    run_id: str,
    session_id: str,
    task: str,
    repeat: int,
    passed: bool,
    t: float,
    shots: list[str],
    thoughts: list[str],
    hits: list[str],
) -> None:
    ids: Ids = {"run_id": run_id, "session_id": session_id}
    events: list[E.Event] = [
        E.SessionStarted(
            at=at(t),
            **ids,
            agent="uitars",
            model="m1",
            repeat=repeat,
            budget=10,
            task=E.Task(task_id=task, prompt=f"Do {task}", start_url="http://site.test/"),
            viewport=SIZE,
        )
    ]
    for number, (sha, thought, hit) in enumerate(zip(shots, thoughts, hits, strict=True), 1):
        step_t = t + number
        call = f"{session_id}-c{number}"
        events += [
            E.ScreenshotTaken(
                at=at(step_t),
                **ids,
                step=number,
                sha256=sha,
                width=SIZE[0],
                height=SIZE[1],
                url=f"http://site.test/{task}/{number}",
            ),
            E.ModelCalled(
                at=at(step_t + 0.1),
                **ids,
                step=number,
                call_id=call,
                response=f"Thought: {thought}\nAction: click",
                latency_ms=200.0 + number,
                prompt_tokens=1000 + number,
                completion_tokens=20,
            ),
            E.ActionParsed(
                at=at(step_t + 0.2),
                **ids,
                step=number,
                call_id=call,
                parser="uitars",
                thought=thought,
                actions=(E.Click(x=300.0, y=200.0 + number),),
            ),
            E.BrowserActed(
                at=at(step_t + 0.3),
                **ids,
                step=number,
                idx=0,
                op=E.MouseClick(x=300.0, y=200.0 + number),
                duration_ms=30.0 + number,
                url_before="http://site.test/",
                url_after="http://site.test/",
                element=E.Element(tag="button", id=hit, name=hit.upper(), role="button"),
            ),
        ]
    end = t + len(shots) + 1
    events += [
        E.SessionEnded(
            at=at(end),
            **ids,
            status="finished",
            steps=len(shots),
            seconds=float(len(shots)),
            answer="ok" if passed else "no",
        ),
        E.SessionGraded(
            at=at(end + 0.1), **ids, grader="answer", score=float(passed), passed=passed
        ),
        E.SessionCounted(
            at=at(end + 0.2), **ids, task_id=task, repeat=repeat, counted=True, winner=session_id
        ),
    ]
    with store.stream(session_id) as stream:
        stream.append(events)


def build_dashboard_store(store: Store) -> DashboardStore:
    """Append both runs to ``store``."""
    shots = [store.put_blob(page_png(shade)) for shade in (40, 90, 140)]
    run_a, run_b = "base-run", HOSTILE_RUN
    rare = ""
    flip_pair = ["", ""]
    t = 0.0
    for run_index, run_id in enumerate((run_a, run_b)):
        with store.stream(f"run-{run_index}") as stream:
            stream.append(
                [
                    E.RunStarted(
                        at=at(t),
                        run_id=run_id,
                        session_id="",
                        agent="uitars",
                        model="m1",
                        suite="test:four",
                        max_steps=10,
                    )
                ]
            )
        for task in TASKS:
            for repeat, passed in enumerate(OUTCOMES[task][run_index], 1):
                session_id = f"{'ab'[run_index]}-{task}-{repeat}"
                thoughts = ["I look.", "I click the button.", "Done."]
                hits = ["ok", "ok", "ok"] if passed else ["ok", "cancel", "ok"]
                if (run_index, task, repeat) == (0, "t-pass", 2):
                    thoughts[1] = f"The {RARE_WORD} is here."
                    rare = session_id
                if (run_index, task, repeat) == (1, "t-fail", 1):
                    thoughts[0] = HOSTILE_SEARCH
                if task == "t-flip" and repeat == 1:
                    flip_pair[run_index] = session_id
                t += 10
                _session(store, run_id, session_id, task, repeat, passed, t, shots, thoughts, hits)
    return DashboardStore(store, run_a, run_b, rare, (flip_pair[0], flip_pair[1]))


def wait_until(page: Any, expression: str, timeout: float = 10.0) -> Any:
    """Poll a JavaScript expression until it is truthy; returns its value.

    ``page.wait_for_function`` evaluates its text with ``eval`` inside the page while it polls,
    which the viewer's Content-Security-Policy forbids; ``page.evaluate`` is not subject to it.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = page.evaluate(expression)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {expression}")
        time.sleep(0.05)
