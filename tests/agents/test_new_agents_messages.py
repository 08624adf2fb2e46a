"""The requests of qwen3vl, holo and glmv (issue 31): what each step sends, and that the
scripted expert counts the steps taken in each (it answers step k with its plan's k-th step)."""

from __future__ import annotations

from typing import Any

from ownloop.agents import make_agent
from ownloop.agents.base import Observation, PastStep
from ownloop.modelserver.chat import find_task, steps_taken
from ownloop.store.events import Click, ImagePart, Message, Task, TextPart

TASK = Task(task_id="t", prompt="Click OK.", start_url="http://127.0.0.1:1/miniwob/x.html?seed=1")


def _shot(index: int) -> ImagePart:
    return ImagePart(sha256=f"{index:064x}", width=1280, height=720)


def _history(agent_name: str, steps: int) -> list[PastStep]:
    agent = make_agent(agent_name, viewport="1280x720")
    past = []
    for index in range(steps):
        response = agent.render(f"Step {index} thought.", [Click(x=10.0, y=10.0)], (1280, 720))
        parsed = agent.parse(response, (1280, 720), ())
        past.append(PastStep(Observation(index, _shot(index), "http://x/"), response, parsed))
    return past


def _request(messages: tuple[Message, ...]) -> dict[str, Any]:
    """The messages as the OpenAI wire carries them (images as placeholders)."""
    out = []
    for message in messages:
        content = [
            {"type": "text", "text": part.text}
            if isinstance(part, TextPart)
            else {"type": "image_url", "image_url": {"url": "blob"}}
            for part in message.parts
        ]
        out.append({"role": message.role, "content": content})
    return {"messages": out}


def test_qwen3vl_sends_a_window_of_steps_and_lists_the_earlier_ones() -> None:
    agent = make_agent("qwen3vl", viewport="1280x720")
    history = _history("qwen3vl", 6)
    messages = agent.build_messages(TASK, history, Observation(6, _shot(6), "http://x/"))
    roles = [m.role for m in messages]
    assert roles == ["system", *["user", "assistant"] * 4, "user"]
    images = [p for m in messages for p in m.parts if isinstance(p, ImagePart)]
    assert [p.sha256 for p in images] == [f"{i:064x}" for i in (2, 3, 4, 5, 6)]
    first = messages[1].parts[1]
    assert isinstance(first, TextPart)
    assert "Previous actions:\nStep 1: Step 0 thought.\nStep 2: Step 1 thought." in first.text
    assert "Your task: Click OK." in first.text
    request = _request(messages)
    assert steps_taken(request) == 6 and find_task(request) is not None
    bare = make_agent("qwen3vl", task_text="bare").build_messages(
        TASK, (), Observation(0, _shot(0), "http://x/")
    )
    text = bare[1].parts[1]
    assert isinstance(text, TextPart) and "Instruction: Click OK.\n" in text.text


def test_holo_sends_one_screenshot_and_the_steps_as_json() -> None:
    agent = make_agent("holo", viewport="1280x720", history=3)
    history = _history("holo", 6)
    messages = agent.build_messages(TASK, history, Observation(6, _shot(6), "http://x/"))
    assert [m.role for m in messages] == ["system", "user"]
    parts = messages[1].parts
    assert [type(p).__name__ for p in parts] == ["TextPart", "ImagePart"]
    text = parts[0]
    assert isinstance(text, TextPart)
    assert (
        "## Step 4\n" in text.text and "## Step 6\n" in text.text and "## Step 3" not in text.text
    )
    assert steps_taken(_request(messages)) == 6


def test_glmv_sends_the_last_screenshots_and_every_response() -> None:
    agent = make_agent("glmv", viewport="1280x720", images=2)
    history = _history("glmv", 4)
    messages = agent.build_messages(TASK, history, Observation(4, _shot(4), "http://x/"))
    images = [p.sha256 for m in messages for p in m.parts if isinstance(p, ImagePart)]
    assert images == [f"{i:064x}" for i in (3, 4)]
    assert sum(m.role == "assistant" for m in messages) == 4
    assert steps_taken(_request(messages)) == 4
