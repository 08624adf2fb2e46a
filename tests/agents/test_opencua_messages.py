"""The opencua request: system prompt, history as text, 3 images in all, the instruction turn;
released prompt texts read from a clone (a stand-in written here), else the built-in ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownloop.agents import make_agent
from ownloop.agents.base import Observation, Parsed, PastStep, task_text
from ownloop.agents.opencua import OpenCuaAgent
from ownloop.agents.opencua_prompt import BUILTIN
from ownloop.errors import OwnloopError
from ownloop.store.events import ImagePart, Message, Task, TextPart

TASK = Task(task_id="t", prompt="Click OK.", start_url="http://127.0.0.1:1/miniwob/x.html?seed=1")


def shot(step: int) -> ImagePart:
    return ImagePart(sha256=f"{step:064x}", width=1920, height=1080)


def past(count: int) -> list[PastStep]:
    return [
        PastStep(
            Observation(i + 1, shot(i + 1), "http://x/"),
            f"## Thought:\nt{i + 1}\n\n## Action:\nAction {i + 1}.\n\n## Code:\n"
            f"```python\npyautogui.click(x={i + 10}, y=5)\n```",
            Parsed(),
        )
        for i in range(count)
    ]


def agent(**options: object) -> OpenCuaAgent:
    made = make_agent("opencua", **{"pause": 0, **options})
    assert isinstance(made, OpenCuaAgent)
    return made


def layout(messages: tuple[Message, ...]) -> list[tuple[str, list[str]]]:
    """Each message as (role, its parts: 'img:<step>' or the text)."""
    out = []
    for message in messages:
        parts = [
            f"img:{int(p.sha256, 16)}" if isinstance(p, ImagePart) else p.text
            for p in message.parts
        ]  # type: ignore[union-attr]
        out.append((message.role, parts))
    return out


def instruction() -> str:
    return BUILTIN["l2"].instruction.format(instruction=task_text(TASK))


def test_first_step_is_system_then_screenshot_and_instruction() -> None:
    got = layout(agent().build_messages(TASK, [], Observation(1, shot(1), "http://x/")))
    assert got == [("system", [BUILTIN["l2"].system]), ("user", ["img:1", instruction()])]
    assert "Your task: Click OK." in instruction()


def test_history_keeps_two_past_screenshots_and_merges_older_steps() -> None:
    got = layout(agent().build_messages(TASK, past(4), Observation(5, shot(5), "http://x/")))
    assert got == [
        ("system", [BUILTIN["l2"].system]),
        ("assistant", ["# Step 1:\n## Action:\nAction 1.\n\n# Step 2:\n## Action:\nAction 2.\n"]),
        ("user", ["img:3"]),
        ("assistant", ["# Step 3:\n## Action:\nAction 3.\n"]),
        ("user", ["img:4"]),
        ("assistant", ["# Step 4:\n## Action:\nAction 4.\n"]),
        ("user", ["img:5", instruction()]),
    ]


@pytest.mark.parametrize(("steps", "images"), [(0, 1), (1, 2), (2, 3), (3, 3), (9, 3)])
def test_three_images_in_all(steps: int, images: int) -> None:
    messages = agent().build_messages(TASK, past(steps), Observation(9, shot(99), "http://x/"))
    count = sum(isinstance(p, ImagePart) for m in messages for p in m.parts)
    assert count == images
    text = "\n".join(p.text for m in messages for p in m.parts if isinstance(p, TextPart))
    assert "y=5)" not in text  # the code is never shown in the history
    assert [f"# Step {i + 1}:" in text for i in range(steps)] == [True] * steps


def test_images_option_and_one_image() -> None:
    got = layout(agent(images=1).build_messages(TASK, past(2), Observation(3, shot(3), "")))
    assert got[1:] == [
        ("assistant", ["# Step 1:\n## Action:\nAction 1.\n\n# Step 2:\n## Action:\nAction 2.\n"]),
        ("user", ["img:3", instruction()]),
    ]


@pytest.mark.parametrize("cot", ["l1", "l2", "l3"])
def test_cot_levels_pick_their_system_prompt(cot: str) -> None:
    made = agent(cot=cot)
    assert (
        made.build_messages(TASK, [], Observation(1, shot(1), ""))[0].parts[0].text
        == BUILTIN[cot].system
    )
    assert made.options()["cot"] == cot


def test_builtin_prompts_state_the_grammar_and_differ_by_level() -> None:
    l1, l2, l3 = (BUILTIN[c].system for c in ("l1", "l2", "l3"))
    for text in (l1, l2, l3):
        assert "computer.terminate" in text and "computer.triple_click" in text
        assert "```python" in text and "pixels of the screenshot" in text
    assert "Thought:" not in l1 and "Thought:" in l2 and "Observation:" in l3


def test_settings_follow_osworld() -> None:
    made = agent()
    s = made.settings
    assert s.viewport == (1920, 1080) and s.images == 3
    assert (s.sampling.temperature, s.sampling.top_p, s.sampling.max_tokens) == (0.0, 0.9, 2048)
    assert (s.calls_per_step, s.resample_temperature, s.stop_only) == (5, 0.2, True)
    assert s.pause_s == 0.0 and make_agent("opencua").settings.pause_s == 5.0


@pytest.mark.parametrize(
    "options",
    [
        {"cot": "l4"},
        {"images": 0},
        {"pause": -1},
        {"scroll_px": 0},
        {"viewport": "big"},
        {"fractions": "maybe"},
    ],
)
def test_bad_options_are_one_line_errors(options: dict[str, object]) -> None:
    with pytest.raises(OwnloopError, match="^opencua: "):
        agent(**options)


# ---------------------------------------------------------------------- released prompt texts

STAND_IN = '''
import random
SYSTEM_PROMPT_V1_L1 = "stand-in L1 {not a placeholder}".strip()
SYSTEM_PROMPT_V1_L2 = "first L2, overridden".strip()
SYSTEM_PROMPT_V1_L3 = ("stand-in " "L3")
# The second definition wins, as in OSWorld's file.
SYSTEM_PROMPT_V1_L2 = """
stand-in L2 {"name": "computer.terminate"}
""".strip()
STEP_TEMPLATE = "# Step {step_num}:\\n"
INSTRUTION_TEMPLATE = "# Task Instruction:\\n{instruction}\\n\\nStand-in request.\\n"
ACTION_HISTORY_TEMPLATE = "## Action:\\n{action}\\n"
def build_sys_prompt(level):
    raise SystemExit("never run")
'''


def write_clone(root: Path, relative: str = "mm_agents/opencua/prompts.py") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True)
    path.write_text(STAND_IN, encoding="utf-8")
    return path


def test_released_prompts_are_read_from_a_clone(tmp_path: Path) -> None:
    module = write_clone(tmp_path / "OSWorld")
    made = agent(released=f"{tmp_path / 'nothing'}:{tmp_path / 'OSWorld'}")
    assert made.prompt_source == f"released:{module.resolve()}"
    got = layout(made.build_messages(TASK, past(1), Observation(2, shot(2), "")))
    assert got[0] == ("system", ['stand-in L2 {"name": "computer.terminate"}'])
    assert got[-1] == (
        "user",
        ["img:2", f"# Task Instruction:\n{task_text(TASK)}\n\nStand-in request.\n"],
    )
    assert agent(released=str(tmp_path / "OSWorld"), cot="l3").texts.system == "stand-in L3"


def test_released_prompts_also_found_in_an_opencua_folder(tmp_path: Path) -> None:
    module = write_clone(tmp_path, "opencua/prompts.py")
    assert agent(released=str(tmp_path)).prompt_source == f"released:{module.resolve()}"


def test_without_a_clone_the_prompt_is_built_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OWNLOOP_PATH", str(tmp_path))
    made = agent()
    assert made.prompt_source == "built-in"
    assert made.texts == BUILTIN["l2"]


def test_a_released_template_with_other_placeholders_is_refused(tmp_path: Path) -> None:
    path = write_clone(tmp_path)
    path.write_text(STAND_IN.replace("{step_num}", "{step}"), encoding="utf-8")
    with pytest.raises(OwnloopError, match="unexpected placeholder"):
        agent(released=str(tmp_path))
