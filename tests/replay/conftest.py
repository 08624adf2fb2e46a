"""Fixtures of the re-execution tests: the expert endpoint (counting its requests) and a store
recorded with it once per test run, copied for each test that writes to it.

- ``expert``: the MiniWoB expert over HTTP, as ``Live(url, calls)``; ``calls()`` is how many
  requests reached it so far.
- ``recorded``: a store holding uitars sessions of click-button, enter-text and focus-text,
  recorded against the MiniWoB expert (run ``rec``) once per test run, shared by every module
  and xdist worker (``tests.replay.recordings``; read only), as ``Recorded(path, sessions)`` with
  ``sessions`` mapping a task name (``enter-text``) to its session id.
- ``store_copy``: a copy of that store in the test's tmp_path.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from ownloop.modelserver import ModelServer, Reply
from tests.replay.recordings import TASKS, Recorded, invoke, replay_store

__all__ = ["TASKS", "Live", "Recorded", "invoke"]


class Live(NamedTuple):
    url: str
    calls: Callable[[], int]


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


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return replay_store(tmp_path_factory)


@pytest.fixture
def store_copy(recorded: Recorded, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(recorded.path, copy)
    return copy


@pytest.fixture(scope="module")
def judge_url() -> Iterator[str]:
    """The scripted judge (``serve-model --expert judge``) on 127.0.0.1: its /v1 URL."""
    from ownloop.modelserver.judge import ScriptedJudge

    with ModelServer(ScriptedJudge(), models=("judge",), any_model=True) as url:
        yield url
