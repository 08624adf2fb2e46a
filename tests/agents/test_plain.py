"""The ``pyautogui`` agent (OSWorld's baseline PromptAgent): raw responses in, actions out, and
the request it builds. No browser, no network."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ownloop.agents import make_agent
from ownloop.agents.base import AgentParseError, Observation, PastStep
from ownloop.agents.plain import PlainAgent, code_actions
from ownloop.store.events import (
    Click,
    Fail,
    Finish,
    Hotkey,
    ImagePart,
    Rejected,
    Task,
    TextPart,
    TypeText,
    Wait,
)

SIZE = (1920, 1080)


@pytest.fixture
def agent() -> PlainAgent:
    made = make_agent("pyautogui")
    assert isinstance(made, PlainAgent)
    return made


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("DONE", ["DONE"]),
        ("  FAIL \n", ["FAIL"]),
        ("ok\n```WAIT```", ["WAIT"]),
        ("```python\npyautogui.click(1, 2)\n```", ["pyautogui.click(1, 2)"]),
        # every ';' is a line break first, as the released parser makes it
        (
            "```python\npyautogui.click(1, 2); pyautogui.press('a')\n```",
            ["pyautogui.click(1, 2)\npyautogui.press('a')"],
        ),
        # a block ending with a special code gives the code, then the special code
        ("```python\npyautogui.press('enter')\nDONE\n```", ["pyautogui.press('enter')", "DONE"]),
        ("```code\nDONE\n```", ["DONE"]),
        ("```python\na()\n```\nthen\n```python\nb()\n```", ["a()", "b()"]),
        ("no code at all", []),
    ],
)
def test_code_actions_read_as_the_released_parser(text: str, codes: list[str]) -> None:
    assert code_actions(text) == codes


def test_pixels_in_order_and_the_reflection_as_thought(agent: PlainAgent) -> None:
    parsed = agent.parse(
        "The field is empty.\n```python\npyautogui.click(300, 200)\n"
        "pyautogui.write('Ada')\npyautogui.press('enter')\n```",
        SIZE,
    )
    assert parsed.thought == "The field is empty."
    click, typed, enter = parsed.actions
    assert isinstance(click, Click) and (click.x, click.y) == (300.0, 200.0)
    assert isinstance(typed, TypeText) and typed.text == "Ada"
    assert isinstance(enter, Hotkey) and enter.keys == ("enter",)


def test_done_and_fail_end_the_episode_and_nothing_after_them_runs(agent: PlainAgent) -> None:
    parsed = agent.parse(
        "```python\npyautogui.click(5, 5)\n```\n```DONE```\n```python\npyautogui.click(9, 9)\n```",
        SIZE,
    )
    assert [type(a) for a in parsed.actions] == [Click, Finish]
    ending = agent.ending(parsed, [])
    assert ending is not None and ending.status == "finished" and ending.answer is None
    failed = agent.parse("FAIL", SIZE)
    assert [type(a) for a in failed.actions] == [Fail] and failed.thought == ""
    assert agent.ending(failed, []) is not None
    waited = agent.parse("```WAIT```", SIZE)
    assert waited.actions == (Wait(seconds=0.0, raw="WAIT"),)


def test_a_semicolon_in_a_string_breaks_it_as_in_osworld(agent: PlainAgent) -> None:
    with pytest.raises(AgentParseError, match="not Python"):
        agent.parse("```python\npyautogui.write('a;b')\n```", SIZE)


def test_code_outside_the_whitelist_never_runs(agent: PlainAgent) -> None:
    parsed = agent.parse(
        "```python\npyautogui.click(1, 1)\nimport os\nos.system('touch /tmp/pwned')\n```", SIZE
    )
    assert isinstance(parsed.actions[0], Click) and isinstance(parsed.actions[-1], Rejected)
    opencua = agent.parse("```python\ncomputer.terminate(status='success')\n```", SIZE)
    assert isinstance(opencua.actions[-1], Rejected)
    assert "is not pyautogui" in opencua.actions[-1].reason
    with pytest.raises(AgentParseError, match="no code block"):
        agent.parse("I will click the button.", SIZE)


def test_the_request_holds_the_task_the_last_three_steps_and_the_screenshot(
    agent: PlainAgent, shot: Callable[..., ImagePart], past_steps: Callable[[int], list[PastStep]]
) -> None:
    task = Task(task_id="t", prompt="Open the file.", start_url="about:blank")
    history = past_steps(5)
    messages = agent.build_messages(task, history, Observation(5, shot(5), "about:blank"))
    system = messages[0]
    assert system.role == "system"
    assert isinstance(system.parts[0], TextPart)
    assert system.parts[0].text.endswith(
        "You are asked to complete the following task: " + agent.task_text(task)
    )
    roles = [m.role for m in messages[1:]]
    assert roles == ["user", "assistant"] * 3 + ["user"]
    images = [p for m in messages for p in m.parts if isinstance(p, ImagePart)]
    assert images == [shot(2), shot(3), shot(4), shot(5)]
    said = [m.parts[0] for m in messages if m.role == "assistant"]
    assert [p.text for p in said if isinstance(p, TextPart)] == [
        history[i].response for i in (2, 3, 4)
    ]
    assert agent.settings.sampling.temperature == 1.0 and agent.settings.max_steps == 15


def test_render_reads_back(agent: PlainAgent) -> None:
    actions = [Click(x=12, y=34), TypeText(text="hi there")]
    back = agent.parse(agent.render("thinking", actions, SIZE), SIZE).actions
    assert [(type(a), getattr(a, "x", None)) for a in back] == [(Click, 12.0), (TypeText, None)]
    assert agent.parse(agent.render("", [Finish()], SIZE), SIZE).actions[0] == Finish(raw="DONE")
    with pytest.raises(ValueError, match="';'"):
        agent.render("", [TypeText(text="a;b")], SIZE)
