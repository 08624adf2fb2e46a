"""An agent and its records: the ``ActionParsed`` a parse is recorded as, and the agent a
recorded session ran, made again with the settings its run recorded.

The recorder and the importers record each parse with ``parsed_event``. A replay, a re-parse
and an export of a session's requests make the agent with ``agent_for``: the options the run
recorded (``RunStarted.agent_settings``) that the agent still has, then any ``-o KEY=VALUE``
overrides, and its prompt texts from the clones the run (or the caller) named.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ownloop.agents import Agent, agent_options, make_agent, released_texts
from ownloop.agents.base import Parsed
from ownloop.store.events import ActionParsed, now
from ownloop.store.ids import SessionIds

__all__ = ["agent_for", "parsed_event"]


def parsed_event(
    ids: SessionIds,
    step: int,
    call_id: str,
    agent: Agent,
    parsed: Parsed | None,
    error: str | None = None,
    *,
    coordinate_frame: str = "",
) -> ActionParsed:
    """The ActionParsed of one answer of ``call_id`` that ``agent`` parsed: its thought and
    actions, or (``parsed`` None) the ``error`` it did not parse with; ``coordinate_frame`` as
    the recorder knows it ("" for an import)."""
    return ActionParsed(
        at=now(),
        **ids,
        step=step,
        call_id=call_id,
        parser=agent.parser_name,
        parser_version=agent.parser_version,
        thought=parsed.thought if parsed is not None else "",
        actions=parsed.actions if parsed is not None else (),
        error=error,
        model_size=parsed.model_size if parsed is not None else None,
        coordinate_frame=coordinate_frame,
    )


def agent_for(
    name: str,
    recorded: Mapping[str, Any],
    overrides: Mapping[str, Any],
    released: str | None = None,
) -> Agent:
    """The agent ``name`` with its recorded settings (those it still has), then ``overrides``;
    its prompt texts from a clone under ``released`` (``--released``), else under the
    ``released`` folders a run recorded before the texts were handed in.

    Raises:
        OwnloopError: the agent is unknown, or an override is unknown or out of range.
    """
    known = agent_options(name)
    options = {key: value for key, value in recorded.items() if key in known}
    options.update(overrides)
    roots = released or recorded.get("released")
    texts = released_texts(name, roots if isinstance(roots, str) else None)
    return make_agent(name, released=texts, **options)
