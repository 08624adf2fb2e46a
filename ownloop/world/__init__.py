"""Worlds: what an agent acts on, behind the one small interface the episode loop uses.

The browser (``ownloop.world.browser_world.BrowserWorld``, over Playwright) and the desktop
(:mod:`ownloop.world.desktop`, over the OSWorld in-VM server protocol) both offer it: take a
screenshot, turn an agent-neutral action into the world's operations, execute one operation
(what was sent, the answer, the duration), settle, capture end-state evidence, and let the
session's suite prepare the world for a task and capture its own evidence at the end. The loop
never asks which world it runs in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ownloop.errors import OwnloopError
from ownloop.store.events import Action, Dialog, Element, Op
from ownloop.world.evidence import Evidence

if TYPE_CHECKING:
    from ownloop.agents.base import Agent
    from ownloop.store.events import SessionEnded, Task

__all__ = ["Effect", "Evidence", "Screen", "World", "WorldLost"]


class WorldLost(OwnloopError):
    """The world stopped answering mid-task (a desktop's server is gone): the session ends
    ``env_error`` and the run goes on with the other tasks."""


class Screen(NamedTuple):
    """One screenshot: the lossless PNG stored and sent, its size, the page's URL ("" on a
    desktop) and how long the capture took."""

    png: bytes
    width: int
    height: int
    url: str
    capture_ms: float
    a11y: bytes | None = None  # a desktop's accessibility tree (XML) at the same moment


class Effect(NamedTuple):
    """What one executed operation did; becomes a ``BrowserActed`` event. The browser fills
    the first nine fields; a desktop also the command it sent and its server's answer."""

    ok: bool
    error: str | None
    url_before: str
    url_after: str
    element: Element | None
    pages_opened: int
    dialog: Dialog | None
    download: bytes | None
    duration_ms: float
    command: str = ""
    http_status: int | None = None
    returncode: int | None = None
    output: str = ""
    guest_error: str = ""


class World(Protocol):
    """What the episode loop needs from a world (DESIGN §11)."""

    def screenshot(self) -> Screen:
        """The current screen, as the agent will see it."""
        ...

    def title(self) -> str:
        """The page's title for prompts that show it; "" where there is none."""
        ...

    def translate(self, agent: Agent, action: Action) -> tuple[Op, ...]:
        """The world's operations that carry out one parsed action (none: refused)."""
        ...

    def execute(self, op: Op) -> Effect:
        """Carry out one operation and say what it did; never raises for the agent's op."""
        ...

    def settle(self, *, download_grace: bool = True) -> bytes | None:
        """Let the world settle after a step; a download that came only now, if any."""
        ...

    def late_refusal(self) -> str | None:
        """A refusal of the step's operations noticed only while settling, if any."""
        ...

    def prepare(self, suite: Any, task: Task) -> None:
        """Have ``suite`` bring this world to the task's start (setup steps, start page)."""
        ...

    def end_state(self) -> list[Evidence]:
        """The world's own end-state evidence (a page's URL, DOM, HAR; a desktop's a11y)."""
        ...

    def capture(self, suite: Any, task: Task, ended: SessionEnded) -> list[Evidence]:
        """The suite's end-state evidence read from this world (captures, getters), once the
        session has ``ended`` (OSWorld's ``infeasible`` reads how)."""
        ...

    def close(self) -> None:
        """Give the world's resources back (a browser context; a desktop lease)."""
        ...
