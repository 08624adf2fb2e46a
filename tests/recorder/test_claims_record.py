"""Two ``ownloop record`` processes on one run id, one killed with kill -9: every task ends with
exactly one counted session (real CLI processes, real Chromium, the MiniWoB expert over HTTP)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ownloop.store import open_store
from tests.recorder.ray_cluster import held_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TASKS = "click-button,click-link,focus-text"


def _ownloop(store: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OWNLOOP_CLAIM_LEASE": "5"}
    return subprocess.Popen(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _events(journal: Path) -> list[dict]:
    events = []
    for path in journal.glob("*.jsonl"):
        for line in path.read_bytes().split(b"\n"):
            try:
                events.append(json.loads(line)["event"])
            except ValueError:
                continue  # a torn tail
    return events


def _open_session_of(journal: Path, pid: int) -> str | None:
    """A session that the recorder with this pid claimed, started and has not ended."""
    events = _events(journal)
    ended = {e["session_id"] for e in events if e["kind"] == "session_ended"}
    started = {e["session_id"] for e in events if e["kind"] == "session_started"}
    for event in events:
        if event["kind"] == "task_claimed" and f":{pid}:" in event.get("holder", ""):
            if event["session_id"] in started - ended:
                return str(event["session_id"])
    return None


def _wait(what: str, check, timeout: float = 120):  # noqa: ANN001, ANN202 - a test helper
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {what} after {timeout}s")


def test_two_recorders_on_one_run_one_killed_every_task_counted_once(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    server, gate = held_server()  # no answer until the first recorder is killed
    with server as url:
        command = [
            "record",
            "uitars",
            "--model",
            "m",
            "--endpoint",
            url,
            "--run",
            "both",
            "--suite",
            f"miniwob:{TASKS}",
            "--workers",
            "1",
            "--settle",
            "0",
        ]
        # Both start at once; the first is killed with its first session in flight, its first
        # answer held. (Waiting for the second's session first was a race: the first could run
        # out of tasks meanwhile, and then never again have one in flight.)
        first = _ownloop(tmp_path, *command)
        second = _ownloop(tmp_path, *command)
        killed = _wait(
            "session of the first recorder in flight", lambda: _open_session_of(journal, first.pid)
        )
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        assert first.stdout is not None
        first.stdout.close()  # (its output is not read: a killed run says nothing)
        gate.release()
        out, _ = second.communicate(timeout=180)
        assert second.returncode == 0, out
        again = _ownloop(tmp_path, *command)
        rerun, _ = again.communicate(timeout=120)
    assert again.returncode == 0, rerun
    assert "nothing to do" in rerun and "3 tasks were done already" in rerun, rerun

    store = open_store(tmp_path)
    counted = store.sql(
        "select task_id, count(*) filter (where counted) from sessions "
        "group by task_id order by task_id"
    ).rows
    assert len(counted) == 3 and all(n == 1 for _, n in counted), counted
    # The killed recorder's session in flight ended crashed, once, and its task was taken over.
    assert store.sql("select status from sessions where session_id = $s", {"s": killed}).rows == [
        ("crashed",)
    ]
    assert store.sql("select count(*) from session_ended where status = 'crashed'").rows == [(1,)]
    took = store.sql("select took_over from task_claimed where took_over is not null").rows
    assert len(took) == 1 and f":{first.pid}:" in took[0][0], took
    # Every counted session finished; every session is under the run's one budget.
    rows = store.sql("select status, comparable from sessions where counted").rows
    assert rows == [("finished", True)] * 3, rows
    assert store.sql("select budgets from runs where run_id = 'both'").rows == [([40],)]
    # The survivor ended the killed recorder's session when it took its task over.
    assert "1 sessions left by a stopped recorder marked crashed" in out, out
