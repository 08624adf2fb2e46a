"""render() writes what UI-TARS would write, and parse(render(actions)) gives the actions back."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ownloop.agents.coordinates import smart_resize
from ownloop.agents.uitars import UiTarsAgent
from ownloop.store.events import (
    Action,
    Back,
    CallUser,
    Click,
    Drag,
    Finish,
    Goto,
    Hotkey,
    KeyDown,
    KeyUp,
    Move,
    Scroll,
    TypeText,
    Wait,
)

AGENT = UiTarsAgent()


def test_render_writes_the_model_grammar_in_model_pixels() -> None:
    text = AGENT.render(
        "Click OK, then type.",
        [Click(x=640, y=400), TypeText(text="it's done\n"), Finish(answer="42")],
        (1280, 800),
    )
    assert text == (
        "Thought: Click OK, then type.\n"
        "Action: click(start_box='(644,406)')\n\n"
        "type(content='it\\'s done\\n')\n\n"
        "finished(content='42')"
    )


@pytest.mark.parametrize(
    ("action", "call"),
    [
        (Click(x=640, y=400, count=2), "left_double(start_box='(644,406)')"),
        (Click(x=640, y=400, button="right"), "right_single(start_box='(644,406)')"),
        (Move(x=640, y=400), "hover(start_box='(644,406)')"),
        (Drag(x=0, y=0, x2=1280, y2=800), "drag(start_box='(0,0)', end_box='(1288,812)')"),
        (Scroll(direction="up", x=640, y=400), "scroll(start_box='(644,406)', direction='up')"),
        (Scroll(direction="left"), "scroll(direction='left')"),
        (Hotkey(keys=("ctrl", "shift", "t")), "hotkey(key='ctrl shift t')"),
        (KeyDown(key="shift"), "keydown(key='shift')"),
        (KeyUp(key="shift"), "keyup(key='shift')"),
        (Wait(), "wait()"),
        (Finish(), "finished()"),
        (CallUser(), "call_user()"),
    ],
)
def test_render_each_action(action: Action, call: str) -> None:
    assert AGENT.render("", [action], (1280, 800)) == f"Action: {call}"


@pytest.mark.parametrize(
    "action",
    [Goto(url="http://x/"), Back(), Click(x=1, y=1, button="middle"), Click(x=1, y=1, count=3)],
)
def test_render_refuses_what_the_grammar_cannot_say(action: Action) -> None:
    with pytest.raises(ValueError, match="uitars cannot express this action"):
        AGENT.render("", [action], (1280, 800))


def test_render_refuses_no_actions() -> None:
    with pytest.raises(ValueError, match="no actions"):
        AGENT.render("thought", [], (1280, 800))


# ---------------------------------------------------------------- round trips

sizes = st.tuples(st.integers(64, 2560), st.integers(64, 1600))


@st.composite
def pointer_actions(draw: st.DrawFn) -> tuple[tuple[int, int], Action]:
    size = draw(sizes)
    xs = st.floats(0, size[0] - 1, allow_nan=False)
    ys = st.floats(0, size[1] - 1, allow_nan=False)
    kind = draw(st.sampled_from(["click", "double", "right", "move", "drag", "scroll"]))
    x, y = draw(xs), draw(ys)
    action: Action
    if kind == "drag":
        action = Drag(x=x, y=y, x2=draw(xs), y2=draw(ys))
    elif kind == "move":
        action = Move(x=x, y=y)
    elif kind == "scroll":
        action = Scroll(
            direction=draw(st.sampled_from(["up", "down", "left", "right"])), amount=5.0, x=x, y=y
        )
    else:
        button, count = {"click": ("left", 1), "double": ("left", 2), "right": ("right", 1)}[kind]
        action = Click(x=x, y=y, button=button, count=count)  # type: ignore[arg-type]
    return size, action


@settings(max_examples=300, deadline=None)
@given(pointer_actions())
def test_pointer_round_trip_within_one_model_pixel(case: tuple[tuple[int, int], Action]) -> None:
    size, action = case
    model = smart_resize(size)
    (back,) = AGENT.parse(AGENT.render("t", [action], size), size).actions
    assert type(back) is type(action)
    one_px = (size[0] / model.width, size[1] / model.height)  # a model pixel, in page pixels
    for fx, fy in (("x", "y"), ("x2", "y2")):
        if hasattr(action, fx):
            assert abs(getattr(back, fx) - getattr(action, fx)) <= one_px[0]
            assert abs(getattr(back, fy) - getattr(action, fy)) <= one_px[1]
    plain = {"raw", "x", "y", "x2", "y2", "model_x", "model_y", "model_x2", "model_y2"}
    for field in action.__struct_fields__:
        if field not in plain:
            assert getattr(back, field) == getattr(action, field), field


def test_render_refuses_an_answer_the_released_parser_reads_as_a_type_action() -> None:
    with pytest.raises(ValueError, match="would not read this response back"):
        AGENT.render("t", [Finish(answer="type(content")], (1280, 800))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
@pytest.mark.slow
def test_any_text_round_trips_through_type_and_finished(text: str) -> None:
    try:
        rendered = AGENT.render("t", [TypeText(text=text), Finish(answer=text)], (1280, 800))
    except ValueError as refused:
        # The released parser reads any action holding "type(content" as a type action, so an
        # answer holding it cannot be written: render says so rather than write what fails.
        assert "type(content" in text, refused
        return
    typed, finished = AGENT.parse(rendered, (1280, 800)).actions
    # The package strips leading whitespace off every argument's value and then drops empty
    # ones, so finished(content='') reads as no answer. Everything else comes back exactly.
    kept = text.lstrip()
    assert typed == TypeText(text=kept, raw=typed.raw)
    assert finished == Finish(answer=kept or None, raw=finished.raw)


_THOUGHT = (
    st.text(
        alphabet=st.characters(categories=["L", "N", "Zs"], include_characters=".,!?'()-\n"),
        max_size=60,
    )
    .map(str.strip)
    .filter(lambda t: t and "point" not in t)
)


@settings(max_examples=200, deadline=None)
@given(
    _THOUGHT,
    st.lists(
        st.sampled_from(
            [
                "ctrl",
                "shift",
                "alt",
                "a",
                "enter",
                "f5",
                "pagedown",
                "esc",
                "tab",
                "space",
                "1",
                "/",
            ]
        ),
        min_size=1,
        max_size=3,
    ),
)
@pytest.mark.slow
def test_thoughts_and_keys_round_trip(thought: str, keys: list[str]) -> None:
    parsed = AGENT.parse(
        AGENT.render(thought, [Hotkey(keys=tuple(keys))], (1280, 800)), (1280, 800)
    )
    assert parsed.thought == thought
    assert [msgspec.structs.replace(a, raw="") for a in parsed.actions] == [
        Hotkey(keys=tuple(keys))
    ]
