"""The request UI-TARS gets: system, prompt, past responses, at most 5 screenshots in all."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from ui_tars.prompt import COMPUTER_USE_DOUBAO

from ownloop.agents.base import Observation, PastStep
from ownloop.agents.uitars import UiTarsAgent, UiTarsOptions
from ownloop.store.events import ImagePart, Message, Task, TextPart


def _layout(messages: tuple[Message, ...]) -> list[str]:
    """Each message as role:kind, e.g. 'user:image' or 'assistant:text'."""
    return [
        f"{m.role}:" + "+".join("image" if isinstance(p, ImagePart) else "text" for p in m.parts)
        for m in messages
    ]


def _images(messages: tuple[Message, ...]) -> list[str]:
    return [p.sha256 for m in messages for p in m.parts if isinstance(p, ImagePart)]


def test_first_step_is_system_prompt_and_screenshot(
    uitars: UiTarsAgent, task: Task, shot: Callable[..., ImagePart]
) -> None:
    now = Observation(step=0, screenshot=shot(0), url=task.start_url)
    messages = uitars.build_messages(task, [], now)
    assert _layout(messages) == ["system:text", "user:text", "user:image"]
    assert messages[0].parts == (TextPart(text="You are a helpful assistant."),)
    prompt = messages[1].parts[0]
    assert isinstance(prompt, TextPart)
    assert prompt.text == COMPUTER_USE_DOUBAO.format(
        language="English",
        instruction="You are interacting with a web application at "
        "http://127.0.0.1:8000/miniwob/click-button.html?seed=42. "
        "Your task: Click the button labelled OK.",
    )
    assert "## User Instruction\nYou are interacting with a web application at http" in prompt.text
    assert "Use English in `Thought` part." in prompt.text
    assert messages[2].parts == (now.screenshot,)


@pytest.mark.parametrize(
    ("past", "with_images"),
    [(1, [0]), (4, [0, 1, 2, 3]), (5, [1, 2, 3, 4]), (9, [5, 6, 7, 8])],
)
def test_only_the_last_five_screenshots_are_sent(
    uitars: UiTarsAgent,
    task: Task,
    shot: Callable[..., ImagePart],
    past_steps: Callable[[int], list[PastStep]],
    past: int,
    with_images: list[int],
) -> None:
    history = past_steps(past)
    now = Observation(step=past, screenshot=shot(past), url="http://x/")
    messages = uitars.build_messages(task, history, now)
    assert _images(messages) == [shot(i).sha256 for i in [*with_images, past]]
    assert len(_images(messages)) <= 5
    # Every past response stays, in order, each after its own screenshot when it has one.
    expected = ["system:text", "user:text"]
    for i in range(past):
        expected += ["user:image"] * (i in with_images) + ["assistant:text"]
    assert _layout(messages) == [*expected, "user:image"]


def test_history_gets_box_tokens_back(
    uitars: UiTarsAgent,
    task: Task,
    shot: Callable[..., ImagePart],
    past_steps: Callable[[int], list[PastStep]],
) -> None:
    history = past_steps(2)
    messages = uitars.build_messages(task, history, Observation(2, shot(2), "http://x/"))
    replies = [m.parts[0].text for m in messages if m.role == "assistant"]  # type: ignore[union-attr]
    assert replies == [
        "Thought: step 0\nAction: click(start_box='<|box_start|>(0,1)<|box_end|>')",
        "Thought: step 1\nAction: click(start_box='<|box_start|>(1,2)<|box_end|>')",
    ]


def test_history_images_option(
    task: Task, shot: Callable[..., ImagePart], past_steps: Callable[[int], list[PastStep]]
) -> None:
    now = Observation(step=6, screenshot=shot(6), url="http://x/")
    one, three = UiTarsAgent(UiTarsOptions(images=1)), UiTarsAgent(UiTarsOptions(images=3))
    assert _images(one.build_messages(task, past_steps(6), now)) == [shot(6).sha256]
    assert len(_images(three.build_messages(task, past_steps(6), now))) == 3


def test_language_option_reaches_the_prompt(task: Task) -> None:
    agent = UiTarsAgent(UiTarsOptions(language="Chinese"))
    assert "Use Chinese in `Thought` part." in agent.prompt(task)


def test_a_task_with_braces_is_not_a_format_string(uitars: UiTarsAgent, task: Task) -> None:
    odd = msgspec.structs.replace(task, prompt="Type {language} and {0} literally")
    assert "Your task: Type {language} and {0} literally" in uitars.prompt(odd)


def test_messages_encode_with_images_by_reference(
    uitars: UiTarsAgent, task: Task, shot: Callable[..., ImagePart]
) -> None:
    messages = uitars.build_messages(task, [], Observation(0, shot(0), "http://x/"))
    encoded = msgspec.json.encode(messages)
    assert b'"sha256":"' + shot(0).sha256.encode() + b'"' in encoded
    assert b"base64" not in encoded
    assert msgspec.json.decode(encoded, type=tuple[Message, ...]) == messages


def test_on_a_desktop_the_defaults_are_osworlds_and_a_given_option_wins() -> None:
    from ownloop.agents import make_agent, world_agent_options

    desktop = make_agent("uitars", **world_agent_options("uitars", "desktop", {}))
    sampling = desktop.settings.sampling
    assert (sampling.max_tokens, sampling.frequency_penalty) == (1000, 1.0)
    prompt = desktop.prompt(Task(task_id="t", prompt="g", start_url=""))
    assert "- Use Chinese in `Thought` part." in prompt
    given = world_agent_options("uitars", "desktop", {"language": "English", "max_tokens": "700"})
    assert given == {"frequency_penalty": 1.0, "max_tokens": "700", "language": "English"}
    browser = make_agent("uitars", **world_agent_options("uitars", "browser", {}))
    assert (browser.settings.sampling.max_tokens, browser.settings.sampling.frequency_penalty) == (
        500,
        0.0,
    )
