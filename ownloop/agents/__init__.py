"""The agents: per-model prompt building, parsing, coordinate mapping and translation.

``make_agent("uitars", frequency_penalty=1)`` gives an ``Agent`` (see ``base.py``). Each agent
module is imported only when it is made, so the CLI starts without loading model packages.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from ownloop.agents.base import Agent, AgentParseError
from ownloop.agents.options import AgentOptions, option_docs, read_options
from ownloop.agents.released import Released, ReleasedSpec, load_released
from ownloop.store.errors import OwnloopError

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
]


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


def options_type(name: str) -> type[AgentOptions] | None:
    """The agent's options Struct (None for an agent not yet declaring one).

    Raises:
        OwnloopError: the agent is unknown.
    """
    kind = getattr(_factory(name), "options_type", None)
    return kind if isinstance(kind, type) and issubclass(kind, AgentOptions) else None


def released_spec(name: str) -> ReleasedSpec | None:
    """Where the agent's prompt texts live in a clone of its released code (None: nowhere).

    Raises:
        OwnloopError: the agent is unknown.
    """
    spec = getattr(_factory(name), "released_spec", None)
    return spec if isinstance(spec, ReleasedSpec) else None


def agent_options(name: str) -> dict[str, object]:
    """The options an agent accepts, with their defaults.

    Raises:
        OwnloopError: the agent is unknown.
    """
    kind = options_type(name)
    if kind is not None:
        return {doc.name: doc.default for doc in option_docs(kind)}
    signature = inspect.signature(_factory(name))
    return {
        key: param.default
        for key, param in signature.parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    }


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
    return (f"notice: {name}: no clone of {spec.repository} under --released/$OWNLOOP_PATH; "
            f"using ownloop's built-in prompt")


def make_agent(name: str, released: Released | str | None = None, **options: object) -> Agent:
    """The agent called ``name``, configured with ``options``.

    Args:
        name: one of ``AGENTS``, e.g. ``"uitars"``.
        released: its prompt texts from a clone of the released code (``released_texts``);
            None: the built-in texts.
        **options: the agent's own options (see ``ownloop agents NAME``), e.g. ``images=3``;
            text is read as the option's type.

    Raises:
        OwnloopError: the agent is unknown, an option is unknown, or a value has the wrong type
            or is out of range.
    """
    factory = _factory(name)
    kind = options_type(name)
    if kind is not None:
        if isinstance(released, str):
            released = released_texts(name, released)
        return factory(read_options(name, kind, options), released)
    if isinstance(released, str):  # an agent still taking a path (legacy, goes)
        options["released"] = released
    elif released is not None:
        options["released"] = released.source.removeprefix("released:")
    known = agent_options(name)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise OwnloopError(
            f"agent {name!r} has no option {unknown[0]!r}. Its options: {', '.join(known)}"
        )
    return factory(**options)
