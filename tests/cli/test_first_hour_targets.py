"""TARGET resolution on a recorded store, through the real ``ownloop`` in a subprocess: a task
id is its latest *recorded* session (not a replay child, not an imported run), the README's
``ownloop replay click-button`` works, and re-executing an ``ops`` replay names its parent.

Two MiniWoB tasks are recorded once per run with the scripted expert in real Chromium
(``uitars_store``); each test works on its own copy.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def ownloop(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ownloop", *args, "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def recorded(uitars_store: Path) -> Path:
    """click-button and enter-text recorded by uitars in run r1 (tests/conftest.py)."""
    return uitars_store


@pytest.fixture
def store(recorded: Path, tmp_path: Path) -> Path:
    shutil.copytree(recorded, tmp_path / "store")
    return tmp_path / "store"


def _recorded_id(store: Path, task: str) -> str:
    rows = (
        open_store(store)
        .sql(
            "select session_id from sessions where starts_with(task_id, $t) and run_id = 'r1' "
            "and parent_session_id is null",
            {"t": task + "-"},
        )
        .rows
    )
    assert len(rows) == 1
    return str(rows[0][0])


def _shown(store: Path, *args: str) -> str:
    done = ownloop(store, "show", *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["session_id"])


def test_a_task_id_is_its_latest_recorded_session(store: Path, tmp_path: Path) -> None:
    parent = _recorded_id(store, "click-button")
    replayed = ownloop(
        store, "replay", "click-button", "--execute", "ops", "--settle", "0.1", "--format", "json"
    )
    assert replayed.returncode == 0, replayed.stderr
    child = json.loads(replayed.stdout)["child"]["session_id"]
    assert json.loads(replayed.stdout)["parent"]["session_id"] == parent
    # the child is the newest session of the task in r1; the task still means the recorded one
    assert _shown(store, "click-button") == _shown(store, "click-button", "--run", "r1") == parent
    # an imported copy of the run, newer than r1, is not what the bare task id means
    exported = ownloop(store, "export", "--run", "r1", "--out", str(tmp_path / "out"))
    assert exported.returncode == 0, exported.stderr
    imported = ownloop(store, "import", str(tmp_path / "out"), "--agent", "uitars", "--run", "copy")
    assert imported.returncode == 0, imported.stderr
    assert _shown(store, "click-button") == parent
    copy = _shown(store, "click-button", "--run", "copy")
    assert copy not in (parent, child)
    # the README's quick-start line works as written
    readme = ownloop(store, "replay", "click-button")
    assert readme.returncode == 0 and f"Session {parent}" in readme.stdout, readme.stderr


def test_re_executing_an_ops_replay_names_its_parent(store: Path) -> None:
    parent = _recorded_id(store, "enter-text")
    replayed = ownloop(store, "replay", parent, "--execute", "ops", "--settle", "0.1")
    assert replayed.returncode == 0, replayed.stderr
    child = replayed.stdout.splitlines()[0].rsplit(" ", 1)[1]
    hint = replayed.stdout.splitlines()[-1].removeprefix("query: ")
    assert hint.startswith(f"ownloop --store {store} sql ")
    pasted = subprocess.run(
        [sys.executable, "-m", "ownloop", *shlex.split(hint)[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert pasted.returncode == 0 and child in pasted.stdout, pasted.stderr
    for mode, what in (("actions", "actions"), ("responses", "model responses")):
        refused = ownloop(store, "replay", child, "--execute", mode)
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == (
            f"Error: session {child} is an ops replay of {parent} and has no recorded {what} to "
            f"re-execute. Replay its parent: ownloop --store {store} replay {parent} --execute "
            f"{mode}\n"
        )
    rows = ownloop(
        store, "replay", parent, "--execute", "actions", "--settle", "0.1", "--format", "csv"
    )
    assert rows.returncode == 0, rows.stderr
    lines = rows.stdout.splitlines()
    assert lines[0] == (
        "session_id,step,diverged,screenshot_identical,pixel_diff,url_equal,element_equal,actions"
    )
    assert len(lines) == 1 + len(
        open_store(store).sql("select step from steps where session_id = $s", {"s": parent}).rows
    )
