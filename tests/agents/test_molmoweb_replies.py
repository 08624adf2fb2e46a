"""One test per odd MolmoWeb reply in replies/molmoweb/*.txt, read at a 1280x720 screenshot.

A percent point (px, py) is the page point (round(px * 12.8, 1), round(py * 7.2, 1)), kept
inside [1, 1278] x [1, 718]. Expectations are written out by hand here; each reply file holds
exactly the bytes a model would send. The example_* files are agent-formats.md §4's examples.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ownloop.agents import make_agent
from ownloop.agents.base import AgentParseError, Parsed
from ownloop.agents.molmoweb import MolmoWebAgent
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
    KeyboardPress,
    KeyboardType,
    MouseClick,
    MouseDown,
    MouseMove,
    MouseUp,
    MouseWheel,
    Move,
    Op,
    PageGoBack,
    PageGoto,
    Rejected,
    Scroll,
    Sleep,
    TypeText,
    Wait,
)

FOLDER = Path(__file__).parent / "replies" / "molmoweb"
SIZE = (1280, 720)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> MolmoWebAgent:
    made = make_agent("molmoweb")
    assert isinstance(made, MolmoWebAgent)
    return made


def reply(name: str) -> str:
    return (FOLDER / name).read_text(encoding="utf-8")


def click(x: float, y: float, mx: float, my: float, **kw: object) -> Click:
    return Click(x=x, y=y, model_x=mx, model_y=my, **kw)  # type: ignore[arg-type]


EXPECTED: dict[str, tuple[str, tuple[Action, ...]]] = {
    "example1_click.txt": (
        "I need to search arXiv for the Molmo paper, so I'll click the search box at the top "
        "right.",
        (click(1041.9, 45.4, 81.4, 6.3),),
    ),
    "example2_keyboard_type.txt": (
        "The search box is focused; I'll type the query.",
        (TypeText(text="Molmo and PixMo"),),
    ),
    "example3_enter.txt": ("Submit the search.", (Hotkey(keys=("Enter",)),)),
    "example4_scroll.txt": (
        "The results continue below; scroll down.",
        (Scroll(direction="down", amount=360.0, unit="px"),),
    ),
    "example5_answer.txt": (
        "I found the paper title and authors.",
        (Finish(answer="Molmo and PixMo: Open Weights and Open Data\u2026"),),
    ),
    "example5_exit.txt": ("I answered, so I exit.", (Finish(answer=None),)),
    "example6_goto.txt": ("Go directly to the site.", (Goto(url="https://arxiv.org"),)),
    "bare_action.txt": ("", (click(640.0, 360.0, 50.0, 50.0),)),
    "dblclick.txt": ("Open it.", (click(320.0, 540.0, 25.0, 75.0, count=2),)),
    "click_type_double_ignored.txt": ("Double?", (click(320.0, 540.0, 25.0, 75.0),)),
    # The released executor clicks left whatever the button (option honour_button).
    "right_click.txt": ("Context menu.", (click(134.4, 147.6, 10.5, 20.5),)),
    "edges_clamped.txt": ("The corner.", (click(1278.0, 1.0, 100.0, 0.0),)),
    "outside_clamped.txt": ("Off the page.", (click(1278.0, 1.0, 120.5, -3.0),)),
    "numeric_strings.txt": ("Strings.", (click(518.4, 86.4, 40.5, 12.0),)),
    "missing_coordinates.txt": ("Where?", (click(1.0, 1.0, 0.0, 0.0),)),
    "scroll_at_diagonal.txt": (
        "Scroll the list.",
        (
            Scroll(
                direction="left",
                amount=128.0,
                unit="px",
                x=640.0,
                y=360.0,
                model_x=50.0,
                model_y=50.0,
            ),
            Scroll(direction="up", amount=180.0, unit="px"),
        ),
    ),
    "scroll_zero.txt": ("Nudge.", (Scroll(direction="down", amount=0.0, unit="px"),)),
    "hover_at.txt": (
        "Show the tooltip.",
        (Move(x=384.0, y=288.0, model_x=30.0, model_y=40.0), Wait(seconds=2.0)),
    ),
    "drag.txt": (
        "Move the slider.",
        (
            Drag(
                x=128.0,
                y=360.0,
                x2=1152.0,
                y2=360.0,
                model_x=10.0,
                model_y=50.0,
                model_x2=90.0,
                model_y2=50.0,
            ),
        ),
    ),
    "drag_and_drop_alias.txt": (
        "Drag.",
        (
            Drag(
                x=1.0,
                y=1.0,
                x2=640.0,
                y2=360.0,
                model_x=0.0,
                model_y=0.0,
                model_x2=50.0,
                model_y2=50.0,
            ),
        ),
    ),
    "type_alias.txt": ("Type.", (TypeText(text="line one\nline two"),)),
    "gemini_type_text_at.txt": (
        "Fill the field.",
        (
            click(640.0, 180.0, 500.0, 250.0),
            Hotkey(keys=("ControlOrMeta", "a")),
            Hotkey(keys=("Backspace",)),
            TypeText(text="Seattle"),
            Hotkey(keys=("Enter",)),
        ),
    ),
    "gemini_type_no_clear_no_enter.txt": (
        "Append.",
        (click(128.0, 648.0, 100.0, 900.0), TypeText(text="x")),
    ),
    "keypress_case.txt": ("Select all.", (Hotkey(keys=("ControlOrMeta", "a")),)),
    "keypress_unsupported.txt": (
        "Page down.",
        (Rejected(reason="Unsupported keypress: {'name': 'keyboard_press', 'key': 'PageDown'}"),),
    ),
    "unknown_action.txt": (
        "Zoom.",
        (
            Rejected(
                reason="Unsupported action type: zoom_in. Predicted: "
                "{'name': 'zoom_in', 'level': 2}"
            ),
        ),
    ),
    "report_infeasible.txt": ("The site is down.", (Fail(reason="The site does not load."),)),
    "browser_back.txt": ("Back.", (Back(),)),
    "browser_new_tab.txt": ("New tab.", (Goto(url="about:blank"),)),
    # issue 31: pydantic's lax mode reads "1" as 1; a negative sleep returns at once
    "browser_index_text.txt": ("Back, by a text index.", (Back(),)),
    "hover_negative_duration.txt": (
        "Show the tooltip briefly.",
        (Move(x=384.0, y=288.0, model_x=30.0, model_y=40.0),),
    ),
    "browser_tab_focus.txt": (
        "First tab.",
        (Rejected(reason="tab_focus: ownloop shows the model one tab, the newest"),),
    ),
    "noop.txt": ("Still loading.", (Wait(seconds=5.0),)),
    "message_plain.txt": ("Tell the user.", (CallUser(text="I could not find a price."),)),
    "action_description.txt": ("Click.", (click(640.0, 360.0, 50.0, 50.0),)),
    "unicode_and_whitespace.txt": (
        "Der Knopf \u201eOK\u201c ist oben.",
        (click(640.0, 72.0, 50.0, 10.0),),
    ),
}

NOT_JSON: dict[str, tuple[str, str]] = {
    # reply: (the released agent's exception text, ownloop's parse error with resample_non_json)
    "code_fence.txt": (
        "Expecting value: line 1 column 1 (char 0)",
        "response is not JSON: Expecting value: line 1 column 1 (char 0)",
    ),
    "trailing_text.txt": (
        "Extra data: line 1 column 74 (char 73)",
        "response is not JSON: Extra data",
    ),
    "truncated.txt": (
        "Unterminated string starting at: line 1 column 13 (char 12)",
        "response is not JSON: Unterminated string",
    ),
    "python_dict.txt": (
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "response is not JSON: Expecting property name enclosed in double quotes",
    ),
    "empty.txt": (
        "Expecting value: line 1 column 1 (char 0)",
        "response is not JSON: Expecting value",
    ),
    "no_action.txt": (
        "Expected 'action' or 'name' key in parsed JSON but didnt get it.",
        "response is an object with neither 'action' nor 'name'",
    ),
}
"""Text the released agent cannot read: by default a no-op report_infeasible, as there."""

REFUSED: dict[str, str] = {
    "bad_button.txt": "click button must be left, right or middle: ''",
    "thought_not_string.txt": "'thought' is a JSON NoneType, not a string",
    "action_list.txt": "'action' is a JSON list, not an object",
    "nan_coordinate.txt": "x is not a finite number: nan",
    "text_not_string.txt": "text is not a string: 42",
    "bad_noop_reason.txt": "noop_reason must be one of loading, captcha, unsupported_keypress, "
    "retrying_after_api_error",
}


def test_every_reply_file_has_an_expectation() -> None:
    assert sorted(p.name for p in FOLDER.glob("*.txt")) == sorted({*EXPECTED, *NOT_JSON, *REFUSED})


def _without_raw(parsed: Parsed) -> tuple[Action, ...]:
    return tuple(msgspec.structs.replace(action, raw="") for action in parsed.actions)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reply_parses_to_the_expected_actions(agent: MolmoWebAgent, name: str) -> None:
    text = reply(name)
    parsed = agent.parse(text, SIZE)
    thought, actions = EXPECTED[name]
    assert parsed.thought == thought
    assert _without_raw(parsed) == actions
    assert parsed.model_size == (100, 100)
    assert all(action.raw == text.strip() for action in parsed.actions)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_reply_is_refused_with_a_one_line_reason(agent: MolmoWebAgent, name: str) -> None:
    with pytest.raises(AgentParseError) as caught:
        agent.parse(reply(name), SIZE)
    assert str(caught.value).startswith(REFUSED[name])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", sorted(NOT_JSON))
def test_text_that_is_not_json_is_a_no_op_as_released(agent: MolmoWebAgent, name: str) -> None:
    text = reply(name)
    parsed = agent.parse(text, SIZE)
    reason, _ = NOT_JSON[name]
    assert parsed.thought == f"Could not parse predicted action: {reason}"
    assert parsed.actions == (
        Rejected(reason=f"Unparseable model output: {text}", raw=text.strip()),
    )
    assert agent.translate(parsed.actions[0]) == ()
    assert agent.ending(parsed, []) is None  # the episode goes on


@pytest.mark.parametrize("name", sorted(NOT_JSON))
def test_resample_non_json_makes_it_a_parse_error(name: str) -> None:
    strict = make_agent("molmoweb", resample_non_json=True)
    with pytest.raises(AgentParseError) as caught:
        strict.parse(reply(name), SIZE)
    assert str(caught.value).startswith(NOT_JSON[name][1])
    assert "\n" not in str(caught.value)


def test_honour_button_clicks_the_button_named() -> None:
    honest = make_agent("molmoweb", honour_button=True)
    parsed = honest.parse(reply("right_click.txt"), SIZE)
    assert _without_raw(parsed) == (click(134.4, 147.6, 10.5, 20.5, button="right"),)
    assert honest.translate(parsed.actions[0]) == (MouseClick(x=134.4, y=147.6, button="right"),)


OPS: dict[str, tuple[Op, ...]] = {
    "example1_click.txt": (MouseClick(x=1041.9, y=45.4),),
    "example2_keyboard_type.txt": (KeyboardType(text="Molmo and PixMo"),),
    "example3_enter.txt": (KeyboardPress(key="Enter"),),
    "example4_scroll.txt": (MouseWheel(dx=0.0, dy=360.0),),
    "example5_answer.txt": (),
    "example6_goto.txt": (PageGoto(url="https://arxiv.org"),),
    "dblclick.txt": (MouseClick(x=320.0, y=540.0, click_count=2),),
    "right_click.txt": (MouseClick(x=134.4, y=147.6),),
    "scroll_at_diagonal.txt": (
        MouseMove(x=640.0, y=360.0),
        MouseWheel(dx=-128.0, dy=0.0),
        MouseWheel(dx=0.0, dy=-180.0),
    ),
    "scroll_zero.txt": (),
    "hover_at.txt": (MouseMove(x=384.0, y=288.0), Sleep(seconds=2.0)),
    "drag.txt": (MouseMove(x=128.0, y=360.0), MouseDown(), MouseMove(x=1152.0, y=360.0), MouseUp()),
    "type_alias.txt": (KeyboardType(text="line one\nline two"),),
    "gemini_type_text_at.txt": (
        MouseClick(x=640.0, y=180.0),
        KeyboardPress(key="ControlOrMeta+a"),
        KeyboardPress(key="Backspace"),
        KeyboardType(text="Seattle"),
        KeyboardPress(key="Enter"),
    ),
    "keypress_case.txt": (KeyboardPress(key="ControlOrMeta+a"),),
    "keypress_unsupported.txt": (),
    "report_infeasible.txt": (),
    "browser_back.txt": (PageGoBack(),),
    "browser_new_tab.txt": (PageGoto(url="about:blank"),),
    "noop.txt": (Sleep(seconds=5.0),),
    "message_plain.txt": (),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_reply_translates_to_the_released_executor_operations(
    agent: MolmoWebAgent, name: str
) -> None:
    parsed = agent.parse(reply(name), SIZE)
    ops = tuple(op for action in parsed.actions for op in agent.translate(action))
    assert ops == OPS[name]
