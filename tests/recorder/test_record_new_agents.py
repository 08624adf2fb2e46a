"""Issue 31: qwen3vl, holo and glmv recorded end to end, then replayed, on one small recording.

The session's ``new_agents_store`` (tests/conftest.py) holds the three agents' recordings, made at
once (three ``ownloop record`` subprocesses into one store, each against the MiniWoB expert
answering in that agent's own grammar) on click-button and enter-text, each in a run named after
the agent: a reward of 1 proves each prompt (the expert finds the task in it), grammar,
coordinate frame (0-999 read by width/999; 0-1000; the resized image sent), translation and
ending. Every parse records its coordinate frame. Then one replay of the run's responses per
agent, the three at once on a copy of the store, reproduces the rewards.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AGENTS = {"qwen3vl": "relative-999", "holo": "relative-1000", "glmv": "relative-999"}


def _ownloop(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ownloop", "--store", str(store), *args]


@pytest.fixture
def store(new_agents_store: Path) -> Path:
    return new_agents_store


def _rows(store: Path, sql: str) -> list[tuple]:
    return open_store(store).sql(sql).rows


def test_each_new_agent_earns_its_rewards_and_records_its_frame(store: Path) -> None:
    scores = _rows(store, "select agent, count(*), min(score) from sessions group by agent")
    assert sorted(scores) == sorted((agent, 2, 1.0) for agent in AGENTS)
    frames = _rows(
        store,
        "select s.agent, list(distinct p.coordinate_frame) from action_parsed p "
        "join sessions s using (session_id) group by s.agent",
    )
    assert {agent: tuple(found) for agent, found in frames} == {
        agent: (frame,) for agent, frame in AGENTS.items()
    }
    # qwen3vl sends the screenshot resized as its released client does (factor 32).
    sizes = _rows(store, "select agent, agent_settings from run_started order by agent")
    assert all('"task_text":"wrapped"' in settings.replace(" ", "") for _, settings in sizes)


def test_replaying_the_responses_reproduces_the_rewards(store: Path, tmp_path: Path) -> None:
    shutil.copytree(store, tmp_path / "store")  # the replays add their sessions to it
    store = tmp_path / "store"
    replays = {
        agent: subprocess.Popen(
            _ownloop(store, "replay", "--run", agent, "--execute", "responses", "--settle", "0.1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for agent in AGENTS
    }
    outs = {agent: process.communicate(timeout=300)[0] for agent, process in replays.items()}
    for agent, process in replays.items():
        assert process.returncode == 0, (agent, outs[agent])
    replayed = _rows(
        store,
        "select agent, count(*), min(score) from sessions "
        "where replay_mode = 'responses' group by agent",
    )
    assert sorted(replayed) == sorted((agent, 2, 1.0) for agent in AGENTS)
