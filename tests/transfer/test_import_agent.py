"""``ownloop import`` tells the agent from the steps.jsonl lines when ``--agent`` is left out, and
warns with the parse rate when ``--agent`` names another agent than the one that wrote them.
Through the real CLI in a subprocess, on a real store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

AGENTS = ("uitars", "molmoweb", "fara7b", "opencua")


def _ownloop(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _parsed(store: Path, run: str) -> list[list[object]]:
    done = _ownloop(
        store,
        "sql",
        "--format",
        "json",
        "select s.agent, count(*) filter (where p.error is null) as ok, count(*) as n "
        "from action_parsed p join sessions s using (session_id) "
        f"where s.run_id = '{run}' group by all",
    )
    assert done.returncode == 0, done.stderr
    return [list(row.values()) for row in json.loads(done.stdout)]


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.slow
def test_without_agent_the_lines_say_who_wrote_them(
    tmp_path: Path, agent_folder: Callable[..., Path], agent: str
) -> None:
    agent_folder(tmp_path / "results", agent, "shop-1")
    agent_folder(tmp_path / "results", agent, "shop-2")
    done = _ownloop(tmp_path / "s", "import", str(tmp_path / "results"), "--run", "r")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "imported 2 sessions from 2 folders into run r: 2 finished\n"
    [(parsed_by, ok, _)] = _parsed(tmp_path / "s", "r")  # uitars' "fails" do not parse
    assert (parsed_by, ok) == (agent, 4)


@pytest.mark.slow
def test_the_wrong_agent_warns_with_the_parse_rate(
    tmp_path: Path, agent_folder: Callable[..., Path]
) -> None:
    agent_folder(tmp_path / "results", "uitars", "shop-1")
    done = _ownloop(
        tmp_path / "s", "import", str(tmp_path / "results"), "--agent", "fara7b", "--run", "r"
    )
    assert done.returncode == 0
    assert done.stdout == "imported 1 session from 1 folder into run r: 1 finished\n"
    assert done.stderr == (
        "warning: 0 of 2 responses parsed as fara7b (0%); the steps.jsonl lines have uitars's "
        "fields: import again with --agent uitars (and another --run), or without --agent\n"
    )
    right = _ownloop(
        tmp_path / "s", "import", str(tmp_path / "results"), "--agent", "uitars", "--run", "r2"
    )
    assert (right.returncode, right.stderr) == (0, "")


def test_without_agent_and_no_telling_fields_it_asks_for_agent(tmp_path: Path) -> None:
    folder = tmp_path / "results" / "shop-1"
    folder.mkdir(parents=True)
    (folder / "steps.jsonl").write_text(json.dumps({"step": 1, "raw": "click"}) + "\n")
    done = _ownloop(tmp_path / "s", "import", str(tmp_path / "results"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"Error: cannot tell which agent wrote the steps.jsonl lines in {tmp_path / 'results'}: "
        "pass --agent (uitars, molmoweb, fara7b, opencua)\n"
    )
    assert not (tmp_path / "s" / "journal").exists() or not any((tmp_path / "s").rglob("*.jsonl"))
