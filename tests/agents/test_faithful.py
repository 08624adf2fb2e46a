"""Faithful to the released loops by default, each difference a named option (issue 12, 1-5).

Each behaviour is shown on strings twice: the default (what the released client does) and the
option that flips it. The same behaviours through recorded MiniWoB sessions are in
tests/recorder/test_faithful_record.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from ownloop.agents import make_agent
from ownloop.agents.base import AgentParseError, Observation
from ownloop.agents.fara_prompt import load_fara_texts, tool_schema
from ownloop.store.events import (
    Click,
    Hotkey,
    ImagePart,
    MouseClick,
    Rejected,
    Task,
    TextPart,
    TypeText,
)

TASK = Task(task_id="t", prompt="Do it.", start_url="http://127.0.0.1/p")
CLONE = Path(__file__).parent / "fara_clone"


def _fara(body: dict[str, object]) -> str:
    call = json.dumps({"name": "computer_use", "arguments": body})
    return f"I act.\n<tool_call>\n{call}\n</tool_call>"


def _no_raw(actions: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(msgspec.structs.replace(a, raw="") for a in actions)  # type: ignore[type-var]


# ---------------------------------------------------------------------- 1. Fara's tool text


def _tool_json(agent: object) -> dict[str, object]:
    shot = ImagePart(sha256="0" * 64, width=1440, height=900)
    system = agent.build_messages(TASK, [], Observation(0, shot, "about:blank"))[0]  # type: ignore[attr-defined]
    part = system.parts[0]
    assert isinstance(part, TextPart)
    return json.loads(part.text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0])  # type: ignore[no-any-return]


def test_fara_tool_text_is_the_clones_with_released_and_ownloops_without() -> None:
    released = make_agent("fara7b", released=load_fara_texts(str(CLONE)))
    built_in = make_agent("fara7b")
    assert released.prompt_source.startswith("released:") and built_in.prompt_source == "built-in"
    with_clone, without = _tool_json(released), _tool_json(built_in)
    assert with_clone["function"]["description"].startswith("STAND-IN TOOL")  # type: ignore[index]
    assert without == tool_schema(1428, 896)


# ---------------------------------------------------------------------- 2. Fara's screenshot


def test_fara_sends_the_screenshot_at_the_models_size_unless_told_not_to() -> None:
    assert make_agent("fara7b").sent_image_size((1440, 900)) == (1428, 896)  # type: ignore[attr-defined]
    assert make_agent("fara7b").sent_image_size((1280, 720)) == (1288, 728)  # type: ignore[attr-defined]
    original = make_agent("fara7b", resize_screenshot=False)
    assert original.sent_image_size((1440, 900)) == (1440, 900)  # type: ignore[attr-defined]


@pytest.mark.parametrize("resize", [True, False])
def test_fara_maps_coordinates_from_the_models_size_either_way(resize: bool) -> None:
    agent = make_agent("fara7b", resize_screenshot=resize)
    parsed = agent.parse(_fara({"action": "left_click", "coordinate": [1428, 896]}), (1440, 900))
    assert _no_raw(parsed.actions) == (Click(x=1440.0, y=900.0, model_x=1428.0, model_y=896.0),)
    assert parsed.model_size == (1428, 896)


# ---------------------------------------------------------------------- 3. MolmoWeb, not JSON

NOT_JSON = [
    "Sure, I will click the OK button.",
    '{"thought": "Click.", "action": {"name": "click", "x": 5, "y": 5}} and then I stop.',
    '```json\n{"name": "click", "x": 5, "y": 5}\n```',
]


@pytest.mark.parametrize("text", NOT_JSON)
def test_molmoweb_text_that_is_not_json_is_a_no_op_by_default(text: str) -> None:
    agent = make_agent("molmoweb")
    parsed = agent.parse(text, (1280, 720))
    assert parsed.thought.startswith("Could not parse predicted action: ")
    assert parsed.actions == (Rejected(reason=f"Unparseable model output: {text}", raw=text),)
    assert agent.translate(parsed.actions[0]) == ()
    assert agent.ending(parsed, []) is None
    assert agent.settings.calls_per_step == 2  # a re-sample is for refused fields only


@pytest.mark.parametrize("text", NOT_JSON)
def test_molmoweb_resample_non_json_makes_it_a_parse_error(text: str) -> None:
    with pytest.raises(AgentParseError, match="^response is not JSON"):
        make_agent("molmoweb", resample_non_json=True).parse(text, (1280, 720))


# ---------------------------------------------------------------------- 4. MolmoWeb's button

RIGHT = '{"thought": "Menu.", "action": {"name": "click", "x": 50, "y": 50, "button": "right"}}'


def test_molmoweb_clicks_left_whatever_the_button_by_default() -> None:
    agent = make_agent("molmoweb")
    parsed = agent.parse(RIGHT, (1280, 720))
    assert _no_raw(parsed.actions) == (Click(x=640.0, y=360.0, model_x=50.0, model_y=50.0),)
    assert agent.translate(parsed.actions[0]) == (MouseClick(x=640.0, y=360.0),)


def test_molmoweb_honour_button_clicks_the_one_named() -> None:
    agent = make_agent("molmoweb", honour_button=True)
    parsed = agent.parse(RIGHT, (1280, 720))
    assert agent.translate(parsed.actions[0]) == (MouseClick(x=640.0, y=360.0, button="right"),)


def test_molmoweb_refuses_a_button_the_released_class_refuses_either_way() -> None:
    text = RIGHT.replace('"right"', '"back"')
    for agent in (make_agent("molmoweb"), make_agent("molmoweb", honour_button=True)):
        with pytest.raises(AgentParseError, match="button must be left, right or middle"):
            agent.parse(text, (1280, 720))


# ---------------------------------------------------------------------- 5. Fara, type without text


def test_fara_type_without_text_types_none_as_released() -> None:
    parsed = make_agent("fara7b").parse(
        _fara({"action": "type", "coordinate": [714, 448]}), (1440, 900)
    )
    assert _no_raw(parsed.actions) == (
        Click(x=720.0, y=450.0, model_x=714.0, model_y=448.0),
        TypeText(text="None"),
        Hotkey(keys=("Enter",)),
    )


def test_fara_type_none_false_refuses_it() -> None:
    with pytest.raises(AgentParseError, match="^type needs text$"):
        make_agent("fara7b", type_none=False).parse(
            _fara({"action": "type", "coordinate": [714, 448]}), (1440, 900)
        )


def test_fara_type_without_a_coordinate_does_nothing_either_way() -> None:
    for agent in (make_agent("fara7b"), make_agent("fara7b", type_none=False)):
        parsed = agent.parse(_fara({"action": "type"}), (1440, 900))
        assert [type(a).__name__ for a in parsed.actions] == ["Wait"]


# ---------------------------------------------------------------------- 5. OpenCUA, click(1, 1)


def _opencua(code: str) -> str:
    return f"## Thought:\nClick.\n\n## Action:\nClick it.\n\n## Code:\n```python\n{code}\n```"


def test_opencua_reads_a_unit_point_as_a_fraction_by_default() -> None:
    agent = make_agent("opencua")
    corner = agent.parse(_opencua("pyautogui.click(x=1, y=1)"), (1920, 1080))
    assert [(a.x, a.y) for a in corner.actions] == [(1919.0, 1079.0)]  # type: ignore[attr-defined]
    middle = agent.parse(_opencua("pyautogui.click(x=0.5, y=0.25)"), (1920, 1080))
    assert [(a.x, a.y) for a in middle.actions] == [(960.0, 270.0)]  # type: ignore[attr-defined]


def test_opencua_fractions_false_reads_it_as_model_pixels() -> None:
    agent = make_agent("opencua", fractions=False)
    corner = agent.parse(_opencua("pyautogui.click(x=1, y=1)"), (1920, 1080))
    assert [(a.x, a.y) for a in corner.actions] == [(0.0, 0.0)]  # type: ignore[attr-defined]
    far = agent.parse(_opencua("pyautogui.click(x=1932, y=1092)"), (1920, 1080))
    assert [(a.x, a.y) for a in far.actions] == [(1920.0, 1080.0)]  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- the options are recorded


@pytest.mark.parametrize(
    ("agent", "option", "default"),
    [
        ("fara7b", "resize_screenshot", True),
        ("fara7b", "type_none", True),
        ("molmoweb", "resample_non_json", False),
        ("molmoweb", "honour_button", False),
        ("opencua", "fractions", True),
    ],
)
def test_each_option_is_recorded_with_its_released_default(
    agent: str, option: str, default: bool
) -> None:
    assert make_agent(agent).options()[option] is default
    assert make_agent(agent, **{option: str(not default).lower()}).options()[option] is (
        not default
    )
