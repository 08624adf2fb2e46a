"""Fixtures for agent tests: strings in, actions and messages out. No browser, no network."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ownloop.agents import make_agent
from ownloop.agents.base import Observation, Parsed, PastStep
from ownloop.agents.uitars import UiTarsAgent
from ownloop.store.events import ImagePart, Task


@pytest.fixture
def uitars() -> UiTarsAgent:
    agent = make_agent("uitars")
    assert isinstance(agent, UiTarsAgent)
    return agent


@pytest.fixture
def task() -> Task:
    return Task(
        task_id="click-button-42",
        prompt="Click the button labelled OK.",
        start_url="http://127.0.0.1:8000/miniwob/click-button.html?seed=42",
        suite="miniwob",
        seed=42,
    )


def _shot(step: int, size: tuple[int, int] = (1280, 800)) -> ImagePart:
    return ImagePart(sha256=f"{step:064x}", width=size[0], height=size[1])


@pytest.fixture
def shot() -> Callable[..., ImagePart]:
    """``shot(step, size=(1280, 800))``: a distinct screenshot reference per step."""
    return _shot


@pytest.fixture
def past_steps() -> Callable[[int], list[PastStep]]:
    """``past_steps(n)``: n earlier steps, each with its own screenshot and a click response."""

    def make(count: int) -> list[PastStep]:
        return [
            PastStep(
                observation=Observation(step=i, screenshot=_shot(i), url="http://x/"),
                response=f"Thought: step {i}\nAction: click(start_box='({i},{i + 1})')",
                parsed=Parsed(),
            )
            for i in range(count)
        ]

    return make
