"""One test per odd UI-TARS reply in replies/uitars/*.txt, read at a 1280x800 screenshot.

The model space of 1280x800 is 1288x812, so a model point (mx, my) is the page point
(mx * 1280 / 1288, my * 800 / 812). Expectations are written out here; each reply file holds
exactly the bytes a model would send.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ownloop.agents.base import AgentParseError
from ownloop.agents.uitars import UiTarsAgent
from ownloop.store.events import (
    Action,
    CallUser,
    Click,
    Drag,
    Finish,
    Hotkey,
    KeyboardType,
    KeyDown,
    KeyUp,
    Move,
    Scroll,
    TypeText,
    Wait,
)

FOLDER = Path(__file__).parent / "replies" / "uitars"
SIZE = (1280, 800)


def px(mx: float, my: float) -> dict[str, float]:
    """Page and model coordinates of a model point, computed by hand (not by our code)."""
    return {
        "x": round(mx * 1280 / 1288, 3),
        "y": round(my * 800 / 812, 3),
        "model_x": float(mx),
        "model_y": float(my),
    }


def click(mx: float, my: float, **kw: object) -> Click:
    return Click(**px(mx, my), **kw)  # type: ignore[arg-type]


def drag(a: tuple[int, int], b: tuple[int, int]) -> Drag:
    end = px(*b)
    return Drag(
        **px(*a), x2=end["x"], y2=end["y"], model_x2=end["model_x"], model_y2=end["model_y"]
    )


def scroll(direction: str, at: tuple[int, int] | None = None) -> Scroll:
    where = px(*at) if at else {}
    return Scroll(direction=direction, amount=5.0, **where)  # type: ignore[arg-type]


OK: dict[str, tuple[str, list[Action]]] = {
    # agent-formats.md §1, example outputs 1-8
    "readme_coordinates": ("xxx", [click(197, 525)]),
    "training_box_tokens": ("", [click(495, 30)]),
    "doubao_point": ("Click the button", [click(200, 300)]),
    "type_submit": (
        "The search box is empty. I'll type the query and submit it.",
        [TypeText(text="wireless mouse\n")],
    ),
    "chinese_scroll": ("需要向下滚动查看更多结果。", [scroll("down", (644, 400))]),
    "drag": ("Select the text by dragging.", [drag((120, 310), (560, 310))]),
    "finished_answer": (
        "The price is shown. Task complete.",
        [Finish(answer="The cheapest option is $23.99.")],
    ),
    "square_box": ("", [click(30, 770)]),  # centre of [10, 750, 50, 790]
    # more forms
    "round_box": ("The icon spans this box.", [click(200, 300)]),
    "reflection": (
        "Reflection: The last click opened the wrong menu.\n"
        "Action_Summary: Copy the selected text.",
        [Hotkey(keys=("ctrl", "c"))],
    ),
    "action_summary": (
        "Open the context menu on the file.",
        [click(100, 100, button="right")],
    ),
    "two_actions": (
        "Fill the name, then submit.",
        [click(300, 200), TypeText(text="Ada Lovelace\n")],
    ),
    "action_newline": ("Press the button.", [click(644, 406)]),
    "action_no_space": ("hmm", [click(1, 2)]),
    "double_quoted_box": ("Click it.", [click(10, 20)]),
    "type_unescaped_quote": ("Type the name.", [TypeText(text="O'Brien")]),
    "type_escaped_quotes": (
        "Type a quotation.",
        [TypeText(text="He said \"hi\" and 'bye'")],
    ),
    "type_paren_quote": ("Type it.", [TypeText(text="f('x') = 1")]),
    "scroll_no_point": ("Go back up.", [scroll("up")]),
    "scroll_left": ("The table continues on the left.", [scroll("left", (500, 500))]),
    "left_double": ("Open the file.", [click(40, 60, count=2)]),
    "left_single": ("Select it.", [click(40, 60)]),
    "hover": ("Show the tooltip.", [Move(**px(700, 30))]),
    "select_as_drag": ("Select the paragraph.", [drag((10, 10), (20, 20))]),
    "press_key": ("Confirm.", [Hotkey(keys=("enter",))]),
    "keydown_keyup": (
        "Hold shift while clicking.",
        [KeyDown(key="shift"), click(50, 50), KeyUp(key="shift")],
    ),
    "release_key": ("Let go of ctrl.", [KeyUp(key="ctrl")]),
    "hotkey_plus": ("Reopen the tab.", [Hotkey(keys=("ctrl", "shift", "t"))]),
    "hotkey_f5": ("Reload.", [Hotkey(keys=("f5",))]),
    "wait": ("The page is loading.", [Wait(seconds=5.0)]),
    "call_user": ("I need the password.", [CallUser()]),
    "finished_no_content": ("Done.", [Finish(answer=None)]),
    "multiline_thought": (
        "First, find the field.\nThen type the value.\n  It is near the top.",
        [click(10, 10)],
    ),
    "start_end_point": ("Move the slider.", [drag((100, 400), (600, 400))]),
    "crlf": ("Windows line endings.", [click(10, 10)]),
    # issue 31: the released code scrolls down for any direction holding "down"
    "scroll_downward": ("Scroll down.", [scroll("down", (500, 500))]),
    "type_tab": ("Type the row.", [TypeText(text="a\tb")]),
    "trailing_whitespace": ("Extra blank lines follow.", [click(10, 10)]),
}

ERRORS: dict[str, str] = {
    "no_action": "no 'Action:' in the response",
    "empty_action": "no action after 'Action:'",
    "truncated": "ui-tars cannot parse the action",
    "unknown_action": "unknown action 'open_app'",
    "error_env": "unknown action 'error_env'",
    "missing_box": "click needs start_box",
    "positional_box": "click needs start_box",
    "bad_direction": "scroll direction must be up, down, left or right",
    "unknown_key": "hotkey: unknown key 'hyper'",
    "nan_box": "start_box is not a list of numbers",
    "three_numbers": "start_box must be a point or a box of finite numbers",
    "keydown_two_keys": "keydown takes one key, got 'ctrl shift'",
    "prose_after_action": "ui-tars cannot parse the action",
    "unquoted_box": "an argument is not a quoted string",
    # issue 31: the package reads this as one type of the whole line; refused, re-sampled
    "two_on_one_line": "two actions on one line (the released parser reads them as one)",
}


def _reply(stem: str) -> str:
    return (FOLDER / f"{stem}.txt").read_text(encoding="utf-8")


def _without_raw(actions: tuple[Action, ...]) -> list[Action]:
    return [msgspec.structs.replace(action, raw="") for action in actions]


def test_every_reply_file_has_an_expectation() -> None:
    files = {path.stem for path in FOLDER.glob("*.txt")}
    assert files == set(OK) | set(ERRORS)
    assert not set(OK) & set(ERRORS)


@pytest.mark.parametrize("stem", sorted(OK))
def test_reply_parses(uitars: UiTarsAgent, stem: str) -> None:
    thought, actions = OK[stem]
    parsed = uitars.parse(_reply(stem), SIZE)
    assert parsed.thought == thought
    assert _without_raw(parsed.actions) == actions
    assert parsed.model_size == (1288, 812)


@pytest.mark.parametrize("stem", sorted(ERRORS))
def test_reply_is_a_parse_error(uitars: UiTarsAgent, stem: str) -> None:
    with pytest.raises(AgentParseError) as caught:
        uitars.parse(_reply(stem), SIZE)
    message = str(caught.value)
    assert ERRORS[stem] in message
    assert "\n" not in message and len(message) <= 200


@pytest.mark.parametrize(
    ("stem", "raws"),
    [
        ("readme_coordinates", ["click(start_box='(197,525)')"]),
        ("two_actions", ["click(start_box='(300,200)')", "type(content='Ada Lovelace\\n')"]),
        ("training_box_tokens", ["click(start_box='<|box_start|>(495,30)<|box_end|>')"]),
        (
            "keydown_keyup",
            ["keydown(key='shift')", "click(start_box='(50,50)')", "keyup(key='shift')"],
        ),
    ],
)
def test_each_action_keeps_its_own_text(uitars: UiTarsAgent, stem: str, raws: list[str]) -> None:
    parsed = uitars.parse(_reply(stem), SIZE)
    assert [action.raw for action in parsed.actions] == raws


def test_a_tab_in_typed_text_is_pasted_as_a_character(uitars: UiTarsAgent) -> None:
    # The released code pastes typed text (input_swap): the tab goes into the field; typing it
    # key by key would move the focus instead.
    (action,) = uitars.parse(_reply("type_tab"), SIZE).actions
    assert uitars.translate(action) == (
        KeyboardType(text="a"),
        KeyboardType(text="\t", paste=True),
        KeyboardType(text="b"),
    )
