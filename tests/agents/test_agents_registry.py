"""make_agent, options, settings, the end of an episode, and the agents' public names."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import ownloop.agents
from ownloop.agents import AGENTS, agent_options, make_agent
from ownloop.agents.base import Agent, Ending, Parsed
from ownloop.agents.coordinates import smart_resize
from ownloop.agents.uitars import UiTarsAgent
from ownloop.errors import OwnloopError
from ownloop.store.events import CallUser, Click, Fail, Finish, Sampling, Wait


def test_make_agent_gives_a_configured_uitars() -> None:
    agent = make_agent("uitars", frequency_penalty=1, max_tokens=1000, viewport="1920x1080")
    assert isinstance(agent, UiTarsAgent)
    assert agent.settings.viewport == (1920, 1080)
    assert agent.settings.sampling == Sampling(
        temperature=0.0, top_p=0.9, max_tokens=1000, frequency_penalty=1.0
    )


def test_uitars_defaults_follow_the_design() -> None:
    agent: Agent = make_agent("uitars")
    settings = agent.settings
    assert settings.viewport == (1280, 800)
    assert settings.sampling == Sampling(
        temperature=0.0, top_p=0.9, max_tokens=500, frequency_penalty=0.0
    )
    assert (settings.images, settings.calls_per_step, settings.resample_temperature) == (5, 4, 1.0)
    assert settings.max_steps == 40
    assert agent.options() == {
        "viewport": "1280x800",
        "task_text": "wrapped",
        "off_page": "chromium",
        "frequency_penalty": 0.0,
        "max_tokens": 500,
        "images": 5,
        "scroll_notches": 5.0,
        "notch_px": 100.0,
        "drag_steps": 20,
        "wait_s": 5.0,
        "language": "English",
    }
    version = importlib.metadata.version("ui-tars")
    assert (agent.name, agent.parser_name) == ("uitars", "uitars")
    assert agent.parser_version == f"ui-tars {version}/ownloop 1"
    assert agent.prompt_source == f"package:ui-tars {version}"


def test_unknown_agent_is_one_line_listing_the_agents() -> None:
    with pytest.raises(OwnloopError) as caught:
        make_agent("gpt-99")
    assert str(caught.value) == (
        "unknown agent 'gpt-99'. Choose one of: "
        "fara7b, glmv, holo, molmoweb, opencua, pyautogui, qwen3vl, uitars"
    )


def test_unknown_option_lists_the_options() -> None:
    with pytest.raises(OwnloopError) as caught:
        make_agent("uitars", temprature=0.5)
    assert str(caught.value) == (
        "agent 'uitars' has no option 'temprature'. Its options: viewport, task_text, off_page, "
        "frequency_penalty, max_tokens, images, scroll_notches, notch_px, drag_steps, wait_s, "
        "language. See: ownloop agents uitars"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"images": 0}, "uitars: images must be a whole number >= 1, got 0"),
        ({"viewport": "wide"}, "uitars: viewport must look like 1280x800, got 'wide'"),
        ({"viewport": (0, 800)}, "uitars: viewport must be positive, got '0x800'"),
        ({"drag_steps": 0}, "uitars: drag_steps must be a whole number >= 1, got 0"),
        ({"notch_px": -1}, "uitars: notch_px must be a number > 0.0, got -1"),
        ({"frequency_penalty": 3}, "uitars: frequency_penalty must be a number <= 2.0, got 3"),
        ({"images": "3.5"}, "uitars: images must be a whole number, got '3.5'"),
        ({"max_tokens": None}, "uitars: max_tokens must be a whole number, got None"),
        ({"images": "abc"}, "uitars: images must be a whole number, got 'abc'"),
        ({"images": 2.5}, "uitars: images must be a whole number, got 2.5"),
        ({"images": True}, "uitars: images must be a whole number, got True"),
        ({"wait_s": float("nan")}, "uitars: wait_s must be a number >= 0.0, got nan"),
        ({"viewport": (1280,)}, "uitars: viewport must look like 1280x800, got (1280,)"),
        ({"language": ""}, "uitars: language must be text of length >= 1, got ''"),
    ],
)
def test_bad_option_values(options: dict[str, object], message: str) -> None:
    with pytest.raises(OwnloopError) as caught:
        make_agent("uitars", **options)
    assert str(caught.value) == message


def test_options_from_the_command_line_are_read() -> None:
    # `-o images=3 -o viewport=1440X900 -o notch_px=50` arrive as text; the Struct reads them.
    agent = make_agent("uitars", images="3", viewport="1440X900", notch_px="50", wait_s=2)
    assert agent.options()["viewport"] == "1440x900"
    assert (agent.settings.images, agent.options()["notch_px"], agent.options()["wait_s"]) == (
        3,
        50.0,
        2.0,
    )
    assert make_agent("uitars", viewport=[1024, 768]).settings.viewport == (1024, 768)


def test_agent_options_lists_defaults() -> None:
    assert agent_options("uitars")["images"] == 5
    assert set(AGENTS) == {
        "uitars",
        "opencua",
        "fara7b",
        "molmoweb",
        "qwen3vl",
        "holo",
        "glmv",
        "pyautogui",
    }


@pytest.mark.parametrize(
    ("actions", "ending"),
    [
        ((Click(x=1, y=1),), None),
        ((Wait(),), None),
        ((Finish(answer="$23.99"),), Ending("finished", "finished", "$23.99")),
        ((Click(x=1, y=1), Finish()), Ending("finished", "finished", None)),
        ((CallUser(),), Ending("call_user", "call_user", None)),
        ((Fail(),), Ending("fail", "fail", None)),
    ],
)
def test_ending(actions: tuple, ending: Ending | None) -> None:  # type: ignore[type-arg]
    assert UiTarsAgent().ending(Parsed(actions=actions), []) == ending


@pytest.mark.parametrize(
    ("size", "model"),
    [
        ((1280, 720), (1288, 728)),
        ((1440, 900), (1428, 896)),
        ((1920, 1080), (1932, 1092)),
        ((1366, 768), (1372, 756)),
        ((1280, 800), (1288, 812)),
        ((1024, 768), (1036, 756)),
        ((1522, 1022), (1512, 1008)),  # UI-TARS-desktop #1730: Python rounding, not JS
    ],
)
def test_smart_resize_table(size: tuple[int, int], model: tuple[int, int]) -> None:
    assert smart_resize(size) == model


@pytest.mark.parametrize(
    "module",
    [
        "ownloop.agents",
        "ownloop.agents.base",
        "ownloop.agents.keys",
        "ownloop.agents.coordinates",
        "ownloop.agents.translation",
        "ownloop.agents.uitars",
        "ownloop.agents.options",
    ],
)
def test_public_names_are_listed(module: str) -> None:
    mod = importlib.import_module(module)
    assert all(hasattr(mod, name) for name in mod.__all__)
    public = {
        name
        for name, value in vars(mod).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module
    }
    assert public <= set(mod.__all__)


def test_agents_import_nothing_of_ours_but_the_store() -> None:
    for module in ["base", "keys", "coordinates", "translation", "uitars", "options"]:
        source = importlib.import_module(f"ownloop.agents.{module}").__file__
        assert source is not None
        text = Path(source).read_text(encoding="utf-8")
        for other in ("recorder", "replay", "grading", "cli", "modelserver"):
            assert f"ownloop.{other}" not in text, (module, other)
    assert ownloop.agents.__all__
