"""MolmoWeb's render (the expert's and the tests' model) and properties of its parser.

Render writes percentages with one decimal, as in training, so a round trip lands within half a
step of the grid: 6.4 px across and 3.6 px down at 1280x720.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ownloop.agents import make_agent
from ownloop.agents.base import AgentParseError
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
    KeyDown,
    Memorize,
    Move,
    Rejected,
    Scroll,
    Search,
    TypeText,
    Wait,
)

pytestmark = pytest.mark.filterwarnings("ignore:molmoweb. no clone")
SIZE = (1280, 720)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> MolmoWebAgent:
    made = make_agent("molmoweb", honour_button=True)  # so right and middle clicks round-trip
    assert isinstance(made, MolmoWebAgent)
    return made


def test_render_writes_the_training_format(agent: MolmoWebAgent) -> None:
    text = agent.render("Click the search box.", [Click(x=1042.0, y=45.0)], SIZE)
    assert text == (
        '{"thought": "Click the search box.", "action": {"name": "click", '
        '"x": 81.4, "y": 6.2, "button": "left", "click_type": "single"}}'
    )
    assert json.loads(agent.render("ü", [TypeText(text="é")], SIZE)) == {
        "thought": "ü",
        "action": {"name": "keyboard_type", "text": "é"},
    }
    assert "é" in agent.render("", [TypeText(text="é")], SIZE)  # ensure_ascii=False


@pytest.mark.parametrize(
    ("action", "written"),
    [
        (
            Click(x=320, y=540, count=2),
            {"name": "dblclick", "x": 25.0, "y": 75.0, "button": "left"},
        ),
        (
            Click(x=640, y=360, button="middle"),
            {"name": "click", "x": 50.0, "y": 50.0, "button": "middle", "click_type": "single"},
        ),
        (Move(x=640, y=360), {"name": "hover_at", "x": 50.0, "y": 50.0}),
        (
            Drag(x=128, y=360, x2=1152, y2=360),
            {
                "name": "mouse_drag_and_drop",
                "from_x": 10.0,
                "from_y": 50.0,
                "to_x": 90.0,
                "to_y": 50.0,
            },
        ),
        (
            Scroll(direction="down", amount=360, unit="px"),
            {"name": "scroll", "delta_x": 0.0, "delta_y": 50.0},
        ),
        (
            Scroll(direction="left", amount=2, x=640, y=360),  # 2 notches of 100 px
            {"name": "scroll_at", "x": 50.0, "y": 50.0, "delta_x": -15.6, "delta_y": 0.0},
        ),
        (Hotkey(keys=("ctrl", "a")), {"name": "keyboard_press", "key": "ControlOrMeta+a"}),
        (Hotkey(keys=("enter",)), {"name": "keyboard_press", "key": "Enter"}),
        (Wait(seconds=5), {"name": "noop", "noop_reason": "loading"}),
        (Goto(url="https://x.org"), {"name": "goto", "url": "https://x.org"}),
        (Back(), {"name": "browser_nav", "nav_type": "go_back", "index": -1}),
        (Finish(answer="42"), {"name": "send_msg_to_user", "msg": "[ANSWER] 42"}),
        (Finish(), {"name": "send_msg_to_user", "msg": "[EXIT]"}),
        (CallUser(text="Help?"), {"name": "send_msg_to_user", "msg": "Help?"}),
        (Fail(reason="blocked"), {"name": "report_infeasible", "infeasibility_reason": "blocked"}),
    ],
)
def test_render_writes_each_action(
    agent: MolmoWebAgent, action: Action, written: dict[str, object]
) -> None:
    assert json.loads(agent.render("t", [action], SIZE))["action"] == written


def test_released_executor_cannot_right_click_so_render_refuses_to() -> None:
    with pytest.raises(ValueError, match="clicks the left button only"):
        make_agent("molmoweb").render("t", [Click(x=1, y=1, button="right")], SIZE)


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ([], "molmoweb writes one action per response, got 0"),
        ([Click(x=1, y=1), Click(x=2, y=2)], "molmoweb writes one action per response, got 2"),
        ([Hotkey(keys=("ctrl", "z"))], "molmoweb can only press Enter, Escape"),
        ([KeyDown(key="shift")], "molmoweb cannot express this action"),
        ([Search(query="x")], "molmoweb cannot express this action"),
        ([Memorize(fact="x")], "molmoweb cannot express this action"),
        ([Click(x=1, y=1, count=3)], "molmoweb cannot express this action"),
    ],
)
def test_render_refuses_what_the_grammar_cannot_say(
    agent: MolmoWebAgent, actions: list[Action], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("?", r"\?")):
        agent.render("t", actions, SIZE)


_X = st.floats(1, 1278, allow_nan=False)
_Y = st.floats(1, 718, allow_nan=False)
_TEXT = st.text(max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    action=st.one_of(
        st.builds(
            Click,
            x=_X,
            y=_Y,
            button=st.sampled_from(["left", "right", "middle"]),
            count=st.sampled_from([1, 2]),
        ),
        st.builds(Drag, x=_X, y=_Y, x2=_X, y2=_Y),
        st.builds(
            Scroll,
            direction=st.sampled_from(["up", "down", "left", "right"]),
            amount=st.floats(1, 2000),
            unit=st.just("px"),
        ),
        st.builds(TypeText, text=_TEXT),
        st.builds(Goto, url=_TEXT.filter(bool)),
        st.builds(Finish, answer=_TEXT),
    ),
    thought=_TEXT,
)
def test_render_then_parse_gives_the_action_back(
    agent: MolmoWebAgent, action: Action, thought: str
) -> None:
    parsed = agent.parse(agent.render(thought, [action], SIZE), SIZE)
    assert parsed.thought == thought
    (back,) = parsed.actions
    assert type(back) is type(action)
    for name, tolerance in (("x", 6.41), ("y", 3.61), ("x2", 6.41), ("y2", 3.61)):
        if getattr(action, name, None) is not None:
            assert abs(getattr(back, name) - getattr(action, name)) <= tolerance
    if isinstance(action, Scroll):
        assert isinstance(back, Scroll) and back.direction == action.direction
        side = 1280 if action.direction in ("left", "right") else 720
        assert abs(back.amount - action.amount) <= side / 2000 + 0.1
    elif isinstance(action, TypeText | Goto | Finish):
        assert back == type(action)(
            **{f: getattr(action, f) for f in action.__struct_fields__ if f != "raw"}, raw=back.raw
        )


_NAMES = [
    "click",
    "dblclick",
    "mouse_click",
    "hover_at",
    "drag_and_drop",
    "mouse_drag_and_drop",
    "scroll",
    "scroll_at",
    "type",
    "keyboard_type",
    "keypress",
    "keyboard_press",
    "gemini_type_text_at",
    "goto",
    "browser_nav",
    "noop",
    "send_msg_to_user",
    "report_infeasible",
    "zoom",
]
_FIELDS = [
    "x",
    "y",
    "from_x",
    "from_y",
    "to_x",
    "to_y",
    "delta_x",
    "delta_y",
    "button",
    "click_type",
    "duration",
    "text",
    "key",
    "press_enter",
    "clear_before_typing",
    "url",
    "nav_type",
    "index",
    "noop_reason",
    "msg",
    "infeasibility_reason",
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_ACTION = st.fixed_dictionaries(
    {"name": st.sampled_from(_NAMES)}, optional={f: _JSON | st.floats(-200, 1200) for f in _FIELDS}
)


@settings(max_examples=600, deadline=None)
@given(
    body=st.one_of(
        st.text(max_size=200),
        st.text(alphabet=string.printable, max_size=200),
        _JSON.map(json.dumps),
        _ACTION.map(json.dumps),
        st.builds(lambda a, t: json.dumps({"thought": t, "action": a}), _ACTION, _JSON),
    ),
    size=st.tuples(st.integers(-5, 3000), st.integers(-5, 3000)),
)
@pytest.mark.slow
def test_no_input_raises_anything_but_a_parse_error(
    agent: MolmoWebAgent, body: str, size: tuple[int, int]
) -> None:
    try:
        parsed = agent.parse(body, size)
    except AgentParseError as error:
        assert "\n" not in str(error)
        return
    assert parsed.actions
    for action in parsed.actions:
        agent.translate(action)
        for name in ("x", "y", "x2", "y2"):
            value = getattr(action, name, None)
            if value is not None:
                side = size[0] if name.startswith("x") else size[1]
                assert 1.0 <= value <= side - 2
    agent.ending(parsed, [])


def test_huge_and_deep_responses_are_refused_quickly(agent: MolmoWebAgent) -> None:
    with pytest.raises(AgentParseError, match="response too long"):
        agent.parse('{"name": "click", "x": 1, "pad": "' + "a" * 40_000 + '"}', SIZE)
    deep = "[" * 15_000 + "]" * 15_000
    assert isinstance(agent.parse(deep, SIZE).actions[0], Rejected)  # released: a no-op
    with pytest.raises(AgentParseError, match="nested too deeply"):
        make_agent("molmoweb", resample_non_json=True).parse(deep, SIZE)
    with pytest.raises(AgentParseError, match="x is not a number"):
        agent.parse('{"name": "click", "x": ' + "9" * 400 + ', "y": 1}', SIZE)


def test_model_text_is_never_run(agent: MolmoWebAgent, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payloads = [
        f"__import__('pathlib').Path({str(marker)!r}).touch()",
        json.dumps({"name": "goto", "url": f"__import__('os').system('touch {marker}')"}),
        json.dumps({"name": "keyboard_type", "text": "{{ ''.__class__.__mro__ }}"}),
    ]
    for text in payloads:
        try:
            agent.parse(text, SIZE)
        except AgentParseError:
            pass
    # The template renders model text as data, never as Jinja.
    from ownloop.agents.base import Observation, PastStep
    from ownloop.store.events import ImagePart, Task

    parsed = agent.parse(payloads[2], SIZE)
    shot = ImagePart(sha256="0" * 64, width=1280, height=720)
    prompt = agent.prompt(
        Task(task_id="t", prompt="{{ 7 * 7 }}", start_url="http://x/"),
        [PastStep(Observation(0, shot, ""), payloads[2], parsed)],
        Observation(1, shot, "http://x/{{ 1 + 1 }}", "{% raw %}"),
    )
    assert "{{ 7 * 7 }}" in prompt and "{{ ''.__class__.__mro__ }}" in prompt
    assert "http://x/{{ 1 + 1 }}" in prompt and "{% raw %}" in prompt
    assert not marker.exists()
