"""The agents: per-model prompt building, parsing, coordinate mapping and translation.

``make_agent("uitars", frequency_penalty=1)`` gives an ``Agent`` (see ``base.py``). Each agent
module is imported only when it is made, so the CLI starts without loading model packages.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ownloop.agents.base import Agent, AgentParseError
from ownloop.store.errors import OwnloopError

__all__ = ["AGENTS", "Agent", "AgentParseError", "agent_options", "make_agent"]


def _uitars() -> Callable[..., Agent]:
    from ownloop.agents.uitars import UiTarsAgent

    return UiTarsAgent


def _fara7b() -> Callable[..., Agent]:
    from ownloop.agents.fara7b import Fara7bAgent

    return Fara7bAgent


def _molmoweb() -> Callable[..., Agent]:
    from ownloop.agents.molmoweb import MolmoWebAgent

    return MolmoWebAgent


def _opencua() -> Callable[..., Agent]:
    from ownloop.agents.opencua import OpenCuaAgent

    return OpenCuaAgent


AGENTS: dict[str, Callable[[], Callable[..., Agent]]] = {
    "molmoweb": _molmoweb,
    "uitars": _uitars,
    "opencua": _opencua,
    "fara7b": _fara7b,
}
"""Agent name → a function returning the agent's class (imported on demand)."""


def _factory(name: str) -> Callable[..., Agent]:
    if name not in AGENTS:
        raise OwnloopError(f"unknown agent {name!r}. Choose one of: {', '.join(sorted(AGENTS))}")
    return AGENTS[name]()


def agent_options(name: str) -> dict[str, object]:
    """The options an agent accepts, with their defaults.

    Raises:
        OwnloopError: the agent is unknown.
    """
    signature = inspect.signature(_factory(name))
    return {
        key: param.default
        for key, param in signature.parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    }


def make_agent(name: str, **options: object) -> Agent:
    """The agent called ``name``, configured with ``options``.

    Args:
        name: one of ``AGENTS``, e.g. ``"uitars"``.
        **options: the agent's own options (see ``agent_options(name)``), e.g. ``images=3``.

    Raises:
        OwnloopError: the agent is unknown, an option is unknown, or a value is out of range.
    """
    factory = _factory(name)
    known = agent_options(name)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise OwnloopError(
            f"agent {name!r} has no option {unknown[0]!r}. Its options: {', '.join(known)}"
        )
    return factory(**options)
