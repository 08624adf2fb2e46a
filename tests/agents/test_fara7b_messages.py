"""Fara-7B's request (system per turn, [image, task], raw assistant turns, [image, URL], 3 images),
its settings and options, the end of an episode, and the released prompt read from a clone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownloop.agents import agent_options, make_agent
from ownloop.agents.base import Ending, Observation, Parsed, PastStep
from ownloop.agents.fara7b import Fara7bAgent, page_url, visit_target
from ownloop.agents.fara_prompt import (
    ACTIONS,
    BUILTIN_TEMPLATE,
    load_fara_texts,
    read_tool_texts,
    tool_schema,
)
from ownloop.errors import OwnloopError
from ownloop.store.events import (
    Click,
    Fail,
    Finish,
    Goto,
    ImagePart,
    Message,
    Sampling,
    Search,
    Task,
    TextPart,
    Wait,
)

TASK = Task(
    task_id="click-button-42",
    prompt="Click the button labelled OK.",
    start_url="http://127.0.0.1:8000/miniwob/click-button.html?seed=42",
)
STATEMENT = (
    "You are interacting with a web application at "
    "http://127.0.0.1:8000/miniwob/click-button.html?seed=42. "
    "Your task: Click the button labelled OK."
)
NEXT = "Here is the next screenshot. Think about what to do next."


def _shot(i: int) -> ImagePart:
    return ImagePart(sha256=f"{i:064x}", width=1440, height=900)


def _obs(i: int) -> Observation:
    return Observation(step=i, screenshot=_shot(i), url=f"http://site.test/p{i}?secret=1")


def _history(n: int) -> list[PastStep]:
    return [
        PastStep(_obs(i), f"thought {i}\n<tool_call>\n{{}}\n</tool_call>", Parsed())
        for i in range(n)
    ]


def _layout(messages: tuple[Message, ...]) -> list[str]:
    return [
        f"{m.role}:" + "+".join("image" if isinstance(p, ImagePart) else "text" for p in m.parts)
        for m in messages
    ]


def _images(messages: tuple[Message, ...]) -> list[int]:
    return [int(p.sha256, 16) for m in messages for p in m.parts if isinstance(p, ImagePart)]


@pytest.fixture(scope="module")
def fara() -> Fara7bAgent:
    return Fara7bAgent()


def test_first_request_is_system_then_screenshot_and_task(fara: Fara7bAgent) -> None:
    messages = fara.build_messages(TASK, [], _obs(0))
    assert _layout(messages) == ["system:text", "user:image+text"]
    system = messages[0].parts[0]
    assert isinstance(system, TextPart)
    tools = json.dumps(tool_schema(1428, 896), ensure_ascii=False)
    assert system.text == (
        "You are a helpful assistant.\n\n" + BUILTIN_TEMPLATE.format(tool_descs=tools)
    )
    assert "1428x896" in system.text and '{"name": <function-name>, "arguments"' in system.text
    assert messages[1].parts == (_shot(0), TextPart(text=STATEMENT))


@pytest.mark.parametrize(
    ("past", "layout", "images"),
    [
        (1, ["system:text", "user:image+text", "assistant:text", "user:image+text"], [0, 1]),
        (
            2,
            [
                "system:text",
                "user:image+text",
                "assistant:text",
                "user:image+text",
                "assistant:text",
                "user:image+text",
            ],
            [0, 1, 2],
        ),
        # The task turn keeps its text; the turn of screenshot 1 is dropped whole.
        (
            3,
            [
                "system:text",
                "user:text",
                "assistant:text",
                "user:image+text",
                "assistant:text",
                "user:image+text",
                "assistant:text",
                "user:image+text",
            ],
            [1, 2, 3],
        ),
        (
            5,
            [
                "system:text",
                "user:text",
                "assistant:text",
                "assistant:text",
                "assistant:text",
                "user:image+text",
                "assistant:text",
                "user:image+text",
                "assistant:text",
                "user:image+text",
            ],
            [3, 4, 5],
        ),
    ],
)
def test_only_the_last_three_screenshots_and_every_response(
    fara: Fara7bAgent, past: int, layout: list[str], images: list[int]
) -> None:
    history = _history(past)
    messages = fara.build_messages(TASK, history, _obs(past))
    assert _layout(messages) == layout
    assert _images(messages) == images
    assistant = [m.parts[0] for m in messages if m.role == "assistant"]
    assert assistant == [TextPart(text=h.response) for h in history]  # verbatim
    assert messages[1].parts[-1] == TextPart(text=STATEMENT)
    last = messages[-1].parts
    assert last == (_shot(past), TextPart(text=f"Current URL: http://site.test/p{past}\n{NEXT}"))


def test_images_option_widens_the_window() -> None:
    agent = make_agent("fara7b", images=5)
    messages = agent.build_messages(TASK, _history(6), _obs(6))
    assert _images(messages) == [2, 3, 4, 5, 6]


def test_system_message_follows_the_screenshot_size(fara: Fara7bAgent) -> None:
    small = Observation(0, ImagePart(sha256="0" * 64, width=1280, height=720), "about:blank")
    text = fara.build_messages(TASK, [], small)[0].parts[0]
    assert isinstance(text, TextPart) and "1288x728 pixels" in text.text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://www.bing.com/search?q=abc&FORM=QBLH", "https://www.bing.com/search"),
        ("https://a.test/" + "x" * 120, "https://a.test/" + "x" * 85 + " ..."),
        ("https://a.test/" + "x" * 85, "https://a.test/" + "x" * 85),
        ("about:blank", "about:blank"),
    ],
)
def test_page_url_drops_the_query_and_trims_to_100(url: str, shown: str) -> None:
    assert page_url(url) == shown


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("https://a.test/x", Goto(url="https://a.test/x")),
        ("http://a.test", Goto(url="http://a.test")),
        ("file:///tmp/a.html", Goto(url="file:///tmp/a.html")),
        ("about:blank", Goto(url="about:blank")),
        ("example.com/a b", Search(query="example.com/a b")),
        ("example.com", Goto(url="https://example.com")),
        ("HTTPS://A.TEST", Goto(url="https://HTTPS://A.TEST")),  # released: case-sensitive
    ],
)
def test_visit_url_rules(url: str, target: Goto | Search) -> None:
    assert visit_target(url) == target


def test_settings_follow_the_released_harness(fara: Fara7bAgent) -> None:
    settings = fara.settings
    assert settings.viewport == (1440, 900)
    assert settings.sampling == Sampling(temperature=0.0)
    assert (settings.images, settings.calls_per_step, settings.resample_temperature) == (3, 1, None)
    assert (settings.pause_s, settings.error_retries) == (3.0, 5)
    assert fara.options() == {
        "viewport": "1440x900",
        "task_text": "wrapped",
        "off_page": "chromium",
        "images": 3,
        "max_tokens": None,
        "pause": 3.0,
        "scroll_px": 400.0,
        "wait_s": 3.0,
        "search_url": "https://www.bing.com/search?q={query}&FORM=QBLH",
        "resize_screenshot": True,
        "type_none": True,
    }
    assert agent_options("fara7b")["pause"] == 3.0
    assert (fara.name, fara.parser_name, fara.parser_version) == ("fara7b", "fara7b", "ownloop 1")


def test_options_from_the_command_line() -> None:
    agent = make_agent("fara7b", pause=0, max_tokens=800, search_url="https://s.test/?q={query}")
    assert agent.settings.pause_s == 0.0
    assert agent.settings.sampling == Sampling(temperature=0.0, max_tokens=800)
    parsed = agent.parse(
        '<tool_call>\n{"name": "computer_use", "arguments": '
        '{"action": "web_search", "query": "a b"}}\n</tool_call>',
        (1440, 900),
    )
    assert agent.translate(parsed.actions[0])[0].url == "https://s.test/?q=a+b"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"images": 0}, "fara7b: images must be a whole number >= 1, got 0"),
        ({"pause": -1}, "fara7b: pause must be a number >= 0.0, got -1"),
        ({"scroll_px": 0}, "fara7b: scroll_px must be a number > 0.0, got 0"),
        (
            {"search_url": "https://s.test/"},
            "fara7b: search_url must contain {query}, e.g. https://duckduckgo.com/?q={query}",
        ),
        (
            {"search_url": "https://s.test/{query}{x}"},
            "fara7b: search_url may hold no placeholder but {query}",
        ),
        ({"max_tokens": 0}, "fara7b: max_tokens must be a whole number >= 1, got 0"),
        ({"type_none": "maybe"}, "fara7b: type_none must be true or false, got 'maybe'"),
        ({"viewport": "big"}, "fara7b: viewport must look like 1280x800, got 'big'"),
    ],
)
def test_bad_options(options: dict[str, object], message: str) -> None:
    with pytest.raises(OwnloopError) as caught:
        make_agent("fara7b", **options)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("actions", "ending"),
    [
        ((Click(x=1, y=1),), None),
        ((Wait(seconds=0),), None),
        (
            (Finish(answer="5533 W Sunset Blvd"),),
            Ending("finished", "terminate:success", "5533 W Sunset Blvd"),
        ),
        ((Fail(reason="blocked"),), Ending("fail", "terminate:failure", "blocked")),
    ],
)
def test_ending(fara: Fara7bAgent, actions: tuple, ending: Ending | None) -> None:  # type: ignore[type-arg]
    assert fara.ending(Parsed(actions=actions), []) == ending


# ---------------------------------------------------------------------- released prompt

CLONE = Path(__file__).parent / "fara_clone"  # a stand-in for microsoft/fara, in its own words
FNCALL = (CLONE / "src/fara/qwen_helpers/fncall_prompt.py").resolve()
PROMPTS = (CLONE / "src/fara/_prompts.py").resolve()


def _system(agent: Fara7bAgent) -> str:
    part = agent.build_messages(TASK, [], _obs(0))[0].parts[0]
    assert isinstance(part, TextPart)
    return part.text


def _tool(system: str) -> dict:  # type: ignore[type-arg]
    return json.loads(system.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0])


def test_the_clone_gives_the_template_and_every_tool_text(tmp_path: Path) -> None:
    texts = load_fara_texts(f"{tmp_path / 'nothing'}:{CLONE}")
    agent = make_agent("fara7b", released=texts)
    assert agent.prompt_source == f"released:{FNCALL}, {PROMPTS}"
    system = _system(agent)
    assert system.startswith("You are a helpful assistant.\n\nSTAND-IN TEMPLATE.\n<tools>\n")
    function = _tool(system)["function"]
    # The f-string's fields become the model's size; its doubled braces stay single braces.
    assert function["description"] == "STAND-IN TOOL. Screen: 1428 by 896; braces {kept}."
    properties = function["parameters"]["properties"]
    assert properties["action"]["description"] == "STAND-IN action list."
    assert properties["press_enter"]["description"] == "stand-in press_enter"
    assert all(spec["description"].lower().startswith("stand-in") for spec in properties.values())
    # The schema itself (actions, types, enums) is ownloop's, whatever the clone's says.
    assert properties["action"]["enum"] == list(ACTIONS)
    assert properties["status"]["enum"] == ["success", "failure"]


def test_without_a_clone_the_wording_is_ownloops(fara: Fara7bAgent) -> None:
    assert fara.prompt_source == "built-in"
    system = _system(fara)
    assert system.startswith("You are a helpful assistant.\n\n" + BUILTIN_TEMPLATE[:40])
    assert _tool(system) == tool_schema(1428, 896)
    assert "STAND-IN" not in system


def test_rendered_requests_differ_only_in_the_wording() -> None:
    built_in = _tool(_system(make_agent("fara7b")))
    released = _tool(_system(make_agent("fara7b", released=load_fara_texts(str(CLONE)))))
    assert built_in != released

    def shape(tool: dict) -> dict:  # type: ignore[type-arg]
        function = dict(tool["function"], description="")
        function["parameters"] = dict(
            function["parameters"],
            properties={
                name: dict(spec, description="")
                for name, spec in function["parameters"]["properties"].items()
            },
        )
        return dict(tool, function=function)

    assert shape(built_in) == shape(released)


def test_a_clone_with_only_the_template_says_the_tool_text_is_built_in(tmp_path: Path) -> None:
    module = tmp_path / "fara" / "src" / "fara" / "qwen_helpers" / "fncall_prompt.py"
    module.parent.mkdir(parents=True)
    module.write_text(FNCALL.read_text(encoding="utf-8"), encoding="utf-8")
    texts = load_fara_texts(str(tmp_path / "fara"))
    agent = make_agent("fara7b", released=texts)
    assert agent.prompt_source == f"released:{module.resolve()} (tool text built-in)"
    system = _system(agent)
    assert "STAND-IN TEMPLATE." in system and _tool(system) == tool_schema(1428, 896)


def test_no_clone_under_the_roots_gives_no_texts(tmp_path: Path) -> None:
    assert load_fara_texts(str(tmp_path)) is None
    assert load_fara_texts("") is None


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("x = 1\n", "no class with name = 'computer_use'"),
        (
            "class T:\n    name = 'computer_use'\n    @property\n    def description(self):\n"
            "        return f'{self.other}'\n",
            "its description is not an f-string naming only the display size",
        ),
        (
            "class T:\n    name = 'computer_use'\n    @property\n    def description(self):\n"
            "        return 'd'\n    parameters = {'properties': {'action': {'description': "
            "'a'}}}\n",
            "no description for keys, text, press_enter, delete_existing_text, coordinate, pixels, "
            "url, query, fact, time, status",
        ),
        ("def (:\n", "it does not parse as Python"),
    ],
)
def test_a_tool_file_it_cannot_read_says_why(source: str, reason: str) -> None:
    assert read_tool_texts(source) == reason


def test_an_unreadable_tool_file_is_a_one_line_error(tmp_path: Path) -> None:
    module = tmp_path / "src" / "fara" / "_prompts.py"
    module.parent.mkdir(parents=True)
    module.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(OwnloopError) as caught:
        load_fara_texts(str(tmp_path))
    assert str(caught.value) == (
        f"fara7b: {module.resolve()}: no class with name = "
        "'computer_use'. Point --released at an unmodified clone of "
        "microsoft/fara"
    )


def test_a_template_with_other_placeholders_is_a_one_line_error(tmp_path: Path) -> None:
    module = tmp_path / "fara" / "qwen_helpers" / "fncall_prompt.py"
    module.parent.mkdir(parents=True)
    module.write_text('FN_CALL_TEMPLATE = "{tool_descs} {language}"\n', encoding="utf-8")
    with pytest.raises(OwnloopError) as caught:
        make_agent("fara7b", released=load_fara_texts(str(tmp_path / "fara")))
    assert str(caught.value) == (
        f"fara7b: {module.resolve()} (tool text built-in) has a "
        "FN_CALL_TEMPLATE with a placeholder other than {tool_descs}: "
        "KeyError('language')"
    )
