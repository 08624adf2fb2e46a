"""The pyautogui whitelist interpreter: what each allowed call becomes, the pointer as pyautogui
tracks it (within a block and across steps), and python -c's stop-at-the-failing-statement."""

from __future__ import annotations

import msgspec
import pytest

from ownloop.agents import make_agent
from ownloop.agents.base import Observation, Parsed, PastStep
from ownloop.agents.coordinates import Point
from ownloop.agents.opencua import OpenCuaAgent, pointer_after
from ownloop.agents.pyautogui import CodeSyntaxError, Limits, interpret
from ownloop.store.events import (
    Action,
    ButtonDown,
    ButtonUp,
    Click,
    Drag,
    Hotkey,
    ImagePart,
    KeyDown,
    KeyUp,
    Move,
    Rejected,
    Scroll,
    TypeText,
    Wait,
)


class Identity:
    """Model space = page space, so expectations read plainly."""

    def point(self, x: float, y: float) -> Point:
        return Point(float(x), float(y))

    def offset(self, dx: float, dy: float) -> Point:
        return Point(float(dx), float(dy))


def run(code: str, pointer: Point | None = None) -> list[dict[str, object]]:
    outcome = interpret(code, Identity(), pointer=pointer)
    return [_plain(a) for a in outcome.actions]


def _plain(action: Action) -> dict[str, object]:
    out = msgspec.to_builtins(action)
    out.pop("raw", None)
    return out


def plain(*actions: Action) -> list[dict[str, object]]:
    return [_plain(a) for a in actions]


CASES = [
    ("pyautogui.click(10, 20)", plain(Click(x=10, y=20, model_x=10, model_y=20))),
    ("pyautogui.click((10, 20))", plain(Click(x=10, y=20, model_x=10, model_y=20))),
    (
        "pyautogui.click(x=10, y=20, clicks=2, button='right')",
        plain(Click(x=10, y=20, count=2, button="right", model_x=10, model_y=20)),
    ),
    (
        "pyautogui.click(10, 20, 1, 0.0, 'secondary')",
        plain(Click(x=10, y=20, button="right", model_x=10, model_y=20)),
    ),
    ("pyautogui.doubleClick(x=1, y=2)", plain(Click(x=1, y=2, count=2, model_x=1, model_y=2))),
    ("pyautogui.tripleClick(x=1, y=2)", plain(Click(x=1, y=2, count=3, model_x=1, model_y=2))),
    (
        "pyautogui.middleClick(x=1, y=2)",
        plain(Click(x=1, y=2, button="middle", model_x=1, model_y=2)),
    ),
    ("pyautogui.click(x=5, y=6, clicks=0)", plain(Move(x=5, y=6, model_x=5, model_y=6))),
    ("pyautogui.moveTo(5, 6, duration=0.5)", plain(Move(x=5, y=6, model_x=5, model_y=6))),
    (
        "pyautogui.moveTo(5, 6)\npyautogui.moveRel(10, -2)\npyautogui.click()",
        plain(Move(x=5, y=6, model_x=5, model_y=6), Move(x=15, y=4), Click(x=15, y=4)),
    ),
    (
        "pyautogui.moveTo(5, 6)\npyautogui.dragRel(10, 0, duration=1)",
        plain(Move(x=5, y=6, model_x=5, model_y=6), Drag(x=5, y=6, x2=15, y2=6)),
    ),
    (
        "pyautogui.moveTo(5, 6)\npyautogui.dragTo(50, 60, button='right')",
        plain(
            Move(x=5, y=6, model_x=5, model_y=6),
            ButtonDown(button="right"),
            Move(x=50, y=60, model_x=50, model_y=60),
            ButtonUp(button="right"),
        ),
    ),
    (
        "pyautogui.dragTo(50, 60)",  # from wherever the pointer is
        plain(ButtonDown(), Move(x=50, y=60, model_x=50, model_y=60), ButtonUp()),
    ),
    (
        "pyautogui.mouseDown(1, 2)\npyautogui.moveTo(3, 4)\npyautogui.mouseUp()",
        plain(
            ButtonDown(x=1, y=2, model_x=1, model_y=2),
            Move(x=3, y=4, model_x=3, model_y=4),
            ButtonUp(x=3, y=4),
        ),
    ),
    ("pyautogui.click()", plain(ButtonDown(), ButtonUp())),
    ("pyautogui.scroll(3)", plain(Scroll(direction="up", amount=3))),
    (
        "pyautogui.scroll(-2, x=7, y=8)\npyautogui.click()",
        plain(Scroll(direction="down", amount=2, x=7, y=8, model_x=7, model_y=8), Click(x=7, y=8)),
    ),
    (
        "pyautogui.hscroll(4)\npyautogui.hscroll(clicks=-1)",
        plain(Scroll(direction="right", amount=4), Scroll(direction="left", amount=1)),
    ),
    ("pyautogui.scroll(0)", []),
    ("pyautogui.write('a\\nb', interval=0.1)", plain(TypeText(text="a\nb"))),
    (
        "pyautogui.write(content='x')\npyautogui.typewrite(message='y')",
        plain(TypeText(text="x"), TypeText(text="y")),
    ),
    ("pyautogui.typewrite(['a', 'enter'])", plain(Hotkey(keys=("a",)), Hotkey(keys=("enter",)))),
    (
        "pyautogui.press('\\n')\npyautogui.press('ctrlleft')",
        plain(Hotkey(keys=("Enter",)), Hotkey(keys=("ControlLeft",))),
    ),
    ("pyautogui.press(['tab', 'tab'], presses=2)", plain(*[Hotkey(keys=("tab",))] * 4)),
    ("pyautogui.hotkey('ctrl', 'shift', 't')", plain(Hotkey(keys=("ctrl", "shift", "t")))),
    ("pyautogui.hotkey(['ctrl', 'c'])", plain(Hotkey(keys=("ctrl", "c")))),
    ("pyautogui.hotkey(key2='v', key1='ctrl', interval=0.1)", plain(Hotkey(keys=("ctrl", "v")))),
    (
        "pyautogui.keyDown('shift')\npyautogui.keyUp(key='shift')",
        plain(KeyDown(key="shift"), KeyUp(key="shift")),
    ),
    ("pyautogui.sleep(1)\ntime.sleep(0.25)", plain(Wait(seconds=1), Wait(seconds=0.25))),
    ("import pyautogui, time\npass", []),
    ("for i in range(1, 5, 2):\n    pyautogui.press('a')", plain(*[Hotkey(keys=("a",))] * 2)),
    ("computer.triple_click(1, 2)", plain(Click(x=1, y=2, count=3, model_x=1, model_y=2))),
]


@pytest.mark.parametrize(("code", "expected"), CASES, ids=[c for c, _ in CASES])
def test_allowed_calls(code: str, expected: list[dict[str, object]]) -> None:
    assert run(code) == expected


def test_each_action_keeps_its_call_text() -> None:
    outcome = interpret("for _ in range(2):\n    pyautogui.press('a')", Identity())
    assert [a.raw for a in outcome.actions] == ["pyautogui.press('a')"] * 2


def test_a_refused_statement_stops_the_block_like_python_c() -> None:
    outcome = interpret(
        "pyautogui.press('a')\nfor _ in range(3):\n    pyautogui.press('b')\n"
        "    x = 1\npyautogui.press('c')",
        Identity(),
    )
    assert [type(a).__name__ for a in outcome.actions] == ["Hotkey", "Hotkey", "Rejected"]
    assert outcome.rejected == "line 4: a Assign statement is not allowed"
    assert isinstance(outcome.actions[-1], Rejected) and outcome.actions[-1].raw == "x = 1"


def test_a_syntax_error_runs_nothing() -> None:
    with pytest.raises(CodeSyntaxError, match="line 2"):
        interpret("pyautogui.press('a')\npyautogui.press(", Identity())


def test_wait_and_terminate_stop_the_block() -> None:
    outcome = interpret(
        "pyautogui.press('a')\ncomputer.terminate(status='success', answer=4)\nimport os",
        Identity(),
    )
    assert outcome.control is not None and outcome.control[:3] == ("terminate", "success", 4)
    assert outcome.rejected is None
    assert interpret("computer.wait()", Identity()).control[0] == "wait"  # type: ignore[index]


def test_pointer_known_at_the_start_is_used() -> None:
    assert run("pyautogui.doubleClick()", Point(3, 4)) == plain(Click(x=3, y=4, count=2))
    assert run("pyautogui.moveRel(1, 1)", Point(3, 4)) == plain(Move(x=4, y=5))
    assert run("pyautogui.mouseDown()", Point(3, 4)) == plain(ButtonDown(x=3, y=4))
    assert "needs the pointer position" in run("pyautogui.doubleClick()")[0]["reason"]


def test_limits_are_options() -> None:
    outcome = interpret("for _ in range(5):\n    pass", Identity(), limits=Limits(loop_turns=4))
    assert outcome.rejected == "line 1: a loop of 5 turns is over the limit of 4"


# ---------------------------------------------------------------------- across steps


def _step(response: str, parsed: Parsed) -> PastStep:
    return PastStep(Observation(1, ImagePart(sha256="0" * 64), ""), response, parsed)


def test_the_pointer_carries_over_from_the_history() -> None:
    agent = make_agent("opencua", pause=0)
    assert isinstance(agent, OpenCuaAgent)
    first = "## Action:\nMove.\n```python\npyautogui.moveTo(x=966, y=546)\n```"
    parsed = agent.parse(first, (1920, 1080), [])
    history = [_step(first, parsed), _step("", Parsed(actions=(TypeText(text="x"),)))]
    assert pointer_after(history) == Point(960.0, 540.0)
    second = "## Action:\nClick twice there.\n```python\npyautogui.doubleClick()\n```"
    (click,) = agent.parse(second, (1920, 1080), history).actions
    assert (click.x, click.y, click.count) == (960.0, 540.0, 2)  # type: ignore[union-attr]
    # Without the history the position is unknown: a double click in place is refused.
    (refused,) = agent.parse(second, (1920, 1080)).actions
    assert isinstance(refused, Rejected)


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ((), None),
        ((Drag(x=1, y=2, x2=3, y2=4), TypeText(text="x")), Point(3, 4)),
        ((Click(x=1, y=2), Scroll(direction="up"), ButtonUp()), Point(1, 2)),
        ((Move(x=1, y=2), Scroll(direction="up", x=5, y=6)), Point(5, 6)),
        ((ButtonDown(x=7, y=8),), Point(7, 8)),
    ],
)
def test_pointer_after(actions: tuple[Action, ...], expected: Point | None) -> None:
    assert pointer_after([_step("", Parsed(actions=actions))]) == expected
