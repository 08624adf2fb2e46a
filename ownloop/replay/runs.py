"""The runs of replays: what the parent's run recorded, the run a child joins, its start and end.

A replay joins its parent's run (or ``--run``'s); a sealed run takes no more events, so its
replays go to ``<run>.replays``, which the replay (or the batch) starts with a ``RunStarted``
when the store does not know it yet and ends with a ``RunEnded`` once its sessions ended. The
agent of each replay is the parent's, made again with the settings its run recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from ownloop.agents import Agent
from ownloop.agents.recorded import agent_for
from ownloop.agents.released import released_commit, released_sha256
from ownloop.recorder.episode import EpisodeResult
from ownloop.recorder.model import public_endpoint
from ownloop.replay.fold import Session
from ownloop.store import Store
from ownloop.store.events import RunEnded, RunStarted, now
from ownloop.store.queries import has_run_started, run_settings
from ownloop.store.seal import refuse_if_sealed, sealed_fingerprint

__all__ = ["child_run", "end_run", "ensure_run", "recorded_agent", "recorded_settings"]


def recorded_settings(store: Store, sessions: Iterable[Session]) -> dict[str, dict[str, Any]]:
    """Session id → the agent settings its run recorded (the last RunStarted before it began)."""
    sessions = list(sessions)
    rows = run_settings(store, (s.run_id for s in sessions if s.run_id))
    starts: dict[str, list[tuple[datetime, dict[str, Any]]]] = {}
    for run_id, at, settings in rows:
        starts.setdefault(run_id, []).append((at, json.loads(settings) if settings else {}))
    found: dict[str, dict[str, Any]] = {}
    for session in sessions:
        history = starts.get(session.run_id)
        if not history:
            continue
        chosen = history[0][1]
        began = session.started_at.replace(tzinfo=None) if session.started_at else None
        for at, settings in history:
            if began is None or at <= began:
                chosen = settings
        found[session.session_id] = chosen
    return found


def recorded_agent(
    store: Store,
    session: Session,
    overrides: dict[str, Any],
    released: str | None = None,
    recorded: dict[str, Any] | None = None,
) -> Agent:
    """Today's agent code with the options the session's run recorded (``recorded`` when the
    caller looked them up already), then ``overrides``."""
    if recorded is None:
        recorded = recorded_settings(store, [session]).get(session.session_id, {})
    return agent_for(session.agent or "uitars", recorded, overrides, released)


def child_run(store: Store, run_id: str) -> str:
    """The run a replay is recorded into: ``run_id``, or ``<run_id>.replays`` when that run is
    sealed (a sealed run takes no more events)."""
    if sealed_fingerprint(store, run_id) is None:
        return run_id
    replays = f"{run_id}.replays"
    refuse_if_sealed(store, replays, "replay into another run with --run NAME")
    return replays


def ensure_run(
    store: Store, run_id: str, agent: Agent, model: str, endpoint: str | None, suite: str
) -> bool:
    """Write a RunStarted for ``run_id`` when the store does not know it yet (a sealed parent
    run's ``.replays``): its agent, model, live ``endpoint`` (shown without its secrets) and
    the parent's suite; True if it did (then ``end_run`` ends it)."""
    if has_run_started(store, run_id):
        return False
    with store.stream() as stream:
        stream.append(
            [
                RunStarted(
                    at=now(),
                    run_id=run_id,
                    argv=("ownloop", "replay"),
                    agent=agent.name,
                    agent_settings=agent.options(),
                    model=model,
                    endpoint=public_endpoint(endpoint) if endpoint else "",
                    sampling=agent.settings.sampling,
                    viewport=agent.settings.viewport,
                    suite=suite,
                    prompt_source=agent.prompt_source,
                    released_commit=released_commit(agent),
                    released_sha256=released_sha256(agent),
                )
            ]
        )
    return True


def end_run(store: Store, run_id: str, results: Sequence[EpisodeResult]) -> None:
    """The RunEnded of a run ``ensure_run`` started: its sessions' statuses and seconds."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    with store.stream() as stream:
        stream.append(
            [
                RunEnded(
                    at=now(),
                    run_id=run_id,
                    counts=counts,
                    seconds=sum(result.seconds for result in results),
                )
            ]
        )
