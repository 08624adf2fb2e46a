"""Fara-7B's request (system per turn, [image, task], raw assistant turns, [image, URL], 3 images),
its settings and options, the end of an episode, and the released prompt read from a clone."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import ownloop.agents.fara7b as fara_module
from ownloop.agents import agent_options, make_agent
from ownloop.agents.base import Ending, Observation, Parsed, PastStep
from ownloop.agents.fara7b import Fara7bAgent, page_url, visit_target
from ownloop.agents.fara_prompt import BUILTIN_TEMPLATE, tool_schema
from ownloop.store.errors import OwnloopError
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

pytestmark = pytest.mark.filterwarnings("ignore:fara7b")

TASK = Task(task_id="click-button-42", prompt="Click the button labelled OK.",
            start_url="http://127.0.0.1:8000/miniwob/click-button.html?seed=42")
STATEMENT = ("You are interacting with a web application at "
             "http://127.0.0.1:8000/miniwob/click-button.html?seed=42. "
             "Your task: Click the button labelled OK.")
NEXT = "Here is the next screenshot. Think about what to do next."


def _shot(i: int) -> ImagePart:
    return ImagePart(sha256=f"{i:064x}", width=1440, height=900)


def _obs(i: int) -> Observation:
    return Observation(step=i, screenshot=_shot(i), url=f"http://site.test/p{i}?secret=1")


def _history(n: int) -> list[PastStep]:
    return [PastStep(_obs(i), f"thought {i}\n<tool_call>\n{{}}\n</tool_call>", Parsed())
            for i in range(n)]


def _layout(messages: tuple[Message, ...]) -> list[str]:
    return [f"{m.role}:" + "+".join("image" if isinstance(p, ImagePart) else "text"
                                    for p in m.parts) for m in messages]


def _images(messages: tuple[Message, ...]) -> list[int]:
    return [int(p.sha256, 16) for m in messages for p in m.parts if isinstance(p, ImagePart)]


@pytest.fixture(scope="module")
def fara() -> Fara7bAgent:
    return Fara7bAgent(released="")


def test_first_request_is_system_then_screenshot_and_task(fara: Fara7bAgent) -> None:
    messages = fara.build_messages(TASK, [], _obs(0))
    assert _layout(messages) == ["system:text", "user:image+text"]
    system = messages[0].parts[0]
    assert isinstance(system, TextPart)
    tools = json.dumps(tool_schema(1428, 896), ensure_ascii=False)
    assert system.text == ("You are a helpful assistant.\n\n"
                           + BUILTIN_TEMPLATE.format(tool_descs=tools))
    assert "1428x896" in system.text and '{"name": <function-name>, "arguments"' in system.text
    assert messages[1].parts == (_shot(0), TextPart(text=STATEMENT))


@pytest.mark.parametrize(
    ("past", "layout", "images"),
    [
        (1, ["system:text", "user:image+text", "assistant:text", "user:image+text"], [0, 1]),
        (2, ["system:text", "user:image+text", "assistant:text", "user:image+text",
             "assistant:text", "user:image+text"], [0, 1, 2]),
        # The task turn keeps its text; the turn of screenshot 1 is dropped whole.
        (3, ["system:text", "user:text", "assistant:text", "user:image+text", "assistant:text",
             "user:image+text", "assistant:text", "user:image+text"], [1, 2, 3]),
        (5, ["system:text", "user:text", "assistant:text", "assistant:text", "assistant:text",
             "user:image+text", "assistant:text", "user:image+text", "assistant:text",
             "user:image+text"], [3, 4, 5]),
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
    agent = Fara7bAgent(released="", images=5)
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
        "viewport": "1440x900", "images": 3, "max_tokens": None, "pause": 3.0,
        "scroll_px": 400.0, "wait_s": 3.0,
        "search_url": "https://www.bing.com/search?q={query}&FORM=QBLH", "released": "",
    }
    assert agent_options("fara7b")["pause"] == 3.0
    assert (fara.name, fara.parser_name, fara.parser_version) == ("fara7b", "fara7b", "ownloop 1")


def test_options_from_the_command_line() -> None:
    agent = make_agent("fara7b", pause=0, max_tokens=800, search_url="https://s.test/?q={query}",
                       released="")
    assert agent.settings.pause_s == 0.0
    assert agent.settings.sampling == Sampling(temperature=0.0, max_tokens=800)
    parsed = agent.parse('<tool_call>\n{"name": "computer_use", "arguments": '
                         '{"action": "web_search", "query": "a b"}}\n</tool_call>', (1440, 900))
    assert agent.translate(parsed.actions[0])[0].url == "https://s.test/?q=a+b"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"images": 0}, "fara7b: images must be at least 1 (the current screenshot)"),
        ({"pause": -1}, "fara7b: pause and wait_s must not be negative"),
        ({"scroll_px": 0}, "fara7b: scroll_px must be positive"),
        ({"search_url": "https://s.test/"},
         "fara7b: search_url must contain {query}, e.g. https://duckduckgo.com/?q={query}"),
        ({"search_url": "https://s.test/{query}{x}"},
         "fara7b: search_url may hold no placeholder but {query}"),
        ({"max_tokens": 0}, "fara7b: max_tokens must be at least 1"),
        ({"viewport": "big"}, "fara7b: viewport must look like 1280x800, got 'big'"),
    ],
)
def test_bad_options(options: dict[str, object], message: str) -> None:
    with pytest.raises(OwnloopError) as caught:
        make_agent("fara7b", released="", **options)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("actions", "ending"),
    [
        ((Click(x=1, y=1),), None),
        ((Wait(seconds=0),), None),
        ((Finish(answer="5533 W Sunset Blvd"),),
         Ending("finished", "terminate:success", "5533 W Sunset Blvd")),
        ((Fail(reason="blocked"),), Ending("fail", "terminate:failure", "blocked")),
    ],
)
def test_ending(fara: Fara7bAgent, actions: tuple, ending: Ending | None) -> None:  # type: ignore[type-arg]
    assert fara.ending(Parsed(actions=actions), []) == ending


# ---------------------------------------------------------------------- released prompt

STAND_IN = '''
"""A stand-in for microsoft/fara's fncall_prompt.py, written by the test."""
import json  # never imported by ownloop: the file is only read

FN_CALL_TEMPLATE_QWEN = """# Tools {tool_descs}"""

FN_CALL_TEMPLATE = """STAND-IN TEMPLATE.
<tools>
{tool_descs}
</tools>
""" + """<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""

raise SystemExit("this module must never run")
'''


def _clone(root: Path, text: str = STAND_IN) -> Path:
    module = root / "fara" / "src" / "fara" / "qwen_helpers" / "fncall_prompt.py"
    module.parent.mkdir(parents=True)
    module.write_text(text, encoding="utf-8")
    return module


def test_released_template_is_read_from_the_clone(tmp_path: Path) -> None:
    module = _clone(tmp_path)
    agent = make_agent("fara7b", released=f"{tmp_path / 'nothing'}:{tmp_path / 'fara'}")
    assert agent.prompt_source == f"released:{module.resolve()}"
    system = agent.build_messages(TASK, [], _obs(0))[0].parts[0]
    assert isinstance(system, TextPart)
    assert system.text.startswith("You are a helpful assistant.\n\nSTAND-IN TEMPLATE.\n<tools>\n"
                                  '{"type": "function", "function": {"name": "computer_use"')
    assert system.text.endswith('</tools>\n<tool_call>\n{"name": <function-name>, "arguments": '
                                "<args-json-object>}\n</tool_call>")


def test_released_comes_from_ownloop_path_too(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    module = _clone(tmp_path)
    monkeypatch.setenv("OWNLOOP_PATH", str(tmp_path / "fara"))
    assert make_agent("fara7b").prompt_source == f"released:{module.resolve()}"


def test_without_a_clone_the_prompt_is_built_in_and_warns_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fara_module, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = make_agent("fara7b", released=str(tmp_path))
        second = make_agent("fara7b", released=str(tmp_path))
    assert first.prompt_source == second.prompt_source == "built-in"
    assert [str(w.message) for w in caught] == [
        "fara7b: microsoft/fara not found under --released/$OWNLOOP_PATH; using ownloop's "
        "built-in prompt"]


def test_a_template_with_other_placeholders_is_a_one_line_error(tmp_path: Path) -> None:
    module = _clone(tmp_path, 'FN_CALL_TEMPLATE = "{tool_descs} {language}"\n')
    with pytest.raises(OwnloopError) as caught:
        make_agent("fara7b", released=str(tmp_path / "fara"))
    assert str(caught.value) == (f"fara7b: {module.resolve()} has a FN_CALL_TEMPLATE with a "
                                 "placeholder other than {tool_descs}: KeyError('language')")
