"""``ownloop record`` fails fast and says so in its exit status, through the real CLI.

The endpoint is checked before anything is written or a browser starts (a dead one, a key it
refuses, a model it does not serve: one line naming the URL); a run whose endpoint dies stops
after ``--max-endpoint-errors`` sessions in a row and leaves the rest for a resume; the exit
status tells CI whether a session failed; Ctrl-C counts each session once.

Most runs go through the CLI in this process (``_record``: click's runner, stdout and stderr
apart); a refusal and the Ctrl-C run in a process of their own (``_ownloop``), as a user's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver import FaultyResponder, ModelServer, Reply
from ownloop.modelserver.endpoint import Serving, make_server

_ROOT = Path(__file__).resolve().parents[2]
_DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
_DONE = "Thought: Done.\nAction: finished(content='42')"


def _ownloop(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ownloop --store STORE ARGS`` as a user runs it: its own process, from the store's
    folder."""
    return subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        cwd=store.parent,
        timeout=300,
    )


def _record_argv(tasks: Path, endpoint: str, *args: str, base: str) -> list[str]:
    head = ["record", "uitars", "--tasks", str(tasks), "--base", base, "--endpoint", endpoint]
    return [*head, "--settle", "0", "--retries", "0", *args]


# Warnings a plain ``python`` process does not print (its default filters); every other one
# would be a line on its stderr.
_UNSHOWN = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def _record(
    store: Path, tasks: Path, endpoint: str, *args: str, base: str = "http://127.0.0.1:1"
) -> subprocess.CompletedProcess[str]:
    """``ownloop --store STORE record uitars ...`` through the same CLI in this process, from the
    store's folder as ``_ownloop``, with stdout and stderr apart: no interpreter start-up and
    imports per run (a few CPU seconds each). A warning the run raises is put on its stderr, as
    a process would print it; an exception is raised here (a process's traceback)."""
    argv = ["--store", str(store), *_record_argv(tasks, endpoint, *args, base=base)]
    with warnings.catch_warnings(record=True) as raised, contextlib.chdir(store.parent):
        warnings.simplefilter("always")
        result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    shown = [
        f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}"
        for w in raised
        if not issubclass(w.category, _UNSHOWN)
    ]
    stderr = result.stderr + "".join(line + "\n" for line in shown)
    return subprocess.CompletedProcess(argv, result.exit_code, result.stdout, stderr)


def _tasks(tmp_path: Path, count: int, page: str = "form") -> Path:
    path = tmp_path / "tasks.json"
    path.write_text(
        json.dumps(
            [
                {
                    "task_id": f"task-{n:02d}",
                    "prompt": "Fill the form",
                    "start": f"{{BASE}}/{page}",
                    "grader": "none",
                }
                for n in range(count)
            ]
        )
    )
    return path


def _written(store: Path) -> list[str]:
    """Every file in the store (a refusal writes none)."""
    return (
        sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file())
        if store.exists()
        else []
    )


def _ends(store: Path) -> Counter[str]:
    """How many SessionEnded each session has, over every journal stream."""
    ends: Counter[str] = Counter()
    for path in (store / "journal").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)["event"]
            if event["kind"] == "session_ended":
                ends[event["session_id"]] += 1
    return ends


def _statuses(store: Path) -> Counter[str]:
    statuses: Counter[str] = Counter()
    for path in (store / "journal").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)["event"]
            if event["kind"] == "session_ended":
                statuses[event["status"]] += 1
    return statuses


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == "", result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


# --- the endpoint check before the run ---------------------------------------------------------


def test_a_dead_endpoint_with_30_tasks_is_one_line_at_once_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store, tasks = tmp_path / "store", _tasks(tmp_path, 30)
    endpoint = "http://alice:hunter22@127.0.0.1:9/v1"
    began = time.monotonic()
    alone = _record(store, tasks, endpoint, "--model", "m")  # no retry: what a refusal costs
    alone_s = time.monotonic() - began
    began = time.monotonic()
    result = _record(store, tasks, endpoint, "--model", "m", "--retries", "3", "--retry-wait", "5")
    took = time.monotonic() - began
    assert _one_error_line(alone) == _one_error_line(result)
    assert _one_error_line(result) == (
        "Error: the endpoint http://127.0.0.1:9/v1 refused the connection (nothing listens on "
        "127.0.0.1:9): start the model server, or check --endpoint"
    )
    # Each of 3 retries would wait 5 s: the check does not retry, it costs what no retry costs.
    assert took < alone_s + 5, (took, alone_s)
    assert not store.exists()  # not even an empty store folder is left behind


def test_a_refusal_keeps_a_store_that_was_there(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "mine").mkdir(parents=True)
    result = _record(store, _tasks(tmp_path, 1), "http://127.0.0.1:9/v1", "--model", "m")
    assert result.returncode == 1
    assert (store / "mine").is_dir()


def test_a_miniwob_suite_is_refused_before_its_browser_reads_the_prompts(tmp_path: Path) -> None:
    """In its own process, as a user runs it: its whole stderr is the one line."""
    store = tmp_path / "store"
    result = _ownloop(
        store, "record", "uitars", "--suite", "miniwob", "--endpoint", _DEAD, "--model", "m"
    )
    assert "refused the connection" in _one_error_line(result)
    assert _written(store) == []


def test_a_host_name_not_found_says_dns(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = _record(store, _tasks(tmp_path, 1), "http://no-such-host.invalid/v1", "--model", "m")
    assert _one_error_line(result) == (
        "Error: the endpoint http://no-such-host.invalid/v1 cannot be reached: the host name "
        "'no-such-host.invalid' was not found (DNS). Check --endpoint"
    )


def test_an_endpoint_that_never_answers_says_so_within_the_call_timeout(tmp_path: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as silent:  # connections wait, never answered
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        began = time.monotonic()
        result = _record(
            tmp_path / "store", _tasks(tmp_path, 1), url, "--model", "m", "--call-timeout", "1"
        )
        took = time.monotonic() - began
    assert _one_error_line(result) == (
        f"Error: the endpoint {url} did not answer GET /models within 1 s: check the server is "
        "up and reachable, or raise --call-timeout"
    )
    assert took < 30


def test_a_model_not_served_names_the_served_models(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with make_server("miniwob", "uitars", serving=Serving(model="uitars15-7b")) as url:
        result = _record(store, _tasks(tmp_path, 3), url, "--model", "uitars-15-7b")
    assert _one_error_line(result) == (
        f"Error: the endpoint {url} does not serve the model 'uitars-15-7b'; it serves: "
        "uitars15-7b. Pass one of them with --model"
    )
    assert _written(store) == []


def test_a_url_that_is_not_the_api_base_says_so(tmp_path: Path) -> None:
    with make_server("miniwob", "uitars") as url:
        result = _record(
            tmp_path / "store", _tasks(tmp_path, 1), url.removesuffix("/v1"), "--model", "m"
        )
    assert _one_error_line(result).endswith(
        "has no GET /models (HTTP 404): is it the API's base URL? It usually ends in /v1"
    )


@pytest.mark.parametrize("key", ["wrong-key-1234", None], ids=["wrong key", "no key"])
def test_a_key_the_endpoint_refuses_says_the_key(tmp_path: Path, key: str | None) -> None:
    store = tmp_path / "store"
    with make_server("miniwob", "uitars", serving=Serving(api_key="right-key-5678")) as url:
        result = _record(
            store, _tasks(tmp_path, 1), url, "--model", "m", *(["--api-key", key] if key else [])
        )
    line = _one_error_line(result)
    if key:
        assert line == (
            f"Error: the endpoint {url} refused the API key (HTTP 401 on GET "
            "/models): pass the right one with --api-key or $OPENAI_API_KEY"
        )
    else:
        assert line == (
            f"Error: the endpoint {url} needs an API key (HTTP 401 on GET /models): "
            "pass it with --api-key or $OPENAI_API_KEY"
        )
    assert _written(store) == []


def test_serve_model_lists_its_model_and_refuses_others_and_a_wrong_key(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    """``ownloop serve-model --model NAME --api-key KEY`` behaves as a real server does."""
    import openai

    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ownloop",
            "serve-model",
            "--model",
            "served-1",
            "--api-key",
            "k-1234",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        cwd=tmp_path,
    )
    spawned.append(server)
    assert server.stdout is not None
    with server.stdout:
        url = re.findall(r"http://\S+", server.stdout.readline().decode())[0]
    api = openai.OpenAI(base_url=url, api_key="k-1234", max_retries=0)
    assert [m.id for m in api.models.list().data] == ["served-1"]
    assert api.models.retrieve("served-1").id == "served-1"
    with pytest.raises(openai.NotFoundError, match="The model `other` does not exist"):
        api.models.retrieve("other")
    with pytest.raises(openai.NotFoundError, match="The model `other` does not exist"):
        api.chat.completions.create(model="other", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url, api_key="nope", max_retries=0).models.list()
    # The CLI says which model to pass.
    result = _record(
        tmp_path / "store", _tasks(tmp_path, 1), url, "--model", "other", "--api-key", "k-1234"
    )
    assert _one_error_line(result).endswith("it serves: served-1. Pass one of them with --model")


def test_a_server_without_a_model_list_is_let_through_unchecked() -> None:
    """A minimal endpoint that only takes POST (GET answers 501) can still be recorded with."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from ownloop.recorder.model import ModelClient

    class PostOnly(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), PostOnly)
    Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        with ModelClient(url, "m", load_blob=lambda sha: b"") as client:
            client.check()  # no error
    finally:
        httpd.shutdown()
        httpd.server_close()


def _connections_to(port: int) -> int:
    """This process's established TCP connections to 127.0.0.1:``port`` (from /proc)."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                ours.add(target[len("socket:[") : -1])
    count = 0
    with open("/proc/net/tcp") as table:
        for line in list(table)[1:]:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and int(remote.split(":")[1], 16) == port and inode in ours:
                count += 1
    return count


def test_an_endpoint_check_leaves_no_connection_open() -> None:
    """The check before a run (and a judge's client after judging) closes the connections its
    client kept alive, instead of leaving them to the garbage collector."""
    from ownloop.recorder.model import ModelClient

    with make_server("miniwob", "uitars") as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        client = ModelClient(url, "ownloop-expert", load_blob=lambda sha: b"")
        with client:
            client.check()
            assert _connections_to(port) == 1  # kept alive between calls
        assert _connections_to(port) == 0


# --- during the run ----------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.slow
def test_an_endpoint_that_dies_stops_the_run_and_a_resume_runs_the_rest(
    tmp_path: Path, site: Any
) -> None:
    store, tasks = tmp_path / "store", _tasks(tmp_path, 8)
    # Two good answers, then every connection dropped: the endpoint died after two sessions.
    dying = ModelServer(FaultyResponder(lambda request: Reply(_DONE), "ok:2,drop"))
    with dying as url:
        result = _record(
            store, tasks, url, "--model", "m", "--run", "r1", "--workers", "1", base=site.base
        )
    assert result.returncode == 4, (result.stdout, result.stderr)
    assert "2 finished" in result.stdout and "3 endpoint_error" in result.stdout, result.stdout
    assert "stopped early: 3 sessions in a row ended endpoint_error (the last: " in result.stdout
    assert (
        "3 tasks not started: run the same command again to run them (and the sessions that "
        "did not end)"
    ) in result.stdout
    assert _statuses(store) == Counter({"finished": 2, "endpoint_error": 3})
    # The resume runs the three endpoint_error tasks again and the three never started.
    with ModelServer(lambda request: Reply(_DONE)) as url:
        again = _record(
            store, tasks, url, "--model", "m", "--run", "r1", "--workers", "1", base=site.base
        )
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert "6 finished" in again.stdout and "2 tasks were done already" in again.stdout


@pytest.mark.browser
@pytest.mark.slow
def test_a_stop_lets_the_other_workers_sessions_end_as_they_will(tmp_path: Path, site: Any) -> None:
    """Two workers: the session in flight when the run stops is not cut short (not interrupted);
    every task is either recorded or counted as not started."""
    store = tmp_path / "store"
    with ModelServer(FaultyResponder(lambda request: Reply(_DONE), "drop")) as url:
        result = _record(
            store,
            _tasks(tmp_path, 8),
            url,
            "--model",
            "m",
            "--workers",
            "2",
            "--max-endpoint-errors",
            "2",
            base=site.base,
        )
    assert result.returncode == 4, (result.stdout, result.stderr)
    statuses = _statuses(store)
    assert set(statuses) == {"endpoint_error"} and statuses["endpoint_error"] >= 2, statuses
    left = int(re.findall(r"^(\d+) tasks not started", result.stdout, re.M)[0])
    assert statuses["endpoint_error"] + left == 8, (statuses, result.stdout)


@pytest.mark.browser
def test_max_endpoint_errors_zero_never_stops_and_exits_3(tmp_path: Path, site: Any) -> None:
    store = tmp_path / "store"
    with ModelServer(FaultyResponder(lambda request: Reply(_DONE), "drop")) as url:
        result = _record(
            store,
            _tasks(tmp_path, 4),
            url,
            "--model",
            "m",
            "--workers",
            "1",
            "--max-endpoint-errors",
            "0",
            base=site.base,
        )
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert "4 endpoint_error" in result.stdout and "stopped early" not in result.stdout


@pytest.mark.browser
def test_a_session_that_ends_error_exits_3_and_all_finished_exits_0(
    tmp_path: Path, site: Any
) -> None:
    store = tmp_path / "store"
    with ModelServer(lambda request: Reply(_DONE)) as url:
        # The page's server is gone: opening it fails, the session ends error.
        failed = _record(
            store, _tasks(tmp_path, 1), url, "--model", "m", "--run", "bad", "--error-retries", "0"
        )
        assert failed.returncode == 3, (failed.stdout, failed.stderr)
        assert "1 error" in failed.stdout
        fine = _record(
            store, _tasks(tmp_path, 2), url, "--model", "m", "--run", "good", base=site.base
        )
    assert fine.returncode == 0 and "2 finished" in fine.stdout, (fine.stdout, fine.stderr)


# --- what a run shows, and Ctrl-C --------------------------------------------------------------


class _Lines:
    """A child's stdout lines as they arrive, with a deadline."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self.stream = process.stdout
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stream, selectors.EVENT_READ)
        self.buffer = b""
        self.lines: list[str] = []

    def until(self, pattern: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(re.search(pattern, line) for line in self.lines):
            left = deadline - time.monotonic()
            assert left > 0, f"no line matching {pattern!r} in {timeout} s: {self.lines}"
            if self.selector.select(left) and not self._read():
                raise AssertionError(f"the pipe closed before {pattern!r}: {self.lines}")

    def rest(self) -> None:
        while self._read():
            pass

    def _read(self) -> bool:
        chunk = os.read(self.stream.fileno(), 65536)
        self.buffer += chunk
        *done, self.buffer = self.buffer.split(b"\n")
        self.lines += [line.decode() for line in done]
        return bool(chunk)


@pytest.mark.browser
@pytest.mark.slow
def test_steps_reach_a_pipe_and_ctrl_c_counts_each_session_once(
    tmp_path: Path, site: Any, spawned: list[subprocess.Popen[bytes]]
) -> None:
    store, tasks = tmp_path / "store", _tasks(tmp_path, 6)
    scroll = "Thought: Look further.\nAction: scroll(start_box='(100,100)', direction='down')"
    # Every answer takes a second and never ends the task: sessions are mid-way at the Ctrl-C.
    with ModelServer(FaultyResponder(lambda request: Reply(scroll), "slow=1")) as url:
        recorder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ownloop",
                "--store",
                str(store),
                "record",
                "uitars",
                "--tasks",
                str(tasks),
                "--base",
                site.base,
                "--endpoint",
                url,
                "--model",
                "m",
                "--settle",
                "0",
                "--workers",
                "2",
                "--run",
                "c1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
        )
        spawned.append(recorder)
        lines = _Lines(recorder)
        # Into a pipe, the step each session is at, one line at most every few seconds.
        lines.until(r"^  at: task-0\d step \d+ \(scroll\)", timeout=120)
        recorder.send_signal(signal.SIGINT)
        assert recorder.wait(90) == 130
        lines.rest()
        lines.stream.close()
    assert lines.lines[0] == "run c1: 6 tasks", lines.lines
    summary = [line for line in lines.lines if line.startswith("run c1: ")][-1]
    ends = _ends(store)
    assert ends and set(ends.values()) == {1}, ends  # each session ended once
    assert summary.startswith(f"run c1: {len(ends)} interrupted in "), (summary, ends)
    assert _statuses(store) == Counter({"interrupted": len(ends)})
    steps = [line for line in lines.lines if line.startswith("  at: ")]
    assert len(steps) <= 2, steps  # at most one line every 5 s
