"""Every agent-neutral action → the Playwright operations, with the uitars agent's options."""

from __future__ import annotations

import pytest

from ownloop.agents.translation import TranslationStyle, translate_action
from ownloop.agents.uitars import UiTarsAgent, UiTarsOptions
from ownloop.store.events import (
    Action,
    Back,
    CallUser,
    Click,
    Drag,
    Fail,
    Finish,
    Goto,
    Hotkey,
    KeyboardDown,
    KeyboardPress,
    KeyboardType,
    KeyboardUp,
    KeyDown,
    KeyUp,
    Memorize,
    MouseClick,
    MouseDown,
    MouseMove,
    MouseUp,
    MouseWheel,
    Move,
    Op,
    PageGoBack,
    PageGoto,
    Scroll,
    Search,
    Sleep,
    TypeText,
    Wait,
)

AGENT = UiTarsAgent()
WHEEL_DOWN = MouseWheel(dx=0.0, dy=100.0)


@pytest.mark.parametrize(
    ("action", "ops"),
    [
        (Click(x=10, y=20), [MouseClick(x=10, y=20)]),
        (Click(x=10, y=20, count=2), [MouseClick(x=10, y=20, click_count=2)]),
        (Click(x=10, y=20, button="right"), [MouseClick(x=10, y=20, button="right")]),
        (Move(x=10, y=20), [MouseMove(x=10, y=20)]),
        (
            Drag(x=1, y=2, x2=3, y2=4),
            [MouseMove(x=1, y=2), MouseDown(), MouseMove(x=3, y=4, steps=20), MouseUp()],
        ),
        (
            Scroll(direction="down", amount=5, x=10, y=20),
            [MouseMove(x=10, y=20)] + [WHEEL_DOWN] * 5,
        ),
        (Scroll(direction="up", amount=2), [MouseWheel(dx=0.0, dy=-100.0)] * 2),
        (Scroll(direction="left", amount=1), [MouseWheel(dx=-100.0, dy=0.0)]),
        (Scroll(direction="right", amount=1), [MouseWheel(dx=100.0, dy=0.0)]),
        (Scroll(direction="down", amount=1.5), [WHEEL_DOWN, MouseWheel(dx=0.0, dy=50.0)]),
        (Scroll(direction="down", amount=250, unit="px"), [MouseWheel(dx=0.0, dy=250.0)]),
        (Scroll(direction="down", amount=0), []),
        (TypeText(text="hello"), [KeyboardType(text="hello")]),
        (TypeText(text="hello\n"), [KeyboardType(text="hello"), KeyboardPress(key="Enter")]),
        (TypeText(text="hello\\n"), [KeyboardType(text="hello"), KeyboardPress(key="Enter")]),
        (TypeText(text="hello\r\n"), [KeyboardType(text="hello"), KeyboardPress(key="Enter")]),
        (TypeText(text="a\nb"), [KeyboardType(text="a\nb")]),
        (TypeText(text="\n"), [KeyboardPress(key="Enter")]),
        (TypeText(text=""), []),
        (Hotkey(keys=("ctrl", "c")), [KeyboardPress(key="Control+c")]),
        (Hotkey(keys=("cmd", "shift", "z")), [KeyboardPress(key="Meta+Shift+z")]),
        (Hotkey(keys=("enter",)), [KeyboardPress(key="Enter")]),
        (KeyDown(key="shift"), [KeyboardDown(key="Shift")]),
        (KeyUp(key="shift"), [KeyboardUp(key="Shift")]),
        (Wait(seconds=5.0), [Sleep(seconds=5.0)]),
        (Goto(url="http://x/"), [PageGoto(url="http://x/")]),
        (Back(), [PageGoBack()]),
        (Search(query="a b&c"), [PageGoto(url="https://www.bing.com/search?q=a+b%26c")]),
        (Finish(answer="42"), []),
        (CallUser(), []),
        (Fail(), []),
        (Memorize(fact="x"), []),
    ],
)
def test_translate(action: Action, ops: list[Op]) -> None:
    assert list(AGENT.translate(action)) == ops


def test_options_change_the_translation() -> None:
    agent = UiTarsAgent(UiTarsOptions(notch_px=40, drag_steps=5))
    assert agent.translate(Scroll(direction="down", amount=1)) == (MouseWheel(dx=0.0, dy=40.0),)
    assert agent.translate(Drag(x=1, y=2, x2=3, y2=4))[2] == MouseMove(x=3, y=4, steps=5)


def test_a_literal_backslash_n_is_text_for_other_agents() -> None:
    assert translate_action(TypeText(text="a\\n"), TranslationStyle()) == (
        KeyboardType(text="a\\n"),
    )


def test_an_unknown_key_fails_in_translation_too() -> None:
    with pytest.raises(ValueError, match="unknown key 'hyper'"):
        AGENT.translate(Hotkey(keys=("hyper",)))
