"""What a run shows while it works: a progress bar, one line per finished task, and the step each
session in flight is at (a row per session on a terminal; into a pipe or a file, one line at most
every ``step_interval_s`` seconds naming each session's step).
"""

from __future__ import annotations

import io
import sys
import threading
import time
from typing import TYPE_CHECKING, NamedTuple, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from ownloop.store.text import visible

if TYPE_CHECKING:  # a replay's bar (replay.progress) comes without the loop's imports
    from ownloop.recorder.episode import EpisodeResult

__all__ = ["RunProgress", "progress_bar", "result_line"]

_STYLE = {
    "finished": "green",
    "endpoint_error": "red",
    "env_error": "red",
    "error": "red",
    "crashed": "red",
    "parse_error": "yellow",
    "interrupted": "yellow",
}


def result_line(result: EpisodeResult) -> str:
    """One line for a finished task, plain text (task ids, answers and errors made visible)."""
    grade = (
        ""
        if result.passed is None
        else (f" score={result.score:g} {'passed' if result.passed else 'failed'}")
    )
    answer = "" if result.answer is None else f" answer={result.answer[:40]!r}"
    error = "" if not result.error else f" ({_ends_kept(result.error)})"
    return visible(
        f"{result.task_id} [{result.session_id}] {result.status} "
        f"steps={result.steps} {result.seconds:.1f}s{grade}{answer}{error}",
        one_line=True,
    )


def _ends_kept(text: str, limit: int = 400) -> str:
    """``text`` whole up to ``limit`` characters, else its start and its end: an error's useful
    part is often at its end (the exception after a long URL or command)."""
    if len(text) <= limit:
        return text
    return f"{text[: limit // 4]} … {text[-(limit - limit // 4) :]}"


def _line_buffered(stream: TextIO) -> None:
    """Flush every line as it is printed, into a pipe too (Python buffers 8 KB there): a recorder
    killed with kill -9 has then lost no line it printed. Rich flushes its own prints; this covers
    everything else written to stdout while a run goes on."""
    if isinstance(stream, io.TextIOWrapper) and not stream.line_buffering:
        stream.reconfigure(line_buffering=True)


def progress_bar(console: Console) -> Progress:
    """The bar a run (and a replay's steps, a GIF's frames) shows on a terminal: what, the bar,
    done of all, the time it has taken; gone when it stops."""
    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


class _Step(NamedTuple):
    task_id: str
    step: int
    note: str


class RunProgress:
    """Callbacks for ``record``: ``on_start`` opens the bar, ``on_step`` shows where each session
    is, ``on_result`` prints and advances.

    Args:
        max_steps: the step budget, the length of a session's bar on a terminal.
        step_interval_s: into a pipe, the shortest time between two lines of steps.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        max_steps: int | None = None,
        step_interval_s: float = 5.0,
    ) -> None:
        self.console = console or Console(highlight=False)
        _line_buffered(sys.stdout)
        self._progress = progress_bar(self.console)
        self._bar: TaskID | None = None
        self._max_steps = max_steps
        self._interval = step_interval_s
        self._steps: dict[str, _Step] = {}  # session id -> its last step, while it runs
        self._rows: dict[str, TaskID] = {}  # session id -> its row under the bar (a terminal)
        self._last_line = -float("inf")
        self._lock = threading.Lock()

    def on_step(self, session_id: str, task_id: str, step: int, note: str) -> None:
        """A session finished a step: its row moves on, or (a pipe) a line if one is due."""
        with self._lock:
            self._steps[session_id] = _Step(task_id, step, note)
            if self.console.is_terminal:
                self._show_row(session_id)
                return
            now = time.monotonic()
            if now - self._last_line < self._interval:
                return
            self._last_line = now
            line = "; ".join(
                f"{s.task_id} step {s.step}" + (f" ({s.note})" if s.note else "")
                for s in self._steps.values()
            )
        self.console.print(Text(visible(f"  at: {line}", one_line=True)), soft_wrap=True)

    def _show_row(self, session_id: str) -> None:
        current = self._steps[session_id]
        what = visible(
            f"  {current.task_id}" + (f" ({current.note})" if current.note else ""), one_line=True
        )
        row = self._rows.get(session_id)
        if row is None:
            self._rows[session_id] = self._progress.add_task(
                what, total=self._max_steps, completed=current.step
            )
        else:
            self._progress.update(row, description=what, completed=current.step)

    def on_start(self, run_id: str, todo: int, skipped: int) -> None:
        resumed = f" (resumed: {skipped} done already)" if skipped else ""
        self.console.print(Text(visible(f"run {run_id}: {todo} tasks{resumed}")))
        self._progress.start()
        self._bar = self._progress.add_task(visible(run_id, one_line=True), total=todo)

    def on_result(self, result: EpisodeResult) -> None:
        with self._lock:
            self._steps.pop(result.session_id, None)
            row = self._rows.pop(result.session_id, None)
        if row is not None:
            self._progress.remove_task(row)
        self._progress.console.print(
            Text(result_line(result), style=_STYLE.get(result.status, "")), soft_wrap=True
        )
        if self._bar is not None:
            self._progress.advance(self._bar)

    def close(self) -> None:
        if self._bar is not None:  # a refused run never started it (stop() would print a line)
            self._progress.stop()
