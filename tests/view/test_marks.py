"""What is drawn on a screenshot, from actions (and from operations when a step has none)."""

from __future__ import annotations

import math

from ownloop.replay.fold import Session, Step
from ownloop.store import events as E
from ownloop.testing.synthetic import at
from ownloop.view.marks import Mark, arrow_head, session_marks, step_marks

IDS = {"run_id": "r", "session_id": "s"}


def _parsed(*actions: E.Action) -> E.ActionParsed:
    return E.ActionParsed(at=at(0), **IDS, step=1, call_id="c", parser="t", actions=actions)


def _acted(idx: int, op: E.Op) -> E.BrowserActed:
    return E.BrowserActed(at=at(idx), **IDS, step=1, idx=idx, op=op)


def test_each_pointer_action_is_a_mark_at_its_page_coordinates() -> None:
    step = Step(
        1,
        parsed=_parsed(
            E.Click(x=10, y=20),
            E.Click(x=11, y=21, button="right"),
            E.Click(x=12, y=22, count=2),
            E.Move(x=30, y=40),
            E.Drag(x=1, y=2, x2=300, y2=400),
            E.Scroll(direction="left", amount=3, x=500, y=600),
            E.Wait(),
            E.Finish(answer="x"),
        ),
    )
    assert step_marks(step) == [
        Mark("click", 10, 20, action_idx=0),
        Mark("right_click", 11, 21, action_idx=1),
        Mark("double_click", 12, 22, action_idx=2),
        Mark("move", 30, 40, action_idx=3),
        Mark("drag", 1, 2, 300, 400, action_idx=4),
        Mark("scroll", 500, 600, 420, 600, "scroll left 3", 5),
    ]


def test_typing_and_keys_are_labelled_where_the_pointer_last_was_across_steps() -> None:
    first = Step(1, parsed=_parsed(E.Click(x=50, y=60)))
    second = Step(
        2,
        parsed=_parsed(
            E.TypeText(text="hello"), E.Hotkey(keys=("ctrl", "a")), E.Scroll(direction="down")
        ),
    )
    marks = session_marks(Session(session_id="s", steps=(first, second)))
    assert marks[2] == [
        Mark("type", 50, 60, label="hello"),
        Mark("key", 50, 60, label="ctrl+a", action_idx=1),
        Mark("scroll", 50, 60, 50, 140, "scroll down 1", 2),
    ]


def test_a_step_without_pointer_actions_is_drawn_from_its_operations() -> None:
    step = Step(
        1,
        effects=(
            _acted(0, E.MouseMove(x=5, y=6)),
            _acted(1, E.MouseDown()),
            _acted(2, E.MouseMove(x=70, y=80, steps=20)),
            _acted(3, E.MouseUp()),
            _acted(4, E.MouseClick(x=9, y=9)),
            _acted(5, E.MouseWheel(dy=-300)),
            _acted(6, E.KeyboardPress(key="Enter")),
        ),
    )
    assert [m[:5] for m in step_marks(step)] == [
        ("drag", 5, 6, 70, 80),
        ("click", 9, 9, None, None),
        ("scroll", 9, 9, 9, -71),
        ("key", 9, 9, None, None),
    ]


def test_a_desktop_replay_is_drawn_from_its_pyautogui_calls() -> None:
    # a desktop replay's step has the recorded operations only: screen pixels, as its shot's
    step = Step(
        1,
        effects=(
            _acted(0, E.DesktopCall(fn="click", x=640, y=360)),
            _acted(1, E.DesktopCall(fn="write", text="ls\n")),
            _acted(2, E.DesktopCall(fn="moveTo", x=10, y=20)),
            _acted(3, E.DesktopCall(fn="dragTo", x=300, y=400)),
            _acted(4, E.DesktopCall(fn="doubleClick", x=5, y=5)),
            _acted(5, E.DesktopCall(fn="scroll", clicks=-3)),
            _acted(6, E.DesktopCall(fn="hotkey", keys=("ctrl", "s"))),
        ),
    )
    assert [m[:6] for m in step_marks(step, viewport=(1280, 720))] == [
        ("click", 640, 360, None, None, ""),
        ("type", 640, 360, None, None, "ls\n"),
        ("drag", 10, 20, 300, 400, ""),
        ("double_click", 5, 5, None, None, ""),
        ("scroll", 5, 5, 5, 85, "scroll down 3"),
        ("key", 5, 5, None, None, "ctrl+s"),
    ]


def test_absurd_coordinates_are_not_drawn() -> None:
    step = Step(
        1, parsed=_parsed(E.Click(x=math.nan, y=1), E.Click(x=1e300, y=1), E.Click(x=3, y=4))
    )
    assert step_marks(step) == [Mark("click", 3, 4, action_idx=2)]


def test_arrow_head_points_along_the_arrow() -> None:
    tip, left, right = arrow_head(0, 0, 100, 0, 10)
    assert tip == (100, 0)
    assert left[0] < 100 and right[0] < 100 and left[1] == -right[1]
