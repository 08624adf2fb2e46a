"""Issue 6: the four agents recorded on the same tasks into one store compare side by side.

Each agent is recorded against the MiniWoB expert answering in that agent's own grammar (one
expert per agent: an expert renders its plan with one agent's ``render``), one agent after the
other so at most two Chromiums run at once (the expert's and the recorder's): that is the
session's ``recorded_store`` (tests/conftest.py), which the export tests read too; each agent's
recording printed "2 finished". Then docs/recording.md's query, run through ``ownloop sql``,
shows one row per agent.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli

# The three agents with released prompts warn once that no clone was found: the built-in prompt
# is used, as intended here.
pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:.*(no clone|not found)")]

AGENTS = ("uitars", "opencua", "fara7b", "molmoweb")  # those of recorded_store
QUERY = "select agent, count(*), avg(score) from sessions group by agent"


def _invoke(store: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_four_agents_on_the_same_tasks_side_by_side(recorded_store: Path) -> None:
    rows = list(csv.reader(io.StringIO(_invoke(recorded_store, "sql", QUERY, "--format", "csv"))))
    assert rows[0] == ["agent", "count_star()", "avg(score)"]
    table = {agent: (int(count), float(score)) for agent, count, score in rows[1:]}
    assert table == {agent: (2, 1.0) for agent in AGENTS}
    assert len(rows) == 1 + len(AGENTS)
