"""``ownloop audit blind``: a run's passing sessions replayed blind on other seeds.

click-tab's tabs stand where they stand whatever the seed (only which tab is asked for changes),
so the recorded click on seed 2's tab passes other seeds that ask for the same tab: flagged
non-discriminative. focus-text moves its text box with the seed, so the recorded click misses
it: not flagged. Real Chromium, MiniWoB pages, the expert over HTTP, the CLI in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store
from ownloop.store.events import RunStarted, now

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _audit(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-m",
            "ownloop",
            "--store",
            str(store),
            "audit",
            "blind",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_seed_independent_layout_is_flagged_and_a_seed_dependent_one_is_not(
    tmp_path: Path,
) -> None:
    with make_server("miniwob", "uitars") as expert:
        result = CliRunner().invoke(
            cli,
            [
                "--store",
                str(tmp_path),
                "record",
                "uitars",
                "--model",
                "expert",
                "--settle",
                "0.1",
                "--suite",
                "miniwob:click-tab,focus-text",
                "--seeds",
                "2",
                "--endpoint",
                expert,
                "--run",
                "r",
                "--workers",
                "1",
            ],
            catch_exceptions=False,
        )
    assert result.exit_code == 0 and "2 finished" in result.output, result.output

    done = _audit(tmp_path, "--run", "r", "--seeds", "2,4,5,8", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = {row["task_id"]: row for row in json.loads(done.stdout)}
    # seed 2 is the tasks' own: left out; seeds 4 and 5 ask for seed 2's tab, seed 8 another
    assert rows["click-tab-2"] == {
        "task_id": "click-tab-2",
        "replays": 3,
        "passes": 2,
        "blind_pass_rate": 2 / 3,
        "non_discriminative": True,
    }
    assert rows["focus-text-2"]["passes"] == 0
    assert rows["focus-text-2"]["non_discriminative"] is False
    assert "click-tab-2 blind on seed 4: pass" in done.stderr
    assert "focus-text-2 blind on seed 8: fail" in done.stderr

    store = open_store(tmp_path)
    assert store.sql("select task_id from non_discriminative").rows == [("click-tab-2",)]
    replays = store.sql("select episode, seed, passed from blind_replays order by episode").rows
    assert replays == [
        ("click-tab-4", 4, True),
        ("click-tab-5", 5, True),
        ("click-tab-8", 8, False),
        ("focus-text-4", 4, False),
        ("focus-text-5", 5, False),
        ("focus-text-8", 8, False),
    ]
    # The blind replays are replays: the run's own scores do not move.
    assert store.sql(
        "select sessions from run_scores where run_id = 'r' and method = 'wilson'"
    ).rows == [(2,)]

    again = _audit(tmp_path, "--run", "r", "--seeds", "4,5,8")
    assert again.returncode == 0, again.stderr
    assert (
        "2 tasks audited, 0 blind replays run now; non-discriminative: click-tab-2" in again.stdout
    )


def test_a_run_without_a_passing_session_says_so(tmp_path: Path) -> None:
    with open_store(tmp_path, create=True).stream() as stream:
        stream.append([RunStarted(at=now(), run_id="nothing")])
    done = _audit(tmp_path, "--run", "nothing")
    assert done.returncode == 1
    assert done.stderr.startswith("Error: run nothing has no passing session to audit.")
