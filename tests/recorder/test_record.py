"""``ownloop record uitars`` end to end: real Chromium, MiniWoB pages, the expert over HTTP.

The expert endpoint answers like a competent model in UI-TARS's grammar, so a session that earns
reward > 0 proves the whole chain: prompt, parse, coordinate mapping, translation, execution.
One expert (``planner``, one Chromium) plans every episode of the module, behind each test's own
server and fault plan.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image

from ownloop.cli import cli
from ownloop.modelserver.chat import Reply, Responder
from ownloop.modelserver.endpoint import make_server
from ownloop.modelserver.expert import MiniwobExpert
from ownloop.modelserver.faults import FaultyResponder
from ownloop.modelserver.server import ModelServer
from ownloop.store import open_store
from ownloop.store.blobs import decode_compacted, pixel_sha256
from ownloop.testing.processes import wait_ended
from tests.recorder.ray_cluster import Gate

pytestmark = pytest.mark.browser

SIX = "click-button,click-link,enter-text,focus-text,click-checkboxes,login-user"
SECRET = "sk-ownloop-test-SECRET-4711"


@pytest.fixture(scope="module")
def planner() -> Iterator[MiniwobExpert]:
    """The MiniWoB expert answering as uitars, for the whole module (its Chromium launches once)."""
    planner = MiniwobExpert("uitars")
    yield planner
    planner.close()


def _serve(planner: MiniwobExpert, faults: str | None = None, **options: Any) -> ModelServer:
    """``serve-model --expert miniwob --agent uitars [--faults SPEC]`` with the module's expert
    (stopping the server leaves the expert open: only its bound ``__call__`` is served)."""
    responder = FaultyResponder(planner.__call__, faults) if faults else planner.__call__
    return ModelServer(responder, models=("ownloop-miniwob-uitars",), **options)


class _Held(Gate):
    """A gate that also counts the requests waiting at it (``arrived``): a session's step is
    appended to the journal only once answered, so the test waits on the request, not the file."""

    def __init__(self, inner: Responder) -> None:
        super().__init__(inner)
        self.arrived = threading.Semaphore(0)

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.arrived.release()
        return super().__call__(request)

    def wait(self, count: int, timeout: float = 90) -> None:
        """Until ``count`` requests (in all) are held here."""
        for _ in range(count):
            assert self.arrived.acquire(timeout=timeout), f"fewer than {count} requests held"


@pytest.fixture(scope="module")
def expert(planner: MiniwobExpert) -> Iterator[str]:
    with _serve(planner) as url:
        yield url


def _record(store: Path, *args: str, status: int = 0) -> str:
    result = CliRunner().invoke(
        cli,
        ["--store", str(store), "record", "uitars", "--model", "expert", "--settle", "0.1", *args],
        catch_exceptions=False,
    )
    assert result.exit_code == status, result.output  # 3: a session ended endpoint_error
    return result.output


def _rows(store: Path, sql: str) -> list[tuple]:
    return open_store(store).sql(sql).rows


def test_six_task_types_finish_with_reward_and_fill_every_view(tmp_path: Path, expert: str) -> None:
    out = _record(
        tmp_path,
        "--suite",
        f"miniwob:{SIX}",
        "--endpoint",
        expert,
        "--run",
        "r1",
        "--api-key",
        SECRET,
        "--workers",
        "2",
    )
    assert "6 finished" in out
    rows = _rows(
        tmp_path,
        "select task_id, status, passed, score, agent, attempt "
        "from sessions where run_id = 'r1' order by task_id",
    )
    assert sorted(r[0].rsplit("-", 1)[0] for r in rows) == sorted(SIX.split(","))
    assert all(r[1:] == ("finished", True, 1.0, "uitars", 1) for r in rows), rows
    # Every view is filled: calls, actions, effects with the element clicked, screenshots.
    calls = _rows(
        tmp_path,
        "select count(*), min(temperature), max(latency_ms) > 0 "
        "from model_calls where error is null",
    )
    assert calls[0][0] >= 6 and calls[0][1] == 0 and calls[0][2]
    clicked = _rows(
        tmp_path,
        "select count(*) from effects e join sessions s using (session_id) "
        "where s.task_id like 'click-button-%' and e.ok and e.element_tag = 'button'",
    )
    assert clicked[0][0] >= 1
    shots = _rows(tmp_path, "select min(width), min(height) from screenshots")
    assert shots == [(1280, 800)]
    actions = _rows(tmp_path, "select count(*) from actions where kind = 'click' and x > 0")
    assert actions[0][0] >= 6
    reward = _rows(tmp_path, "select count(*) from evidence where name = 'miniwob_reward'")
    assert reward[0][0] == 6
    # The key never reaches the store: not the journal, not a blob, not the index.
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_endpoint_down_then_resume_finishes_the_task(tmp_path: Path, expert: str) -> None:
    # The endpoint answers record's check, then goes down for good at the first call.
    with make_server("miniwob", "uitars", "down") as down:
        out = _record(
            tmp_path,
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            down,
            "--run",
            "r2",
            "--retries",
            "1",
            "--retry-wait",
            "0.1",
            status=3,
        )
    assert "1 endpoint_error" in out
    calls = _rows(tmp_path, "select count(*), count(error) from model_calls")
    assert calls == [(2, 2)]  # the call and its one retry, both recorded with their error
    out = _record(tmp_path, "--suite", "miniwob:click-button", "--endpoint", expert, "--run", "r2")
    assert "1 finished" in out
    rows = _rows(tmp_path, "select attempt, status, passed from sessions order by attempt")
    assert rows == [(1, "endpoint_error", None), (2, "finished", True)]
    # A third run of the same command has nothing left to do.
    out = _record(tmp_path, "--suite", "miniwob:click-button", "--endpoint", expert, "--run", "r2")
    assert "nothing to do" in out


def test_garbage_ends_in_parse_error_after_three_resamples(tmp_path: Path) -> None:
    with make_server("miniwob", "uitars", "garbage") as url:
        out = _record(tmp_path, "--suite", "miniwob:click-button", "--endpoint", url)
    assert "1 parse_error" in out
    rows = _rows(tmp_path, "select temperature from model_calls order by call_id")
    assert sorted(r[0] for r in rows) == [0, 1, 1, 1]
    parses = _rows(tmp_path, "select count(*) from actions")
    assert parses == [(0,)]


def test_a_hanging_endpoint_costs_bounded_time(tmp_path: Path) -> None:
    with make_server("miniwob", "uitars", "hang=20") as url:
        began = time.monotonic()
        out = _record(
            tmp_path,
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            url,
            "--call-timeout",
            "1",
            "--retries",
            "1",
            "--retry-wait",
            "0",
            "--keep-png",  # the time of the calls alone: no compaction waited for at the end
            status=3,
        )
        took = time.monotonic() - began
    assert "1 endpoint_error" in out
    # Each call is cut at its timeout, well before the endpoint's 20 s hang (the latencies are
    # the recorder's own measure, so a slow browser start on a busy machine does not count) ...
    latencies = _rows(tmp_path, "select latency_ms from model_calls order by attempt")
    assert len(latencies) == 2 and all(500 < ms < 10_000 for (ms,) in latencies), latencies
    # ... and the whole run costs less than the two hangs it would have waited through.
    assert took < 40


def _ownloop(store: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "ownloop", "--store", str(store), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _is_browser(pid: int) -> bool:
    """The main Chromium process (its helpers carry a --type= switch)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"chrom" in args[0] and not any(a.startswith(b"--type=") for a in args)


def _wait_for(journal: Path, marker: bytes, count: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(p.read_bytes().count(marker) for p in journal.glob("*.jsonl")) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} {marker!r} in {journal} after {timeout}s")


def test_chromium_killed_mid_session_errors_that_session_only(
    tmp_path: Path, planner: MiniwobExpert
) -> None:
    # login-user's first answer is held until the browser is killed, so the kill lands mid-step
    # however slow the machine; the answers after it are quick (focus-text in a new browser).
    gate = _Held(planner.__call__)
    with ModelServer(gate, models=("ownloop-miniwob-uitars",)) as url:
        proc = _ownloop(
            tmp_path,
            "record",
            "uitars",
            "--model",
            "m",
            "--endpoint",
            url,
            "--suite",
            "miniwob:login-user,focus-text",
            "--workers",
            "1",
            "--settle",
            "0.1",
        )
        gate.wait(1)  # login-user's step 1: its screenshot taken, its answer held
        browsers = [p for p in _descendants(proc.pid) if _is_browser(p)]
        assert browsers, "no Chromium under the recorder"
        for pid in browsers:
            os.kill(pid, signal.SIGKILL)
        gate.release()
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out  # a session ended error: CI must see it
    rows = _rows(tmp_path, "select task_id, status from sessions order by started_at")
    assert rows[0][1] == "error", rows
    assert rows[1][0].startswith("focus-text-") and rows[1][1] == "finished", rows


def test_kill_9_mid_run_then_the_same_command_finishes(
    tmp_path: Path, planner: MiniwobExpert
) -> None:
    # Quick answers for the first task's two calls; the next task's first call hangs (the
    # server's stop cuts it short): the kill lands mid-session, once that call is in flight.
    # The same command again gets quick ones.
    hanging = threading.Event()

    def log(line: str) -> None:
        if "-> hang " in line:
            hanging.set()

    with _serve(planner, "ok:2,hang=300:1", log=log) as url:
        command = [
            "record",
            "uitars",
            "--model",
            "m",
            "--endpoint",
            url,
            "--run",
            "k",
            "--suite",
            "miniwob:click-button,click-link,focus-text",
            "--workers",
            "1",
            "--settle",
            "0.1",
        ]
        proc = _ownloop(tmp_path, *command, "--api-key", SECRET)
        _wait_for(tmp_path / "journal", b'"session_ended"', 1)  # one task done,
        _wait_for(tmp_path / "journal", b'"session_started"', 2)  # the next one under way
        assert hanging.wait(90), "the second session's call never reached the endpoint"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()  # (its output is not read: a killed run says nothing)
        again = CliRunner().invoke(
            cli, ["--store", str(tmp_path), *command], catch_exceptions=False
        )
        out = again.output
    assert again.exit_code == 0, out
    rows = _rows(tmp_path, "select task_id, status from sessions order by started_at")
    statuses = {}
    for task_id, status in rows:
        statuses.setdefault(task_id, []).append(status)
    assert "crashed" in statuses[rows[1][0]], rows
    assert all(s[-1] == "finished" for s in statuses.values()), rows
    assert all(s.count("finished") == 1 for s in statuses.values()), rows
    assert (
        json.loads(
            open_store(tmp_path).sql("select to_json(list(status)) from sessions").rows[0][0]
        ).count("crashed")
        == 1
    )
    # The key given on the command line is recorded as *** in argv, and nowhere else.
    argv = _rows(tmp_path, "select argv from runs where run_id = 'k'")[0][0]
    assert SECRET not in str(argv) and "***" in str(argv)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_redact_argv_hides_keys_in_both_spellings() -> None:
    from ownloop.recorder.runner import redact_argv

    assert redact_argv(
        ["ownloop", "record", "--api-key", "k1", "--api-key=k2", "--model", "m"]
    ) == ("ownloop", "record", "--api-key", "***", "--api-key=***", "--model", "m")


def test_ctrl_c_ends_the_sessions_in_flight_as_interrupted_then_resume_finishes(
    tmp_path: Path, planner: MiniwobExpert
) -> None:
    # The two sessions' first answers are held: Ctrl-C lands while both wait, then they come;
    # the same command again gets quick ones.
    gate = _Held(planner.__call__)
    with ModelServer(gate, models=("ownloop-miniwob-uitars",)) as url:
        command = [
            "record",
            "uitars",
            "--model",
            "m",
            "--endpoint",
            url,
            "--run",
            "c",
            "--suite",
            "miniwob:login-user,focus-text",
            "--workers",
            "2",
            "--settle",
            "0.1",
        ]
        proc = _ownloop(tmp_path, *command)
        gate.wait(2)  # both sessions at step 1, their answers held
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        # Python runs the Ctrl-C handler on the main thread at its next bytecode, which the
        # recorder shows nowhere; a session sees the stop once its answer came. On a loaded
        # machine that took more than a second (the former 1 s slow answer lost the race): the
        # answers stay held 2 s after the signal, whenever it landed.
        time.sleep(2)
        gate.release()
        began = time.monotonic()  # from the answers on: the recorder's own time to stop
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 130, out  # the shell's code for Ctrl-C
        assert "Traceback" not in out and "Fatal" not in out, out
        assert time.monotonic() - began < 15
        assert "run the same command again" in out
        rows = _rows(tmp_path, "select status, passed from sessions")
        # login-user (6 steps) is still under way; focus-text may have finished already.
        assert ("interrupted", None) in rows, rows
        assert all(r in (("interrupted", None), ("finished", True)) for r in rows), rows
        again = CliRunner().invoke(
            cli, ["--store", str(tmp_path), *command], catch_exceptions=False
        )
    assert again.exit_code == 0, again.output
    latest = _rows(
        tmp_path, "select task_id, arg_max(status, started_at) from sessions group by task_id"
    )
    assert sorted(status for _, status in latest) == ["finished", "finished"], latest
    finished = _rows(tmp_path, "select count(*) from sessions where status = 'finished'")
    assert finished == [(2,)]  # nothing finished was run again


def test_error_retries_rerun_a_parse_error_and_keep_every_attempt(
    tmp_path: Path, planner: MiniwobExpert
) -> None:
    # Four garbage answers use up the first session's call and its three re-samples.
    with _serve(planner, "garbage:4") as url:
        out = _record(
            tmp_path, "--suite", "miniwob:click-button", "--endpoint", url, "--error-retries", "1"
        )
    assert "1 finished, 1 parse_error" in out
    rows = _rows(tmp_path, "select attempt, status, passed from sessions order by attempt")
    assert rows == [(1, "parse_error", False), (2, "finished", True)]


def _screenshots(store: Path) -> list[str]:
    return [sha for (sha,) in _rows(store, "select distinct sha256 from screenshots")]


def test_screenshots_end_as_lossless_webp_by_default_and_as_png_with_keep_png(
    tmp_path: Path, expert: str
) -> None:
    task = ("--suite", "miniwob:click-button", "--endpoint", expert, "--run", "r1")
    out = _record(tmp_path / "default", *task)
    kept = _record(tmp_path / "kept", *task, "--keep-png")

    assert "screenshots: " in out and " compacted to lossless WebP (pixel-identical)" in out
    assert "background" not in out  # the run's end waited for it ($OWNLOOP_COMPACT_WAIT)
    assert "screenshots:" not in kept
    default, png = open_store(tmp_path / "default"), open_store(tmp_path / "kept")
    shas, kept_shas = _screenshots(tmp_path / "default"), _screenshots(tmp_path / "kept")
    assert shas and kept_shas
    for sha in kept_shas:  # --keep-png: the browser's bytes, exactly
        assert png.blobs.path(sha).exists() and not png.blobs.compacted_path(sha).exists()
        assert hashlib.sha256(png.get_blob(sha)).hexdigest() == sha
    for sha in shas:  # the default: a WebP under the PNG's name, its pixels checked
        assert not default.blobs.path(sha).exists()
        image, mark = decode_compacted(default.blobs.get_stored(sha))
        assert mark == pixel_sha256(image)
    # The default packed the blobs as it recorded, and the compaction wrote the pack out; with
    # --keep-png there was none.
    assert not list(default.blobs.packs.iterdir()) and not png.blobs.packs.exists()
    # The same page rendered the same in both runs: the WebP gives back the PNG's pixels.
    same = set(shas) & set(kept_shas)
    assert same, "no screenshot of the two runs alike"
    for sha in same:
        with Image.open(io.BytesIO(png.get_blob(sha))) as original:
            image, _ = decode_compacted(default.blobs.get_stored(sha))
            assert pixel_sha256(image) == pixel_sha256(original)
    for store in (tmp_path / "default", tmp_path / "kept"):
        result = CliRunner().invoke(cli, ["--store", str(store), "verify", "--full"])
        assert result.exit_code == 0 and "0 errors" in result.output, result.output


def test_by_default_the_run_ends_at_once_and_its_screenshots_end_compacted_after_it(
    tmp_path: Path, expert: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OWNLOOP_COMPACT_WAIT")  # the default: the run's end does not wait
    out = _record(tmp_path, "--suite", "miniwob:click-button", "--endpoint", expert, "--run", "r1")

    line = next(line for line in out.splitlines() if line.startswith("screenshots: "))
    if "background" in line:  # (it may have been done by the run's end)
        pid = int(line.split("(pid ")[1].split(",")[0])
        # (the session done, the run's pack may still be being written out)
        going = "the run's pack goes on" if "pack goes on" in line else "1 of 1 sessions go on"
        assert line == (
            "screenshots: being compacted to lossless WebP (pixel-identical) in the background; "
            f"{going} after this run (pid {pid}, lowest priority); if it is "
            f"stopped, ownloop --store {tmp_path} compact finishes it"
        )
        assert wait_ended(pid, 600)  # it finishes alone, after the run
    store = open_store(tmp_path)
    shas = _screenshots(tmp_path)
    assert shas
    for sha in shas:  # every screenshot a WebP under its PNG's name, its pixels checked
        assert not store.blobs.path(sha).exists()
        image, mark = decode_compacted(store.blobs.get_stored(sha))
        assert mark == pixel_sha256(image)
    assert not list(store.blobs.packs.iterdir())  # the run's pack written out after it
    result = CliRunner().invoke(cli, ["--store", str(tmp_path), "verify", "--full"])
    assert result.exit_code == 0 and "0 errors" in result.output, result.output


def test_a_run_builds_no_index_and_its_first_reader_does(tmp_path: Path, expert: str) -> None:
    """The recorder writes the journal and the blobs only: on a new store it asks the index
    nothing (no seal, run or session can be there) and builds none; the first query does, and
    the same run again finds its task done through it."""
    from ownloop.recorder.episode import EpisodeLimits
    from ownloop.recorder.runner import RecordOptions, record
    from ownloop.world.suites import load_suite

    store = open_store(tmp_path)
    options = RecordOptions(
        agent="uitars",
        endpoint=expert,
        model="expert",
        run_id="r1",
        limits=EpisodeLimits(12, 120.0),
        settle_s=0.0,
        keep_png=True,
    )
    with load_suite(suite="miniwob:click-button") as suite:
        first = record(store, suite, options)
    assert [r.status for r in first.results] == ["finished"]
    assert store.has_streams()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("index")]
    assert _rows(tmp_path, "select status from sessions where run_id = 'r1'") == [("finished",)]
    with load_suite(suite="miniwob:click-button") as suite:
        again = record(store, suite, options)
    assert again.results == [] and again.skipped == 1
