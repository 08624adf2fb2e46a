"""Store fixtures: a fresh store in tmp_path, and small factories of realistic events."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ownloop.store import Store, open_store
from ownloop.store import events as E

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """A fixed UTC time ``seconds`` after T0, so tests control the order of events."""
    return T0 + timedelta(seconds=seconds)


def step_events(
    run_id: str, session_id: str, step: int, sha256: str, t: float, hit: str = "ok"
) -> list[E.Event]:
    """What a recorder appends for one step: screenshot, model call, parse, two operations
    (the click lands on the button whose id is ``hit``)."""
    return [
        E.ScreenshotTaken(
            at=at(t),
            run_id=run_id,
            session_id=session_id,
            step=step,
            sha256=sha256,
            width=1280,
            height=800,
            url=f"http://x/{step}",
        ),
        E.ModelCalled(
            at=at(t + 0.1),
            run_id=run_id,
            session_id=session_id,
            step=step,
            call_id=f"{session_id}-c{step}",
            response=f"click {step}",
            latency_ms=100.0 + step,
            prompt_tokens=1000,
            completion_tokens=10,
            sampling=E.Sampling(temperature=0.0),
        ),
        E.ActionParsed(
            at=at(t + 0.2),
            run_id=run_id,
            session_id=session_id,
            step=step,
            call_id=f"{session_id}-c{step}",
            parser="test",
            actions=(E.Click(x=10.0 * step, y=20.0, model_x=1.0, model_y=2.0),),
        ),
        E.BrowserActed(
            at=at(t + 0.3),
            run_id=run_id,
            session_id=session_id,
            step=step,
            idx=0,
            op=E.MouseMove(x=10.0 * step, y=20.0),
        ),
        E.BrowserActed(
            at=at(t + 0.4),
            run_id=run_id,
            session_id=session_id,
            step=step,
            idx=1,
            op=E.MouseClick(x=10.0 * step, y=20.0),
            element=E.Element(
                tag="button", role="button", name=hit.upper(), id=hit, css_path="body > button"
            ),
        ),
    ]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty store; fsync is off because these tests are not about power loss."""
    return open_store(tmp_path / "store", fsync=False)


@pytest.fixture
def record_session(store: Store) -> Callable[..., str]:
    """Record one whole session in a stream named after it (as a recorder does), after its
    run's RunStarted (in a stream of the run's own, once per run): returns its session id."""
    return session_recorder(store)


def session_recorder(store: Store) -> Callable[..., str]:
    """``record_session`` for any store (e.g. one a module-scoped fixture builds)."""
    started: set[str] = set()

    def record(
        session_id: str,
        *,
        run_id: str = "r1",
        steps: int = 2,
        t: float = 0.0,
        status: str | None = "finished",
        score: float | None = 1.0,
        agent: str = "uitars",
        png: bytes = b"\x89PNG fake",
        task: str | None = None,
        repeat: int = 1,
        counted: bool | None = None,
        hits: Sequence[str] | None = None,
    ) -> str:
        sha = store.put_blob(png + session_id.encode())
        task_id = task or f"task-{session_id}"
        events: list[E.Event] = [
            E.SessionStarted(
                at=at(t),
                run_id=run_id,
                session_id=session_id,
                agent=agent,
                model="m1",
                repeat=repeat,
                task=E.Task(task_id=task_id, prompt="do it", start_url="http://x/"),
            )
        ]
        hits = hits or ["ok"] * steps  # the element each step's click hits
        steps = len(hits)
        for step, hit in enumerate(hits, start=1):
            events += step_events(run_id, session_id, step, sha, t + step, hit)
        if status is not None:
            events.append(
                E.SessionEnded(
                    at=at(t + steps + 1),
                    run_id=run_id,
                    session_id=session_id,
                    status=status,  # type: ignore[arg-type]
                    steps=steps,
                    seconds=steps + 1.0,
                    answer="42",
                )
            )
        if score is not None:
            events.append(
                E.SessionGraded(
                    at=at(t + steps + 2),
                    run_id=run_id,
                    session_id=session_id,
                    grader="answer",
                    score=score,
                    passed=score >= 1.0,
                )
            )
        if counted is not None:  # the ledger's verdict, as the runner appends it
            events.append(
                E.SessionCounted(
                    at=at(t + steps + 3),
                    run_id=run_id,
                    session_id=session_id,
                    task_id=task_id,
                    repeat=repeat,
                    counted=counted,
                )
            )
        if run_id not in started:
            started.add(run_id)
            with store.stream(f"run-{run_id}") as stream:
                stream.append([E.RunStarted(at=at(t - 1), run_id=run_id, agent=agent)])
        with store.stream(session_id) as stream:
            stream.append(events)
        return session_id

    return record
