"""The recorder's lines reach a pipe as they are printed: a kill -9 loses none of them."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store

_ROOT = Path(__file__).resolve().parents[2]
# As a user's shell has it: Python buffers a pipe 8 KB at a time unless told otherwise (CI and
# this machine may set PYTHONUNBUFFERED, which would hide the problem).
_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


class _Pipe:
    """Lines of a child's stdout, read as they arrive (with a deadline)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self.stream = process.stdout
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stream, selectors.EVENT_READ)
        self.buffer = b""
        self.lines: list[str] = []

    def until(self, wanted: str, timeout: float) -> None:
        """Read until a line containing ``wanted`` arrived; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not any(wanted in line for line in self.lines):
            left = deadline - time.monotonic()
            assert left > 0, f"no line with {wanted!r} within {timeout} s; got {self.lines}"
            if self.selector.select(left) and not self._read():
                raise AssertionError(f"the pipe closed before {wanted!r}; got {self.lines}")

    def rest(self) -> None:
        while self._read():
            pass

    def _read(self) -> bool:
        chunk = os.read(self.stream.fileno(), 65536)
        self.buffer += chunk
        *done, self.buffer = self.buffer.split(b"\n")
        self.lines += [line.decode() for line in done]
        return bool(chunk)


def test_progress_lines_are_flushed_into_a_pipe(spawned: list[subprocess.Popen[bytes]]) -> None:
    """Each line reaches the pipe when printed, also lines printed around the progress bar."""
    code = textwrap.dedent("""
        import time
        from ownloop.recorder.episode import EpisodeResult
        from ownloop.recorder.progress import RunProgress
        progress = RunProgress()
        print("before the bar")
        progress.on_start("r1", 2, 0)
        progress.on_result(EpisodeResult("s1", "task-1", "finished", "42", 2, 1.5, 1.0, True,
                                         None))
        progress.close()
        print("after the bar")
        time.sleep(600)
    """)
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=_ROOT, env=_ENV
    )
    spawned.append(process)
    pipe = _Pipe(process)
    pipe.until("after the bar", timeout=30)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    pipe.rest()
    assert [line for line in pipe.lines if line] == [  # the bar leaves an empty line when off
        "before the bar",
        "run r1: 2 tasks",
        "task-1 [s1] finished steps=2 1.5s score=1 passed answer='42'",
        "after the bar",
    ]


@pytest.mark.browser
@pytest.mark.slow
def test_a_recorder_killed_after_its_first_result_lost_no_printed_line(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    root = tmp_path / "store"
    with make_server("miniwob", "uitars") as endpoint:
        recorder = subprocess.Popen(
            [
                str(_ROOT / ".venv" / "bin" / "ownloop"),
                "--store",
                str(root),
                "record",
                "uitars",
                "--suite",
                "miniwob:click-button,click-link,focus-text,enter-text",
                "--endpoint",
                endpoint,
                "--model",
                "expert",
                "--run",
                "piped",
                "--workers",
                "1",
                "--settle",
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
            env=_ENV,
        )
        spawned.append(recorder)
        pipe = _Pipe(recorder)
        pipe.until("run piped: 4 tasks", timeout=120)
        pipe.until(" steps=", timeout=120)  # the first task's result line, while it runs on
        assert recorder.poll() is None
        recorder.send_signal(signal.SIGKILL)
        recorder.wait(10)
        pipe.rest()
    results = [line for line in pipe.lines if " steps=" in line]
    assert pipe.lines[0] == "run piped: 4 tasks" and results, pipe.lines
    # Every line received is whole, and names a session the journal has ended.
    ended = {
        row[0]
        for row in open_store(root)
        .sql("select session_id from sessions where status is not null and run_id = 'piped'")
        .rows
    }
    for line in results:
        assert line.split(" [")[1].split("]")[0] in ended, line
