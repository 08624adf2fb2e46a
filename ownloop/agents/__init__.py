"""The agents: per-model prompt building, parsing, coordinate mapping and translation.

``make_agent("uitars", frequency_penalty=1)`` gives an ``Agent`` (see ``base.py``). Each agent
module is imported only when it is made, so the CLI starts without loading model packages.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ownloop.agents.base import Agent, AgentBase, AgentParseError
from ownloop.agents.options import AgentOptions, option_docs, read_options, world_options
from ownloop.agents.released import Released, ReleasedSpec, load_released
from ownloop.errors import OwnloopError

__all__ = [
    "AGENTS",
    "Agent",
    "AgentParseError",
    "agent_options",
    "make_agent",
    "options_type",
    "released_notice",
    "released_spec",
    "released_texts",
    "world_agent_options",
]


AGENTS: dict[str, tuple[str, str]] = {
    "molmoweb": ("molmoweb", "MolmoWebAgent"),
    "uitars": ("uitars", "UiTarsAgent"),
    "opencua": ("opencua", "OpenCuaAgent"),
    "fara7b": ("fara7b", "Fara7bAgent"),
    "qwen3vl": ("qwen3vl", "Qwen3VlAgent"),
    "holo": ("holo", "HoloAgent"),
    "glmv": ("glmv", "GlmvAgent"),
    "pyautogui": ("plain", "PlainAgent"),
}
"""Agent name → its module in ``ownloop.agents`` and its class (imported when first asked for)."""


def _factory(name: str) -> type[AgentBase[Any]]:
    if name not in AGENTS:
        raise OwnloopError(f"unknown agent {name!r}. Choose one of: {', '.join(sorted(AGENTS))}")
    module, cls = AGENTS[name]
    agent: type[AgentBase[Any]] = getattr(import_module(f"ownloop.agents.{module}"), cls)
    return agent


def options_type(name: str) -> type[AgentOptions]:
    """The agent's options Struct: names, types, defaults and meanings of its options.

    Raises:
        OwnloopError: the agent is unknown.
    """
    return _factory(name).options_type


def released_spec(name: str) -> ReleasedSpec | None:
    """Where the agent's prompt texts live in a clone of its released code (None: nowhere).

    Raises:
        OwnloopError: the agent is unknown.
    """
    return _factory(name).released_spec


def agent_options(name: str) -> dict[str, object]:
    """The options an agent accepts, with their defaults (see ``ownloop agents NAME``).

    Raises:
        OwnloopError: the agent is unknown.
    """
    return {doc.name: doc.default for doc in option_docs(options_type(name))}


def world_agent_options(name: str, world: str, given: dict[str, Any]) -> dict[str, Any]:
    """The options to make agent ``name`` with in ``world``: ``given`` (``-o KEY=VALUE``), and
    on a desktop the agent's desktop defaults (its released OSWorld loop) for the rest.

    Raises:
        OwnloopError: the agent is unknown.
    """
    return world_options(options_type(name), world, given)


def released_texts(name: str, roots: str | None) -> Released | None:
    """The agent's prompt texts from a clone under ``roots`` (``--released``, a colon list; the
    CLI fills it from ``$OWNLOOP_PATH``); None when the agent reads none or none is found.

    Raises:
        OwnloopError: the agent is unknown.
    """
    spec = released_spec(name)
    if spec is None or not roots:
        return None
    return load_released(spec, roots)


def released_notice(name: str, texts: Released | None) -> str | None:
    """The one line to show when an agent that reads released texts uses its built-in ones."""
    spec = released_spec(name)
    if spec is None or texts is not None:
        return None
    return (
        f"notice: {name}: no clone of {spec.repository} under --released/$OWNLOOP_PATH; "
        f"using ownloop's built-in prompt"
    )


def make_agent(name: str, released: Released | str | None = None, **options: object) -> Agent:
    """The agent called ``name``, configured with ``options``.

    Args:
        name: one of ``AGENTS``, e.g. ``"uitars"``.
        released: its prompt texts from a clone of the released code (``released_texts``), or
            the clones' folders as a colon list (read here); None: the built-in texts.
        **options: the agent's own options (see ``ownloop agents NAME``), e.g. ``images=3``;
            text is read as the option's type.

    Raises:
        OwnloopError: the agent is unknown, an option is unknown, or a value has the wrong type
            or is out of range.
    """
    if isinstance(released, str):  # a colon list of clones, for Python callers
        released = released_texts(name, released)
    return _factory(name)(read_options(name, options_type(name), options), released)
