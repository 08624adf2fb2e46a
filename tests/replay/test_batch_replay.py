"""``ownloop replay --run R --execute MODE --workers N``: every recorded session of a run
re-executed on N reused browsers, through the real CLI in a subprocess (real Chromium, MiniWoB).

The run is the expert's ``rec`` of the replay tests' store (three sessions, recorded once per test
run); each test works on a copy. A batch must reproduce what single replays reproduce, record its
children as they record theirs, and launch one browser per worker, not one per session.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from ownloop.replay.fold import Session, fold
from ownloop.store import open_store
from tests.replay.conftest import Recorded, invoke

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def ownloop(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


class Batch(NamedTuple):
    store: Path
    document: dict[str, Any]
    children: dict[str, Session]  # parent session id -> its child


def _children(store: Path) -> dict[str, Session]:
    opened = open_store(store)
    rows = opened.sql(
        "select session_id from sessions where parent_session_id is not null order by started_at"
    ).rows
    children = [fold(opened.session_events(sid)) for (sid,) in rows]
    return {child.parent_session_id or "": child for child in children}


@pytest.fixture(scope="module")
def batch(recorded: Recorded, tmp_path_factory: pytest.TempPathFactory) -> Batch:
    store = tmp_path_factory.mktemp("batch") / "store"
    shutil.copytree(recorded.path, store)
    done = ownloop(
        store, "replay", "--run", "rec", "--execute", "ops", "--workers", "2", "--settle", "0.1",
        "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return Batch(store, json.loads(done.stdout), _children(store))


class Singles(NamedTuple):
    store: Path
    children: dict[str, Session]  # parent session id -> its child


@pytest.fixture(scope="module")
def singles(recorded: Recorded, tmp_path_factory: pytest.TempPathFactory) -> Singles:
    """Each recorded session replayed alone (its own browser), in a store of their own."""
    store = tmp_path_factory.mktemp("singles") / "store"
    shutil.copytree(recorded.path, store)
    for parent in recorded.sessions.values():
        invoke(store, "replay", parent, "--execute", "ops", "--settle", "0.1")
    return Singles(store, _children(store))


def _effects(session: Session) -> list[tuple[int, int, str, bool, str, str]]:
    return [
        (
            step.step,
            effect.idx,
            type(effect.op).__name__,
            effect.ok,
            effect.element.tag if effect.element else "",
            effect.element.name if effect.element else "",
        )
        for step in session.steps
        for effect in step.effects
    ]


def _reward(store: Path, session_id: str) -> Any:
    (value,) = (
        open_store(store)
        .sql(
            "select value from evidence where name = 'miniwob_reward' and session_id = $id",
            {"id": session_id},
        )
        .rows[0]
    )
    return json.loads(value)["raw_reward"]


def test_a_batch_reproduces_every_reward_single_replays_reproduce(
    batch: Batch, singles: Singles, recorded: Recorded
) -> None:
    parents = set(recorded.sessions.values())
    assert set(batch.children) == set(singles.children) == parents
    for parent, single in singles.children.items():
        child = batch.children[parent]
        assert single.latest_grade is not None and child.latest_grade is not None
        assert (child.latest_grade.score, child.latest_grade.passed) == (
            single.latest_grade.score,
            single.latest_grade.passed,
        )
        assert _reward(batch.store, child.session_id) == 1
        assert _effects(child) == _effects(single) and _effects(child), parent
        assert [s.step for s in child.steps] == [s.step for s in single.steps]
        assert all(s.fidelity is not None and not s.fidelity.diverged for s in child.steps)
    document = batch.document
    assert (document["sessions"], document["reproduced"], document["failed"]) == (3, 3, 0)
    assert {row["parent_session_id"] for row in document["rows"]} == parents
    assert all(row["reproduced"] and row["error"] is None for row in document["rows"])


def _kinds(store: Path, session: Session) -> tuple[list[str], int]:
    """The kinds of the session's own stream's events in order, and its fidelity measurements
    (written in a stream of their own once the replay ended, so in no fixed place among them)."""
    kinds = [type(event).__name__ for event in open_store(store).session_events(session.session_id)]
    measured = kinds.count("FidelityMeasured")
    return [kind for kind in kinds if kind != "FidelityMeasured"], measured


def test_children_are_recorded_as_a_single_replay_records_them(
    batch: Batch, singles: Singles
) -> None:
    for parent, single in singles.children.items():
        child = batch.children[parent]
        assert (child.run_id, child.replay_mode, child.task_id) == (
            single.run_id,
            single.replay_mode,
            single.task_id,
        )
        assert _kinds(batch.store, child) == _kinds(singles.store, single), parent
    # the views a later command reads see the batch's children like any replay's
    ((measured, same),) = (
        open_store(batch.store)
        .sql(
            "select count(*), count(*) filter (where not diverged) from fidelity "
            "where list_contains($ids, session_id)",
            {"ids": [child.session_id for child in batch.children.values()]},
        )
        .rows
    )
    steps = sum(len(child.steps) for child in batch.children.values())
    assert measured == same == steps > 0


def test_two_workers_launch_two_browsers_for_three_sessions(batch: Batch) -> None:
    document = batch.document
    assert (document["workers"], document["browsers"]) == (2, 2)
    assert {row["browser"] for row in document["rows"]} == {1, 2}
    chromium = (
        open_store(batch.store)
        .sql("select distinct chromium from session_started where parent_session_id is not null")
        .rows
    )
    assert len(chromium) == 1 and chromium[0][0]


def test_an_unknown_run_is_a_one_line_error(batch: Batch) -> None:
    done = ownloop(batch.store, "replay", "--run", "nope", "--execute", "ops")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: no run 'nope' in {batch.store}. List runs with: ownloop --store {batch.store} "
        'sql "select run_id, sessions from runs"'
    ]


def test_a_batch_nothing_of_which_can_run_says_why_in_one_line_and_records_nothing(
    recorded: Recorded, tmp_path: Path
) -> None:
    """The workers launch their browsers while the sessions are planned: a plan that fits no
    session still ends the command at once, with the reason, and no child is recorded."""
    store = tmp_path / "store"
    shutil.copytree(recorded.path, store)
    done = ownloop(
        store, "replay", "--run", "rec", "--execute", "ops", "--on-diverge", "fork",
        "--workers", "2",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "Error: --on-diverge fork needs the live model: pass --endpoint URL and --model NAME"
    ]
    assert _children(store) == {}


def _chromiums_of(pid: int) -> list[int]:
    """The Chromium processes under ``pid`` (its descendants whose command is a chrome)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                command = (Path("/proc") / str(child) / "cmdline").read_bytes()
            except OSError:
                continue
            if b"--type=" not in command and (b"chrom" in command.split(b"\0")[0]):
                found.append(child)
    return found


def _wait_for(process: subprocess.Popen[str], text: str, timeout_s: float = 120.0) -> str:
    """Read ``process``'s stderr until a line holds ``text``."""
    assert process.stderr is not None
    deadline = time.monotonic() + timeout_s
    seen = ""
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        seen += line
        if text in line:
            return seen
        if not line and process.poll() is not None:
            break
    raise AssertionError(f"no {text!r} on stderr: {seen}")


def _start(store: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ownloop", "--store", str(store), "replay", "--run", "rec", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_crashed_browser_is_replaced_and_the_batch_goes_on(
    recorded: Recorded, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(recorded.path, store)
    process = _start(store, "--execute", "ops", "--workers", "1", "--settle", "0.5",
                     "--format", "json")  # fmt: skip
    _wait_for(process, "session 1 of 3")
    killed = _chromiums_of(process.pid)
    assert len(killed) == 1, killed  # one worker, one browser, after a whole session
    os.kill(killed[0], signal.SIGKILL)
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err
    document = json.loads(out)
    assert document["browsers"] == 2 and document["sessions"] == 3, document
    rows = document["rows"]
    assert rows[-1]["reproduced"] and rows[-1]["browser"] == 2, rows
    assert sum(1 for row in rows if row["reproduced"]) >= 2, rows


def test_ctrl_c_stops_the_batch_and_keeps_finished_children(
    recorded: Recorded, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(recorded.path, store)
    process = _start(store, "--execute", "responses", "--workers", "1", "--settle", "0.5")
    _wait_for(process, "session 1 of 3")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "(interrupted)" in out, out
    ended = (
        open_store(store)
        .sql(
            "select status, passed from sessions where parent_session_id is not null "
            "order by started_at"
        )
        .rows
    )
    assert ended[0] == ("finished", True), ended  # the finished child stays recorded
    assert len(ended) < 3 and all(status != "unfinished" for status, _ in ended), ended
