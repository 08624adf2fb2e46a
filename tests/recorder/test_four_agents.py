"""Issue 6: the four agents recorded on the same tasks into one store compare side by side.

Each agent is recorded against the MiniWoB expert answering in that agent's own grammar (one
expert per agent: an expert renders its plan with one agent's ``render``), one agent after the
other so at most two Chromiums run at once (the expert's and the recorder's). Then the README's
query, run through ``ownloop sql``, shows one row per agent.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.agents import agent_options
from ownloop.cli import cli
from ownloop.modelserver.endpoint import make_server

# The three agents with released prompts warn once that no clone was found: the built-in prompt
# is used, as intended here.
pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:.*(no clone|not found)")]

AGENTS = ("uitars", "opencua", "fara7b", "molmoweb")
QUERY = "select agent, count(*), avg(score) from sessions group by agent"


def _invoke(store: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_four_agents_on_the_same_tasks_side_by_side(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for agent in AGENTS:
        # Only the agents that wait between steps have a pause to switch off.
        options = ["-o", "pause=0"] if "pause" in agent_options(agent) else []
        with make_server("miniwob", agent) as url:
            out = _invoke(
                store,
                "record",
                agent,
                "--suite",
                "miniwob:click-button,enter-text",
                "--endpoint",
                url,
                "--model",
                "expert",
                "--settle",
                "0.1",
                "--workers",
                "1",
                "--released",
                str(tmp_path / "no-clone"),
                *options,
            )
        assert "2 finished" in out, (agent, out)
    rows = list(csv.reader(io.StringIO(_invoke(store, "sql", QUERY, "--format", "csv"))))
    assert rows[0] == ["agent", "count_star()", "avg(score)"]
    table = {agent: (int(count), float(score)) for agent, count, score in rows[1:]}
    assert table == {agent: (2, 1.0) for agent in AGENTS}
    assert len(rows) == 1 + len(AGENTS)
