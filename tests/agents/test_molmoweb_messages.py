"""MolmoWeb's request: one user turn, the prompt with the goal, the last steps as text, the page.

The expected prompts are written out here by hand from the released template's layout
(agent-formats.md §4), so a change in rendering (Jinja's whitespace control, the dict repr of
past actions, the 10-step window, the step numbers) fails a test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownloop.agents import make_agent
from ownloop.agents.base import Observation, PastStep
from ownloop.agents.molmoweb import MolmoWebAgent
from ownloop.agents.released import Released, load_released
from ownloop.errors import OwnloopError
from ownloop.store.events import ImagePart, Sampling, Task, TextPart

pytestmark = pytest.mark.filterwarnings("ignore:molmoweb. no clone")

TASK = Task(
    task_id="click-button-42",
    prompt="Click the button labelled OK.",
    start_url="http://127.0.0.1:8000/miniwob/click-button.html?seed=42",
)
GOAL = (
    "You are interacting with a web application at "
    "http://127.0.0.1:8000/miniwob/click-button.html?seed=42. "
    "Your task: Click the button labelled OK."
)


def shot(step: int) -> ImagePart:
    return ImagePart(sha256=f"{step:064x}", width=1280, height=720)


def now(
    step: int, url: str = "http://127.0.0.1:8000/p", title: str = "Click Button"
) -> Observation:
    return Observation(step, shot(step), url, title)


def agent(tmp_path: Path, **options: object) -> MolmoWebAgent:
    made = make_agent("molmoweb", **options)
    assert isinstance(made, MolmoWebAgent)
    return made


def past(agent_: MolmoWebAgent, step: int, response: str) -> PastStep:
    return PastStep(now(step), response, agent_.parse(response, (1280, 720)))


def click_reply(i: int) -> str:
    return json.dumps(
        {"thought": f"step {i}", "action": {"name": "click", "x": float(i), "y": 50.0}}
    )


def test_defaults_follow_the_design(tmp_path: Path) -> None:
    a = agent(tmp_path)
    s = a.settings
    assert s.viewport == (1280, 720)
    assert s.sampling == Sampling(temperature=0.7, top_p=0.8, max_tokens=1024)
    assert (s.images, s.calls_per_step, s.resample_temperature, s.stop_only) == (1, 2, None, False)
    assert (s.pause_s, s.error_retries, s.max_steps) == (0.0, 0, 40)
    assert a.options() == {
        "viewport": "1280x720",
        "task_text": "wrapped",
        "off_page": "chromium",
        "history": 10,
        "temperature": 0.7,
        "top_p": 0.8,
        "max_tokens": 1024,
        "calls_per_step": 2,
        "end_on_answer": True,
        "image_first": True,
        "system_message": "molmo_web_think",
        "noop_s": 5.0,
        "resample_non_json": False,
        "honour_button": False,
    }
    assert (a.name, a.parser_name, a.parser_version, a.prompt_source) == (
        "molmoweb",
        "molmoweb",
        "ownloop 1",
        "built-in",
    )
    # Recorded options make the same agent again (re-parse and replays rely on it).
    assert make_agent("molmoweb", **a.options()).options() == a.options()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"history": 0}, "molmoweb: history must be a whole number >= 1, got 0"),
        ({"top_p": 0}, "molmoweb: top_p must be a number > 0.0, got 0"),
        ({"temperature": "hot"}, "molmoweb: temperature must be a number, got 'hot'"),
        ({"end_on_answer": "yes"}, "molmoweb: end_on_answer must be true or false, got 'yes'"),
        ({"viewport": "big"}, "molmoweb: viewport must look like 1280x800, got 'big'"),
        ({"calls_per_step": 0}, "molmoweb: calls_per_step must be a whole number >= 1, got 0"),
        ({"system_message": " "}, "molmoweb: system_message must be a word, e.g. molmo_web_think"),
    ],
)
def test_bad_options_are_one_line_errors(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(OwnloopError) as caught:
        agent(tmp_path, **options)
    assert str(caught.value) == message


def test_first_step_is_one_user_turn_with_the_screenshot_then_the_prompt(tmp_path: Path) -> None:
    messages = agent(tmp_path).build_messages(TASK, [], now(0))
    assert len(messages) == 1 and messages[0].role == "user"
    image, text = messages[0].parts
    assert image == shot(0)
    assert isinstance(text, TextPart)
    assert text.text == (
        f"molmo_web_think: \n# GOAL\n{GOAL}\n\n# PREVIOUS STEPS\n\n"
        "# CURRENTLY ACTIVE PAGE\nPage 0: Click Button | http://127.0.0.1:8000/p\n\n"
        "# NEXT STEP\n"
    )


def test_image_first_false_puts_the_text_first(tmp_path: Path) -> None:
    (message,) = agent(tmp_path, image_first=False).build_messages(TASK, [], now(0))
    assert isinstance(message.parts[0], TextPart) and message.parts[1] == shot(0)


def test_past_actions_are_the_model_dicts_in_python_repr(tmp_path: Path) -> None:
    a = agent(tmp_path)
    history = [
        past(
            a,
            0,
            '{"thought": "Click it.", "action": {"name": "click", "x": 81.4, "y": 6,'
            ' "button": "left", "click_type": "single"}}',
        ),
        past(
            a,
            1,
            '{"thought": "Fill \\"it\'s\\".", "action": {"name": "gemini_type_text_at",'
            ' "x": 500, "y": 255, "text": "it\'s", "press_enter": false}}',
        ),
        past(a, 2, '{"name": "noop"}'),
        past(
            a,
            3,
            json.dumps(
                {"thought": "Tell.", "action": {"name": "send_msg_to_user", "msg": "x" * 1200}},
                ensure_ascii=False,
            ),
        ),
    ]
    text = a.prompt(TASK, history, now(4))
    assert text.split("# PREVIOUS STEPS\n")[1].split("\n# CURRENTLY")[0] == (
        "## Step 1\nTHOUGHT: Click it.\n"
        "ACTION: {'name': 'click', 'x': 81.4, 'y': 6, 'button': 'left', 'click_type': 'single'}\n"
        '## Step 2\nTHOUGHT: Fill "it\'s".\n'
        "ACTION: {'name': 'gemini_type_text_at', 'x': 50.0, 'y': 25.5, 'text': \"it's\", "
        "'press_enter': False}\n"
        "## Step 3\nTHOUGHT: \nACTION: {'name': 'noop'}\n"
        "## Step 4\nTHOUGHT: Tell.\n"
        f"ACTION: {{'name': 'send_msg_to_user', 'msg': '{'x' * 985}... (truncated)'}}\n"
    )


def test_only_the_last_ten_steps_are_shown_numbered_over_the_episode(tmp_path: Path) -> None:
    a = agent(tmp_path)
    history = [past(a, i, click_reply(i)) for i in range(12)]
    messages = a.build_messages(TASK, history, now(12))
    text = messages[0].parts[1]
    assert isinstance(text, TextPart)
    headings = [line for line in text.text.splitlines() if line.startswith("## Step ")]
    assert headings == [f"## Step {n}" for n in range(3, 13)]
    assert "THOUGHT: step 2\n" in text.text and "THOUGHT: step 1\n" not in text.text
    assert "ACTION: {'name': 'click', 'x': 11.0, 'y': 50.0}\n" in text.text
    images = [p for m in messages for p in m.parts if isinstance(p, ImagePart)]
    assert images == [shot(12)]  # no past screenshots


def test_history_option_shows_three_steps(tmp_path: Path) -> None:
    a = agent(tmp_path, history=3)
    text = a.prompt(TASK, [past(a, i, click_reply(i)) for i in range(5)], now(5))
    assert [ln for ln in text.splitlines() if ln.startswith("## Step")] == [
        "## Step 3",
        "## Step 4",
        "## Step 5",
    ]


def test_a_past_response_it_cannot_read_is_shown_as_the_released_agent_keeps_it(
    tmp_path: Path,
) -> None:
    a = agent(tmp_path)
    ok = past(a, 0, click_reply(0))
    odd = PastStep(now(1), "Sure! I will click OK.", ok.parsed)
    text = a.prompt(TASK, [odd], now(2))
    assert (
        "## Step 1\nTHOUGHT: Could not parse predicted action: Expecting "
        "value: line 1 column 1 (char 0)\nACTION: {'name': 'report_infeasible', "
        "'infeasibility_reason': 'Unparseable model output: Sure! I will click OK.'}\n"
    ) in text


def test_page_title_and_url_are_cut_to_100_characters(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8000/" + "a" * 200
    text = agent(tmp_path).prompt(TASK, [], now(0, url=url, title="T" * 101))
    assert f"Page 0: {'T' * 85}... (truncated) | {url[:85]}... (truncated)\n" in text


def test_system_message_option_changes_the_prefix(tmp_path: Path) -> None:
    text = agent(tmp_path, system_message="molmo_web_base").prompt(TASK, [], now(0))
    assert text.startswith("molmo_web_base: \n# GOAL\n")


# ---------------------------------------------------------------------- released prompt


def _texts(roots: str) -> Released | None:
    assert MolmoWebAgent.released_spec is not None
    return load_released(MolmoWebAgent.released_spec, roots)


def _clone(root: Path, body: str) -> Path:
    module = root / "agent" / "multimodal_agent.py"
    module.parent.mkdir(parents=True)
    module.write_text(body, encoding="utf-8")
    return module


STAND_IN = '''
import not_installed_anywhere  # the clone is read, never imported
from jinja2 import Template

USER_MSG_TEMPLATE = Template(
    """Made-up goal: {{ task_description }}
{% for action in past_actions: -%}
<{{ action['index'] }}|{{ action['thought'] }}|{{ action['action'] }}>
{% endfor %}page {{ page_index }} {{ page_title }} {{ page_url }}
"""
)
'''


def test_released_template_is_read_from_the_clone_and_rendered(tmp_path: Path) -> None:
    module = _clone(tmp_path / "molmoweb", STAND_IN)
    a = make_agent("molmoweb", released=_texts(f"{tmp_path / 'elsewhere'}:{tmp_path / 'molmoweb'}"))
    assert isinstance(a, MolmoWebAgent)
    assert a.prompt_source == f"released:{module.resolve()}"
    text = a.prompt(TASK, [past(a, 0, click_reply(7))], now(1, title="Title"))
    assert text == (
        f"molmo_web_think: Made-up goal: {GOAL}\n"
        "<1|step 7|{'name': 'click', 'x': 7.0, 'y': 50.0}>\n"
        "page 0 Title http://127.0.0.1:8000/p"
    )


def test_released_folder_may_be_the_module_folder_itself(tmp_path: Path) -> None:
    module = _clone(tmp_path, 'USER_MSG_TEMPLATE = "only {{ task_description }}"\n')
    a = make_agent("molmoweb", released=_texts(str(module.parent)))
    assert a.prompt_source == f"released:{module.resolve()}"
    assert isinstance(a, MolmoWebAgent)
    assert a.prompt(TASK, [], now(0)) == f"molmo_web_think: only {GOAL}"


def test_a_clone_without_the_template_falls_back_to_built_in(tmp_path: Path) -> None:
    _clone(tmp_path, "USER_MSG_TEMPLATE = make_template()\n")
    texts = _texts(str(tmp_path))
    assert texts is None
    assert make_agent("molmoweb", released=texts).prompt_source == "built-in"


def test_a_broken_released_template_is_a_one_line_error(tmp_path: Path) -> None:
    module = _clone(tmp_path, 'USER_MSG_TEMPLATE = "{% for x in %}"\n')
    with pytest.raises(OwnloopError) as caught:
        make_agent("molmoweb", released=_texts(str(tmp_path)))
    message = str(caught.value)
    assert message.startswith(
        f"molmoweb: the prompt template in released:{module.resolve()} is not valid Jinja ("
    )
    assert message.endswith("Point --released at an unmodified clone of allenai/molmoweb")
    assert "\n" not in message
