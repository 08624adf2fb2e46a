"""Recordings made once per test run and shared by every module and xdist worker that reads them.

Each is recorded once per pytest session for both xdist workers (``tests/once.py``), and each
worker reads its own copy. Readers must not write to it: copy it (shutil.copytree) to change it.

``replay_store``: uitars sessions of click-button, enter-text and focus-text recorded against
the MiniWoB expert (run ``rec``, one worker), the store the replay and CLI tests re-execute.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.store import open_store
from tests.once import recorded_once

TASKS = "click-button,enter-text,focus-text"


class Recorded(NamedTuple):
    path: Path
    sessions: dict[str, str]  # task name (``enter-text``) -> its session id


def invoke(store: Path, *args: str) -> str:
    """Run an ownloop command on ``store``; fails the test on a non-zero exit."""
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _record_replay_store(path: Path) -> None:
    from ownloop.modelserver.endpoint import make_server

    with make_server("miniwob", "uitars") as url:
        invoke(
            path,
            "record",
            "uitars",
            "--suite",
            f"miniwob:{TASKS}",
            "--endpoint",
            url,
            "--model",
            "expert",
            "--run",
            "rec",
            "--workers",
            "1",
            "--settle",
            "0.1",
        )
    store = open_store(path)
    rows = store.sql("select status from sessions").rows
    errors = store.sql("select error from model_calls where error is not null").rows
    assert len(rows) == 3 and all(status == "finished" for (status,) in rows), (rows, errors[:3])
    store.sync()


def replay_store(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The replay tests' store (module docstring), recorded once per run."""

    def record(folder: Path) -> Path:
        _record_replay_store(folder / "store")
        return folder / "store"

    path = recorded_once(tmp_path_factory, "replay-store", record)
    rows = open_store(path).sql("select task_id, session_id from sessions").rows
    return Recorded(path, {task.rsplit("-", 1)[0]: sid for task, sid in rows})
