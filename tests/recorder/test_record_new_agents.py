"""Issue 31: qwen3vl, holo and glmv recorded end to end, then replayed, on one small recording.

One module fixture records the three agents at once (three ``ownloop record`` subprocesses into
one store, each against the MiniWoB expert answering in that agent's own grammar) on click-button
and enter-text: a reward of 1 proves each prompt (the expert finds the task in it), grammar,
coordinate frame (0-999 read by width/999; 0-1000; the resized image sent), translation and
ending. Every parse records its coordinate frame. Then one replay of the run's responses per
agent reproduces the rewards.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AGENTS = {"qwen3vl": "relative-999", "holo": "relative-1000", "glmv": "relative-999"}
TASKS = "click-button,enter-text"


def _ownloop(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ownloop", "--store", str(store), *args]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("new-agents")
    store = root / "store"
    with ExitStack() as servers:
        records = {}
        for agent in AGENTS:
            url = servers.enter_context(make_server("miniwob", agent))
            records[agent] = subprocess.Popen(
                _ownloop(
                    store,
                    "record",
                    agent,
                    "--suite",
                    f"miniwob:{TASKS}",
                    "--endpoint",
                    url,
                    "--model",
                    "expert",
                    "--run",
                    agent,
                    "--settle",
                    "0.1",
                    "--workers",
                    "1",
                    "--max-steps",
                    "10",
                    "--released",
                    str(root / "no-clone"),
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        outs = {agent: process.communicate(timeout=300)[0] for agent, process in records.items()}
    for agent, process in records.items():
        assert process.returncode == 0 and "2 finished" in outs[agent], (agent, outs[agent])
    return store


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


def test_replaying_the_responses_reproduces_the_rewards(store: Path) -> None:
    for agent in AGENTS:
        done = subprocess.run(
            _ownloop(store, "replay", "--run", agent, "--execute", "responses", "--settle", "0.1"),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    replayed = _rows(
        store,
        "select agent, count(*), min(score) from sessions "
        "where replay_mode = 'responses' group by agent",
    )
    assert sorted(replayed) == sorted((agent, 2, 1.0) for agent in AGENTS)
