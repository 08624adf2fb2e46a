"""Fixtures of the re-execution tests: the expert endpoint (counting its requests) and a store
recorded with it once per test run, copied for each test that writes to it.

- ``expert``: the MiniWoB expert over HTTP, as ``Live(url, calls)``; ``calls()`` is how many
  requests reached it so far.
- ``recorded``: a store holding uitars sessions of click-button, enter-text and focus-text,
  recorded against ``expert`` (run ``rec``), as ``Recorded(path, sessions)`` with ``sessions``
  mapping a task name (``enter-text``) to its session id.
- ``store_copy``: a copy of that store in the test's tmp_path.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver import ModelServer, Reply
from ownloop.store import open_store

TASKS = "click-button,enter-text,focus-text"


class Live(NamedTuple):
    url: str
    calls: Callable[[], int]


class Recorded(NamedTuple):
    path: Path
    sessions: dict[str, str]


class _Counting:
    """Wraps a responder and counts the requests that reach it."""

    def __init__(self, inner: Callable[[dict[str, Any]], Reply]) -> None:
        self.inner = inner
        self.count = itertools.count()
        self.seen = 0

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.seen = next(self.count) + 1
        return self.inner(request)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


@pytest.fixture(scope="session")
def expert() -> Iterator[Live]:
    from ownloop.modelserver.expert import MiniwobExpert

    counting = _Counting(MiniwobExpert("uitars"))
    with ModelServer(counting) as url:
        yield Live(url, lambda: counting.seen)


def invoke(store: Path, *args: str) -> str:
    """Run an ownloop command on ``store``; fails the test on a non-zero exit."""
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory, expert: Live) -> Recorded:
    path = tmp_path_factory.mktemp("recorded") / "store"
    invoke(
        path,
        "record",
        "uitars",
        "--suite",
        f"miniwob:{TASKS}",
        "--endpoint",
        expert.url,
        "--model",
        "expert",
        "--run",
        "rec",
        "--workers",
        "1",
        "--settle",
        "0.1",
    )
    rows = open_store(path).sql("select task_id, session_id, status from sessions").rows
    errors = open_store(path).sql("select error from model_calls where error is not null").rows
    assert all(status == "finished" for _, _, status in rows), (rows, errors[:3])
    return Recorded(path, {task.rsplit("-", 1)[0]: sid for task, sid, _ in rows})


@pytest.fixture
def store_copy(recorded: Recorded, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(recorded.path, copy)
    return copy
