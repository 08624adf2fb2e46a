"""The browser as a world: a ``BrowserSession`` behind the interface the episode loop uses.

A thin adapter, so ``browser.py`` stays as it is: every call goes to the session unchanged; the
adapter adds what the interface asks beyond it (the agent's own translation of an action into
Playwright operations, the end-state capture, and handing the suite the session).
"""

from __future__ import annotations

from typing import Any

from ownloop.agents.base import Agent
from ownloop.store.events import Action, Op, SessionEnded, Task
from ownloop.world import Effect, Evidence, Screen
from ownloop.world.browser import BrowserSession
from ownloop.world.browser_evidence import capture_end_state

__all__ = ["BrowserWorld"]


class BrowserWorld:
    """A ``BrowserSession`` as a :class:`ownloop.world.World`; ``session`` is the session."""

    def __init__(self, session: BrowserSession) -> None:
        self.session = session

    def screenshot(self) -> Screen:
        return self.session.screenshot()

    def title(self) -> str:
        return self.session.title()

    def translate(self, agent: Agent, action: Action) -> tuple[Op, ...]:
        return agent.translate(action)

    def execute(self, op: Op) -> Effect:
        return self.session.execute(op)

    def settle(self, *, download_grace: bool = True) -> bytes | None:
        return self.session.settle(download_grace=download_grace)

    def late_refusal(self) -> str | None:
        return self.session.late_refusal()

    def prepare(self, suite: Any, task: Task) -> None:
        suite.prepare(self.session, task)

    def end_state(self) -> list[Evidence]:
        return capture_end_state(self.session)

    def capture(self, suite: Any, task: Task, ended: SessionEnded) -> list[Evidence]:
        result: list[Evidence] = suite.capture(self.session, task)
        return result

    def close(self) -> None:
        self.session.close()
