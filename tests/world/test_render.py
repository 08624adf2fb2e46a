"""Agent-neutral actions → literal pyautogui calls: checked arguments, nothing else."""

from __future__ import annotations

import pytest

from ownloop.agents.coordinates import Point
from ownloop.agents.pyautogui import interpret
from ownloop.store.events import (
    Action,
    Back,
    Click,
    DesktopCall,
    Drag,
    Goto,
    Hotkey,
    Scroll,
    Sleep,
    TypeText,
    Wait,
)
from ownloop.world.render import MAX_TEXT, RenderRefused, desktop_ops, render

SCREEN = (1920, 1080)


class _Pixels:
    def point(self, x: float, y: float) -> Point:
        return Point(x, y)

    def offset(self, dx: float, dy: float) -> Point:
        return Point(dx, dy)


@pytest.mark.parametrize(
    ("action", "calls"),
    [
        (Click(x=10.4, y=20.6), ["pyautogui.click(x=10, y=21, clicks=1, button='left')"]),
        (
            Click(x=5, y=5, count=2, button="right"),
            ["pyautogui.click(x=5, y=5, clicks=2, button='right')"],
        ),
        (
            Drag(x=1, y=2, x2=300, y2=400),
            ["pyautogui.moveTo(x=1, y=2)", "pyautogui.dragTo(x=300, y=400, duration=0.5)"],
        ),
        (
            Scroll(direction="down", amount=3, x=50, y=60),
            ["pyautogui.scroll(clicks=-3, x=50, y=60)"],
        ),
        (Scroll(direction="right", amount=2), ["pyautogui.hscroll(clicks=2)"]),
        (Hotkey(keys=("Control", "S")), ["pyautogui.hotkey('ctrl', 's')"]),
        (Hotkey(keys=("Enter",)), ["pyautogui.press('enter')"]),
        (
            TypeText(text="'); os.system('id'); ('\n"),
            ["pyautogui.write(\"'); os.system('id'); ('\\n\", interval=0.01)"],
        ),
    ],
)
def test_each_action_renders_one_literal_call_the_whitelist_reads_back(
    action: Action, calls: list[str]
) -> None:
    rendered = [render(op, SCREEN) for op in desktop_ops(action, SCREEN)]
    assert rendered == calls
    for code in rendered:  # the test desktop's whitelist reads each as exactly one action
        outcome = interpret(code, _Pixels())
        assert outcome.rejected is None and len(outcome.actions) >= 1


def test_an_off_screen_point_is_clamped_and_the_asked_point_kept() -> None:
    (op,) = desktop_ops(Click(x=99377, y=-39), SCREEN)
    assert isinstance(op, DesktopCall)
    assert (op.x, op.y, op.clamped) == (1919, 0, (99377.0, -39.0))
    assert render(op, SCREEN) == "pyautogui.click(x=1919, y=0, clicks=1, button='left')"


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (TypeText(text="x" * (MAX_TEXT + 1)), f"text to type is {MAX_TEXT + 1} characters"),
        (TypeText(text="a\x00b"), "characters a keyboard cannot type"),
        (Hotkey(keys=("ctrl; import os",)), "unknown key"),
        (Click(x=float("nan"), y=1), "is not a number"),
    ],
)
def test_what_cannot_be_a_checked_call_is_refused(action: Action, reason: str) -> None:
    with pytest.raises(RenderRefused, match=reason):
        desktop_ops(action, SCREEN)


@pytest.mark.parametrize(
    "call",
    [
        DesktopCall(fn="system", text="id"),
        DesktopCall(fn="click", x=5000, y=1),
        DesktopCall(fn="click", x=1, y=1, button="left'); import os; ('"),
        DesktopCall(fn="press", keys=("enter')\nimport os\n('",)),
    ],
)
def test_a_recorded_call_is_checked_again_before_it_is_sent(call: DesktopCall) -> None:
    with pytest.raises(RenderRefused):
        render(call, SCREEN)


def test_browser_only_actions_have_no_desktop_operation() -> None:
    assert desktop_ops(Goto(url="http://x"), SCREEN) == ()
    assert desktop_ops(Back(), SCREEN) == ()
    assert desktop_ops(Wait(seconds=999), SCREEN) == (Sleep(seconds=30.0),)
