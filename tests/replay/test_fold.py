"""Folding hand-built events into sessions: steps, re-samples, replays, late ends and grades."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from ownloop.replay import NoSessionEvents, Session, Step, fold, fold_many
from ownloop.store.events import (
    ActionParsed,
    BrowserActed,
    Click,
    Element,
    Event,
    EvidenceCaptured,
    FidelityMeasured,
    Finish,
    KeyboardType,
    ModelCalled,
    MouseClick,
    MouseMove,
    RunEnded,
    RunStarted,
    ScreenshotTaken,
    SessionEnded,
    SessionGraded,
    SessionStarted,
    Task,
    TypeText,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TASK = Task(task_id="click-button-7", prompt="Click OK", start_url="http://h/click", seed=7)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _session_events(sid: str = "s1", run: str = "r1", start: float = 0.0) -> dict[str, Event]:
    """Every event of a two-step session, by a short name."""
    t = start
    return {
        "start": SessionStarted(
            at=at(t),
            run_id=run,
            session_id=sid,
            task=TASK,
            agent="uitars",
            model="uitars15-7b",
            viewport=(1280, 800),
        ),
        "shot1": ScreenshotTaken(at=at(t + 1), run_id=run, session_id=sid, step=1, sha256="a" * 64),
        "call1": ModelCalled(
            at=at(t + 2), run_id=run, session_id=sid, step=1, call_id="c1", response="garbage"
        ),
        "parse1": ActionParsed(
            at=at(t + 3),
            run_id=run,
            session_id=sid,
            step=1,
            call_id="c1",
            parser="uitars",
            error="no Action: line",
        ),
        "call1b": ModelCalled(
            at=at(t + 4),
            run_id=run,
            session_id=sid,
            step=1,
            call_id="c2",
            attempt=2,
            purpose="resample",
            response="Action: click(start_box='(10,20)')",
        ),
        "parse1b": ActionParsed(
            at=at(t + 5),
            run_id=run,
            session_id=sid,
            step=1,
            call_id="c2",
            parser="uitars",
            thought="press it",
            actions=(Click(x=10, y=20), TypeText(text="hi")),
        ),
        "op1a": BrowserActed(
            at=at(t + 6),
            run_id=run,
            session_id=sid,
            step=1,
            idx=0,
            op=MouseClick(x=10, y=20),
            element=Element(tag="button", name="OK"),
            url_before="http://h/click",
            url_after="http://h/click",
        ),
        "op1b": BrowserActed(
            at=at(t + 7),
            run_id=run,
            session_id=sid,
            step=1,
            idx=1,
            action_idx=1,
            op=KeyboardType(text="hi"),
        ),
        "shot2": ScreenshotTaken(at=at(t + 8), run_id=run, session_id=sid, step=2, sha256="b" * 64),
        "call2": ModelCalled(
            at=at(t + 9),
            run_id=run,
            session_id=sid,
            step=2,
            call_id="c3",
            response="Action: finished(content='ok')",
        ),
        "parse2": ActionParsed(
            at=at(t + 10),
            run_id=run,
            session_id=sid,
            step=2,
            call_id="c3",
            parser="uitars",
            actions=(Finish(answer="ok"),),
        ),
        "url": EvidenceCaptured(
            at=at(t + 11), run_id=run, session_id=sid, name="final_url", value_json='"http://h/x"'
        ),
        "reward": EvidenceCaptured(
            at=at(t + 11),
            run_id=run,
            session_id=sid,
            name="miniwob_reward",
            value_json='{"reward":0.9,"raw_reward":1,"done":true,"reason":null}',
        ),
        "end": SessionEnded(
            at=at(t + 12), run_id=run, session_id=sid, status="finished", answer="ok", steps=2
        ),
        "graded": SessionGraded(
            at=at(t + 13),
            run_id=run,
            session_id=sid,
            grader="miniwob",
            grader_version="1",
            score=1.0,
            passed=True,
            details="raw reward 1 > 0",
        ),
    }


E = _session_events()
OTHER = _session_events("s2", start=0.5)  # another session, interleaved in time
REGRADE = SessionGraded(
    at=at(500),
    run_id="regrade1",
    session_id="s1",
    grader="answer:exact:OK",
    grader_version="1",
    score=0.0,
    passed=False,
    details="answer 'ok' does not equal 'OK'",
    source="regrade",
)

EXPECTED = Session(
    session_id="s1", run_id="r1", task=TASK, agent="uitars", model="uitars15-7b", attempt=1,
    viewport=(1280, 800), started_at=at(0),
    steps=(
        Step(
            step=1, screenshot=E["shot1"], calls=(E["call1"], E["call1b"]), parsed=E["parse1b"],
            parses=(E["parse1"], E["parse1b"]), effects=(E["op1a"], E["op1b"]),
        ),
        Step(
            step=2, screenshot=E["shot2"], calls=(E["call2"],), parsed=E["parse2"],
            parses=(E["parse2"],),
        ),
    ),
    outcome=E["end"], evidence=(E["url"], E["reward"]), grades=(E["graded"], REGRADE),
)  # fmt: skip


def _interleaved() -> list[Event]:
    run = RunStarted(at=at(-1), run_id="r1", agent="uitars")
    merged = sorted([*E.values(), *OTHER.values()], key=lambda event: event.at)
    return [run, *merged, REGRADE, RunEnded(at=at(600), run_id="r1")]


def test_fold_one_session_among_others() -> None:
    session = fold(_interleaved(), "s1")
    assert session == EXPECTED
    assert fold(_interleaved()) == EXPECTED  # the first session mentioned is the default


def test_helpers() -> None:
    assert EXPECTED.latest_grade == REGRADE
    assert EXPECTED.answer == "ok"
    assert EXPECTED.status == "finished"
    assert EXPECTED.task_id == "click-button-7"
    assert EXPECTED.steps[0].actions == (Click(x=10, y=20), TypeText(text="hi"))
    assert EXPECTED.steps[0].thought == "press it"
    assert EXPECTED.steps[0].response == "Action: click(start_box='(10,20)')"
    assert EXPECTED.first_divergence is None
    assert EXPECTED.summary_line() == (
        "s1  click-button-7  finished  2 steps  fail 0.00 (answer:exact:OK)  answer='ok'"
    )


@pytest.mark.parametrize("seed", range(6))
def test_steps_arriving_out_of_order(seed: int) -> None:
    # steps, calls, parses and operations in any order: each lands where the recorder made it
    events = list(E.values())[1:]
    random.Random(seed).shuffle(events)
    session = fold([E["start"], *events])
    assert session.steps == EXPECTED.steps
    assert session.steps[0].parsed == E["parse1b"]  # the accepted parse, not the last to arrive


def test_replay_child_with_fidelity() -> None:
    start = msgspec.structs.replace(
        E["start"], session_id="s3", run_id="r2", parent_session_id="s1", replay_mode="ops",
        attempt=1,
    )  # fmt: skip
    shot1 = msgspec.structs.replace(E["shot1"], session_id="s3", run_id="r2")
    same = FidelityMeasured(
        at=at(2), run_id="r2", session_id="s3", step=1, parent_session_id="s1",
        screenshot_identical=True, url_equal=True, element_equal=True,
    )  # fmt: skip
    op = BrowserActed(at=at(3), run_id="r2", session_id="s3", step=2, idx=0, op=MouseMove(x=1, y=2))
    differs = FidelityMeasured(
        at=at(4), run_id="r2", session_id="s3", step=2, parent_session_id="s1", pixel_diff=0.02,
        url_equal=True, diverged=True,
    )  # fmt: skip
    session = fold([start, shot1, same, op, differs])
    assert session == Session(
        session_id="s3", run_id="r2", task=TASK, agent="uitars", model="uitars15-7b",
        parent_session_id="s1", replay_mode="ops", viewport=(1280, 800), started_at=at(0),
        steps=(
            Step(step=1, screenshot=shot1, fidelity=same),
            Step(step=2, effects=(op,), fidelity=differs),
        ),
    )  # fmt: skip
    assert session.first_divergence == 2
    assert session.status == "unfinished"
    assert (
        session.summary_line()
        == "s3  click-button-7  unfinished  2 steps  ungraded  replay ops of s1"
    )


def test_fork_child_summary() -> None:
    start = msgspec.structs.replace(
        E["start"], session_id="s5", parent_session_id="s1", replay_mode="fork", fork_step=2
    )
    end = msgspec.structs.replace(E["end"], session_id="s5", answer=None, status="max_steps")
    assert fold([start, end]).summary_line() == (
        "s5  click-button-7  max_steps  0 steps  ungraded  replay fork of s1 from step 2"
    )


def test_crashed_end_from_another_stream_counts() -> None:
    interrupted = msgspec.structs.replace(E["end"], status="interrupted", answer=None)
    crashed = SessionEnded(at=at(900), run_id="r1-resume", session_id="s1", status="crashed")
    session = fold([E["start"], E["shot1"], interrupted, crashed])
    assert session.outcome == crashed
    assert (session.status, session.answer) == ("crashed", None)


def test_session_without_its_start() -> None:
    session = fold([E["shot2"], E["end"]])
    assert session == Session(
        session_id="s1", run_id="r1", steps=(Step(step=2, screenshot=E["shot2"]),), outcome=E["end"]
    )
    assert session.summary_line() == "s1  ?  finished  1 steps  ungraded  answer='ok'"


def test_fold_many_in_one_pass() -> None:
    sessions = fold_many(_interleaved())
    assert list(sessions) == ["s1", "s2"]
    assert sessions["s1"] == EXPECTED
    assert sessions["s2"] == fold(_interleaved(), "s2")
    assert sessions["s2"].grades == (OTHER["graded"],)
    assert fold_many([]) == {}
    assert fold_many(iter(_interleaved())) == sessions  # any iterable, read once


def test_no_events() -> None:
    with pytest.raises(NoSessionEvents) as caught:
        fold(_interleaved(), "nope")
    assert str(caught.value) == (
        "no events for session 'nope'. List sessions with: ownloop sql \"select * from sessions\""
    )
    with pytest.raises(NoSessionEvents, match="^no events for any session. "):
        fold([RunStarted(at=at(0), run_id="r1")])


def test_to_json_round_trips() -> None:
    text = EXPECTED.to_json()
    assert msgspec.json.decode(text, type=Session) == EXPECTED
    decoded = msgspec.json.decode(text)
    assert decoded["steps"][0]["effects"][0]["op"] == {"op": "mouse.click", "x": 10.0, "y": 20.0}
    assert decoded["outcome"]["kind"] == "session_ended"
    assert decoded["grades"][1]["source"] == "regrade"


def test_session_is_frozen() -> None:
    with pytest.raises(AttributeError):
        EXPECTED.steps = ()  # type: ignore[misc]


def test_fold_imports_only_the_store() -> None:
    import ast
    import importlib
    from pathlib import Path

    # ownloop.replay.fold is also the function's name, so ask for the module itself
    module = importlib.import_module("ownloop.replay.fold")

    tree = ast.parse(Path(module.__file__).read_text())
    ours = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert {name for name in ours if name.startswith("ownloop")} == {
        "ownloop.errors",
        "ownloop.store.events",
    }
    assert all(hasattr(module, name) for name in module.__all__)
