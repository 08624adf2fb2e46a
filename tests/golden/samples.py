"""One sample of every event kind, with every action and browser-operation kind inside them.

The golden files in this folder were written from these samples once and are never rewritten:
they are the bytes older ownloop versions wrote, and must keep decoding forever. When a new
event, action or op kind is added, give it a sample here and run
``.venv/bin/python -m tests.golden.samples`` to APPEND its golden line (existing lines stay).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import msgspec

from ownloop.store import events as E

__all__ = [
    "ACTIONS",
    "ADDED",
    "LATER",
    "GOLDEN_EVENTS",
    "OPS",
    "SAMPLES",
    "append_golden",
    "journal_v2_events",
    "write_journal_v2",
]

GOLDEN_EVENTS = Path(__file__).with_name("events-v1.jsonl")
_T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
_SHA = "9f" * 32


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


ACTIONS: tuple[E.Action, ...] = (
    E.Click(x=640.0, y=400.5, model_x=1000.0, model_y=500.0, raw="click(start_box='(1000,500)')"),
    E.Click(x=10.0, y=20.0, button="right", count=2),
    E.Move(x=1.0, y=2.0, model_x=3.0, model_y=4.0),
    E.Drag(x=1.0, y=2.0, x2=30.0, y2=40.0, model_x=5.0, model_y=6.0, model_x2=7.0, model_y2=8.0),
    E.Scroll(direction="down", amount=5.0, x=640.0, y=400.0),
    E.Scroll(direction="left", amount=300.0, unit="px"),
    E.TypeText(text="hello\nworld", raw="type(content='hello\\nworld')"),
    E.Hotkey(keys=("ctrl", "shift", "t")),
    E.KeyDown(key="shift"),
    E.KeyUp(key="shift"),
    E.Wait(seconds=2.5),
    E.Goto(url="https://example.test/a?b=1"),
    E.Search(query="ownloop"),
    E.Back(),
    E.Memorize(fact="the price is 42"),
    E.Finish(answer="42"),
    E.Finish(),
    E.CallUser(text="need a password"),
    E.Fail(reason="cannot find the button"),
)

OPS: tuple[E.Op, ...] = (
    E.MouseClick(x=640.0, y=400.0),
    E.MouseClick(x=1.5, y=2.5, button="right", click_count=2),
    E.MouseMove(x=3.0, y=4.0, steps=20),
    E.MouseDown(),
    E.MouseUp(button="middle"),
    E.MouseWheel(dx=0.0, dy=500.0),
    E.KeyboardType(text="héllo"),
    E.KeyboardPress(key="Control+a"),
    E.KeyboardDown(key="Shift"),
    E.KeyboardUp(key="Shift"),
    E.PageGoto(url="https://example.test/"),
    E.PageGoBack(),
    E.Sleep(seconds=5.0),
)

_TASK = E.Task(
    task_id="click-button-42",
    prompt="Click OK",
    start_url="http://127.0.0.1:8312/",
    suite="miniwob",
    seed=42,
    grader="answer:contains:42",
    needs_login=True,
    setup_urls=("http://127.0.0.1:8312/_admin/session-flags?logout=1",),
    capture_urls=("http://127.0.0.1:8312/_admin/record",),
    timeout_s=1800.0,
)
_ELEMENT = E.Element(
    tag="button",
    id="ok",
    role="button",
    name="OK",
    css_path="body > button#ok",
    bbox=(600.0, 380.0, 80.0, 40.0),
    frame="",
)

SAMPLES: tuple[E.EventBase, ...] = (
    E.RunStarted(
        at=_at(0),
        run_id="r1",
        argv=("ownloop", "record", "uitars"),
        agent="uitars",
        agent_settings={
            "history_images": 5,
            "frequency_penalty": 0.0,
            "resample": True,
            "note": None,
            "mode": "qwen25vl",
        },
        model="uitars15-7b",
        endpoint="http://127.0.0.1:8000/v1",
        sampling=E.Sampling(temperature=0.0, top_p=0.9, max_tokens=500, frequency_penalty=0.0),
        viewport=(1280, 800),
        suite="miniwob",
        tasks_sha256="ab" * 32,
        prompt_source="ui-tars",
        versions=E.Versions(
            ownloop="0.1.0",
            git_commit="1797401",
            python="3.11.2",
            playwright="1.45.0",
            chromium="120.0",
            os="Debian 12",
        ),
    ),
    E.SessionStarted(
        at=_at(1),
        run_id="r1",
        session_id="s1",
        task=_TASK,
        agent="uitars",
        model="uitars15-7b",
        attempt=2,
        viewport=(1280, 800),
        parent_session_id="s0",
        replay_mode="ops",
        fork_step=3,
    ),
    E.ScreenshotTaken(
        at=_at(2),
        run_id="r1",
        session_id="s1",
        step=1,
        sha256=_SHA,
        width=1280,
        height=800,
        url="http://127.0.0.1:8312/",
        capture_ms=35.5,
    ),
    E.ModelCalled(
        at=_at(3),
        run_id="r1",
        session_id="s1",
        step=1,
        call_id="c1",
        attempt=2,
        purpose="resample",
        model="uitars15-7b",
        messages=(
            E.Message(role="system", parts=(E.TextPart(text="You are a helpful assistant."),)),
            E.Message(
                role="user",
                parts=(
                    E.TextPart(text="Click OK"),
                    E.ImagePart(sha256=_SHA, width=1280, height=800),
                ),
            ),
            E.Message(role="assistant", parts=(E.TextPart(text="Action: click(...)"),)),
        ),
        sampling=E.Sampling(temperature=1.0, top_p=0.9, max_tokens=500),
        response="Thought: ok\nAction: click(start_box='(1000,500)')",
        finish_reason="stop",
        prompt_tokens=1500,
        completion_tokens=20,
        latency_ms=812.5,
        error=None,
        served_by="cassette:exact",
    ),
    E.ActionParsed(
        at=_at(4),
        run_id="r1",
        session_id="s1",
        step=1,
        call_id="c1",
        parser="ui-tars",
        parser_version="0.5.1",
        thought="ok",
        actions=ACTIONS,
        error=None,
        model_size=(1288, 812),
    ),
    E.ActionParsed(
        at=_at(4.5),
        run_id="r1",
        session_id="s1",
        step=2,
        call_id="c2",
        parser="ui-tars",
        error="no Action: line",
    ),
    *(
        E.BrowserActed(
            at=_at(5 + i),
            run_id="r1",
            session_id="s1",
            step=1,
            idx=i,
            action_idx=i // 2,
            op=op,
            ok=i != 3,
            error="timeout" if i == 3 else None,
            url_before="http://127.0.0.1:8312/",
            url_after="http://127.0.0.1:8312/next",
            element=_ELEMENT if i < 2 else None,
            pages_opened=1 if i == 0 else 0,
            dialog=E.Dialog(type="alert", message="hi", accepted=True) if i == 1 else None,
            download=_SHA if i == 2 else None,
            duration_ms=12.25,
        )
        for i, op in enumerate(OPS)
    ),
    E.EvidenceCaptured(
        at=_at(20),
        run_id="r1",
        session_id="s1",
        name="final_url",
        value_json='"http://127.0.0.1:8312/next"',
        source="page",
    ),
    E.EvidenceCaptured(
        at=_at(21),
        run_id="r1",
        session_id="s1",
        name="dom",
        sha256=_SHA,
        media_type="text/html",
        source="http://127.0.0.1:8312/next",
    ),
    E.SessionEnded(
        at=_at(22),
        run_id="r1",
        session_id="s1",
        status="finished",
        agent_status="finished",
        answer="42",
        steps=3,
        seconds=21.5,
        parse_failures=1,
        action_errors=1,
        error=None,
    ),
    E.SessionGraded(
        at=_at(23),
        run_id="r1",
        session_id="s1",
        grader="answer",
        grader_version="1",
        score=1.0,
        passed=True,
        details="contains 42",
        source="regrade",
    ),
    E.FidelityMeasured(
        at=_at(24),
        run_id="r1",
        session_id="s1",
        step=1,
        parent_session_id="s0",
        screenshot_identical=False,
        pixel_diff=0.0125,
        url_equal=True,
        element_equal=None,
        diverged=True,
    ),
    E.RunEnded(at=_at(25), run_id="r1", counts={"finished": 1, "crashed": 0}, seconds=25.0),
)

ADDED: tuple[E.EventBase, ...] = (
    # Kinds added after journal-v1.jsonl was written (that journal holds exactly SAMPLES).
    E.ActionParsed(
        at=_at(4.25),
        run_id="r1",
        session_id="s1",
        step=1,
        call_id="c1",
        parser="opencua",
        parser_version="1",
        thought="drag it",
        model_size=(1932, 1092),
        actions=(
            E.ButtonDown(
                x=10.0, y=20.0, model_x=10.0, model_y=20.0, raw="pyautogui.mouseDown(10, 20)"
            ),
            E.ButtonUp(button="right"),
            E.Rejected(reason="line 3: import os is not allowed", raw="import os"),
        ),
    ),
    # The ledger (admission, claims, catalog, seal).
    E.TaskClaimed(
        at=_at(2.5),
        run_id="r1",
        session_id="s1",
        task_id="t1",
        repeat=1,
        holder="node-1:4242",
        took_over="node-2:77",
    ),
    E.SessionCounted(
        at=_at(23.5), run_id="r1", session_id="s1", task_id="t1", counted=True, winner="s1"
    ),
    E.StreamsCataloged(
        at=_at(24.5), run_id="r1", heads=(E.StreamHead(stream="s1", events=12, head="0" * 32),)
    ),
    E.RunSealed(
        at=_at(26),
        run_id="r1",
        fingerprint="f" * 64,
        streams=(E.StreamHead(stream="s1", events=12, head="0" * 32),),
        sessions=(
            E.SealedSession(
                session_id="s1",
                task_id="t1",
                status="finished",
                counted=True,
                score=1.0,
                passed=True,
            ),
        ),
        blobs=3,
        budget=40,
    ),
    # A run's endpoint pool: one endpoint taken out after a session failed on it.
    E.EndpointBenched(
        at=_at(23.75), run_id="r1", session_id="s1", endpoint="http://gpu2:8000/v1", seconds=60.0
    ),
    # Guarded replay: the checks, an element's text, and a step's rungs.
    E.GuardChecked(
        at=_at(5.5),
        run_id="r1",
        session_id="s1",
        step=1,
        parent_session_id="s0",
        check="screenshot",
        passed=False,
        distance=0.0625,
        reason="the picture around the target changed (distance 0.063)",
    ),
    E.GuardChecked(
        at=_at(5.75),
        run_id="r1",
        session_id="s1",
        step=1,
        parent_session_id="s0",
        check="element",
        idx=0,
        passed=False,
        reason="button 'OK' at (640, 400): div 'Banner' is there instead",
        recorded=E.Element(
            tag="button",
            role="button",
            name="OK",
            text="OK",
            css_path="body > button#ok",
            bbox=(600.0, 380.0, 80.0, 40.0),
        ),
        found=E.Element(
            tag="button",
            id="ok",
            role="button",
            name="OK",
            text="OK",
            css_path="body > button#ok",
            bbox=(100.0, 80.0, 80.0, 40.0),
        ),
        on_diverge="retarget",
        match="name_role",
        x=140.0,
        y=100.0,
        rung="retargeted",
    ),
    E.FidelityMeasured(
        at=_at(24.25),
        run_id="r1",
        session_id="s1",
        step=2,
        parent_session_id="s0",
        pixel_diff=0.2,
        url_equal=True,
        element_equal=True,
        diverged=True,
        rung="retargeted",
        exact_ops=1,
        same_target_ops=2,
        retargeted_ops=1,
        diverged_ops=0,
        failed_ops=0,
    ),
    # A grade's checks (a network grader over the session's HAR).
    E.SessionGraded(
        at=_at(23.25),
        run_id="r1",
        session_id="s1",
        grader="network:POST:/api/cart:200",
        grader_version="0123456789abcdef",
        score=0.0,
        passed=False,
        details="POST /api/cart status expected 200, got 500",
        source="regrade",
        checks=(
            E.Check(
                name="request",
                passed=True,
                expected="POST /api/cart",
                actual="POST http://127.0.0.1:8312/api/cart",
                actual_normalized="POST /api/cart",
            ),
            E.Check(name="status", expected="200", actual="500", actual_normalized="500"),
        ),
    ),
)

LATER: tuple[E.EventBase, ...] = (
    # Added after journal-v2.jsonl was written: the desktop world (issue 27).
    E.BrowserActed(
        at=_at(26),
        run_id="r2",
        session_id="d1",
        step=1,
        idx=0,
        op=E.DesktopCall(
            fn="click", x=1919, y=0, button="left", clicks=1, clamped=(99377.0, -39.0)
        ),
        duration_ms=331.7,
        command='["python", "-c", "import pyautogui; pyautogui.click(x=1919, y=0)"]',
        http_status=200,
        returncode=0,
        output="",
        guest_error="",
    ),
    E.ScreenshotTaken(
        at=_at(26.5), run_id="r2", session_id="d1", step=2, sha256="9a" * 32, a11y="9b" * 32
    ),
    E.SessionStarted(
        at=_at(25.5),
        run_id="r2",
        session_id="d1",
        task=E.Task(
            task_id="os/write-hello",
            prompt="Create ~/hello.txt",
            start_url="",
            suite="osworld:/tasks",
            grader="osworld",
            world="desktop",
            source_json='{"id":"write-hello"}',
        ),
    ),
    E.SessionEnded(
        at=_at(27), run_id="r2", session_id="d1", status="env_error", error="desktop gone"
    ),
)

_encoder = msgspec.json.Encoder()


def journal_v2_events() -> list[E.EventBase]:
    """What journal-v2.jsonl holds (read back in full): every sample, then calls whose requests
    repeat the sample call's messages, which format 2 writes as references."""
    call = next(s for s in SAMPLES if isinstance(s, E.ModelCalled))
    resample = msgspec.structs.replace(call, at=_at(5.5), attempt=3, response="Action: wait()")
    later = msgspec.structs.replace(
        call,
        at=_at(6),
        step=2,
        call_id="c2",
        attempt=1,
        purpose="step",
        messages=(
            *call.messages,
            E.Message(role="user", parts=(E.ImagePart(sha256="8e" * 32, width=1280, height=800),)),
            call.messages[0],  # a message twice in one request
        ),
    )
    return [*SAMPLES, *ADDED, resample, later]


def write_journal_v2(path: Path) -> None:
    """Write journal-v2.jsonl once, with the format-2 writer (it must not exist)."""
    from ownloop.store.journal import StreamWriter

    events = cast("list[E.Event]", journal_v2_events())
    with StreamWriter(path, fsync=False) as writer:
        writer.append(events[:10])
        writer.append(events[10:])


def append_golden(path: Path = GOLDEN_EVENTS) -> int:
    """Append the golden line of every sample not yet in ``path``; returns how many were added."""
    existing = set(path.read_bytes().splitlines()) if path.exists() else set()
    new = [
        line
        for line in (_encoder.encode(s) for s in (*SAMPLES, *ADDED, *LATER))
        if line not in existing
    ]
    with open(path, "ab") as f:
        for line in new:
            f.write(line + b"\n")
    return len(new)


if __name__ == "__main__":
    sys.stdout.write(f"{append_golden()} golden lines appended to {GOLDEN_EVENTS}\n")
