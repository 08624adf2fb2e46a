"""Every stored reply of the three newer agents (qwen3vl, holo, glmv; issue 31) → actions.

Page 1280x720. qwen3vl (relative) and glmv read a 0-999 grid as ``int(v * side / 999)``; holo
reads [0, 1000] as ``v * side / 1000``; qwen3vl absolute reads the resized image (1280x704).
One file per odd reply under tests/agents/replies/<agent>/; every stored file is exercised.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ownloop.agents import AGENTS, make_agent
from ownloop.agents.base import AgentParseError, Ending, Parsed
from ownloop.agents.frames import FRAMES
from ownloop.store.events import (
    Action,
    Back,
    Click,
    Drag,
    Fail,
    Finish,
    Goto,
    Hotkey,
    Memorize,
    Move,
    Scroll,
    TypeText,
    Wait,
)

REPLIES = Path(__file__).parent / "replies"
VIEW = (1280, 720)


def _bare(parsed: Parsed) -> list[Action]:
    fields = ("raw", "model_x", "model_y", "model_x2", "model_y2")
    return [
        msgspec.structs.replace(
            action,
            **{name: ("" if name == "raw" else None) for name in fields if hasattr(action, name)},
        )
        for action in parsed.actions
    ]


def _read(agent: str, name: str) -> str:
    return (REPLIES / agent / name).read_text(encoding="utf-8")


GOOD: dict[str, dict[str, list[Action]]] = {
    "qwen3vl": {
        "click.txt": [Click(x=640.0, y=360.0)],
        "think_then_call.txt": [Click(x=640.0, y=360.0)],
        "bare_json_line.txt": [Click(x=1280.0, y=0.0, count=2)],
        "move_then_drag.txt": [
            Move(x=128.0, y=72.0),
            Drag(x=128.0, y=72.0, x2=1153.0, y2=72.0),
        ],
        "click_at_pointer.txt": [Move(x=320.0, y=540.0), Click(x=320.0, y=540.0, button="right")],
        "scroll_at_point.txt": [Scroll(direction="down", amount=5.0, x=640.0, y=360.0)],
        "hscroll_huge.txt": [Scroll(direction="right", amount=50.0)],
        "key_combo.txt": [Hotkey(keys=("ctrl", "a"))],
        "answer_then_terminate.txt": [Memorize(fact="$23.99"), Finish()],
        "terminate_failure.txt": [Fail()],
        "no_closing_tag.txt": [TypeText(text="hello\nworld")],
    },
    "holo": {
        "click.txt": [Click(x=640.0, y=180.0)],
        "think_click.txt": [Click(x=1280.0, y=0.0)],
        "write.txt": [Click(x=128.0, y=36.0), TypeText(text="Seattle")],
        "scroll.txt": [Scroll(direction="down", amount=5.0)],
        "go_back.txt": [Back()],
        "fenced.txt": [Back()],
        "goto.txt": [Goto(url="https://example.com/a")],
        "wait.txt": [Wait(seconds=2.0)],
        "answer.txt": [Finish(answer="The price is $3.")],
    },
    "glmv": {
        "box_click.txt": [Click(x=640.0, y=360.0)],
        "think_answer.txt": [Click(x=128.0, y=144.0, count=2)],
        "plain_call.txt": [Click(x=1280.0, y=720.0, button="right")],
        "list_box.txt": [Move(x=320.0, y=180.0)],
        "drag.txt": [Drag(x=128.0, y=72.0, x2=1153.0, y2=72.0)],
        "key_combo.txt": [Hotkey(keys=("ctrl", "a"))],
        "type_quotes.txt": [TypeText(text="it's (1) done")],
        "scroll_no_box.txt": [Scroll(direction="down", amount=3.0, x=640.0, y=360.0)],
        "wait.txt": [Wait(seconds=5.0)],
        "done.txt": [Finish(answer="The answer is 42.")],
        "fail.txt": [Fail(reason="The site is down.")],
    },
}

BAD: dict[str, dict[str, str]] = {
    "qwen3vl": {
        "bad_no_tool_call.txt": "no <tool_call> in the response",
        "bad_not_json.txt": "the tool call is not JSON",
        "bad_other_function.txt": "the tool call is not a computer_use call",
        "bad_drag_no_pointer.txt": "left_click_drag starts at the pointer, which is nowhere yet",
        "bad_unknown_action.txt": "unknown action 'zoom'",
        "bad_unknown_key.txt": "key: unknown key 'Hyper'",
    },
    "holo": {
        "bad_x_out_of_range.txt": r"holo: action\.x must be a number in \[0, 1000\], got 1001",
        "bad_missing_y.txt": r"holo: action\.y must be a number in \[0, 1000\], got None",
        "bad_direction.txt": r"holo: action\.direction must be up, down, left or right",
        "bad_not_json.txt": "holo: the response is not a JSON object",
        "bad_unknown_action.txt": r"holo: action\.action 'hover' is not in the schema",
        "bad_action_not_object.txt": "holo: action must be an object",
        "bad_content_not_text.txt": r"holo: action\.content must be text",
        "bad_refresh.txt": "holo: refresh is not in ownloop's holo action space",
    },
    "glmv": {
        "bad_no_call.txt": "no GLM action call",
        "bad_positional.txt": "glmv: left_click takes keyword arguments only",
        "bad_no_box.txt": r"glmv: left_click needs start_box='\[x,y\]'",
        "bad_unknown_key.txt": "glmv: unknown key 'hyper'",
        "bad_not_literal.txt": "glmv: type's content is not a literal",
        "bad_scroll_direction.txt": "glmv: scroll needs direction 'up' or 'down', got 'left'",
    },
}


@pytest.mark.parametrize(
    ("agent", "name"), [(agent, name) for agent, files in GOOD.items() for name in files]
)
def test_a_stored_reply_parses_to_its_actions(agent: str, name: str) -> None:
    parsed = make_agent(agent, viewport="1280x720").parse(_read(agent, name), VIEW, ())
    assert _bare(parsed) == GOOD[agent][name]


@pytest.mark.parametrize(
    ("agent", "name"), [(agent, name) for agent, files in BAD.items() for name in files]
)
def test_a_bad_reply_is_a_one_line_parse_error(agent: str, name: str) -> None:
    with pytest.raises(AgentParseError, match=BAD[agent][name]) as caught:
        make_agent(agent, viewport="1280x720").parse(_read(agent, name), VIEW, ())
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("agent", sorted(GOOD))
def test_every_stored_reply_is_tested(agent: str) -> None:
    stored = {path.name for path in (REPLIES / agent).glob("*.txt")}
    assert stored == set(GOOD[agent]) | set(BAD[agent])


def test_qwen3vl_absolute_mode_reads_the_resized_image() -> None:
    agent = make_agent("qwen3vl", mode="absolute", viewport="1280x720")
    assert agent.sent_image_size(VIEW) == (1280, 704)  # smart_resize, factor 32
    text = _read("qwen3vl", "click.txt").replace("[500, 500]", "[640, 352]")
    assert _bare(agent.parse(text, VIEW, ())) == [Click(x=640.0, y=360.0)]
    assert "The screen's resolution is 1280x704." in agent.system_message(VIEW)
    relative = make_agent("qwen3vl")
    assert "The screen's resolution is 1000x1000." in relative.system_message(VIEW)
    assert (agent.coordinate_frame, relative.coordinate_frame) == ("smart-resize", "relative-999")


def test_the_answer_given_before_terminate_is_the_episodes() -> None:
    agent = make_agent("qwen3vl")
    parsed = agent.parse(_read("qwen3vl", "answer_then_terminate.txt"), VIEW, ())
    assert agent.ending(parsed, ()) == Ending("finished", "terminate:success", "$23.99")
    failed = agent.parse(_read("qwen3vl", "terminate_failure.txt"), VIEW, ())
    assert agent.ending(failed, ()) == Ending("fail", "terminate:failure", None)


def test_thinking_is_the_thought_and_every_agent_names_its_frame() -> None:
    holo = make_agent("holo", thinking=True)
    parsed = holo.parse(_read("holo", "think_click.txt"), VIEW, ())
    assert parsed.thought == "The Submit button is near the top.\nClick it."
    assert "<think>" in holo.system_message()
    assert "<think>" not in make_agent("holo").system_message()
    for name in AGENTS:
        assert make_agent(name).coordinate_frame in FRAMES, name
