"""What a run shows while it works: a progress bar and one line per finished task."""

from __future__ import annotations

import io
import sys
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ownloop.recorder.episode import EpisodeResult
from ownloop.store.text import visible

__all__ = ["RunProgress", "result_line"]

_STYLE = {"finished": "green", "endpoint_error": "red", "error": "red", "crashed": "red",
          "parse_error": "yellow", "interrupted": "yellow"}


def result_line(result: EpisodeResult) -> str:
    """One line for a finished task, plain text (task ids, answers and errors made visible)."""
    grade = "" if result.passed is None else (
        f" score={result.score:g} {'passed' if result.passed else 'failed'}")
    answer = "" if result.answer is None else f" answer={result.answer[:40]!r}"
    error = "" if not result.error else f" ({result.error[:80]})"
    return visible(f"{result.task_id} [{result.session_id}] {result.status} "
                   f"steps={result.steps} {result.seconds:.1f}s{grade}{answer}{error}",
                   one_line=True)


def _line_buffered(stream: TextIO) -> None:
    """Flush every line as it is printed, into a pipe too (Python buffers 8 KB there): a recorder
    killed with kill -9 has then lost no line it printed. Rich flushes its own prints; this covers
    everything else written to stdout while a run goes on."""
    if isinstance(stream, io.TextIOWrapper) and not stream.line_buffering:
        stream.reconfigure(line_buffering=True)


class RunProgress:
    """Callbacks for ``record``: ``on_start`` opens the bar, ``on_result`` prints and advances."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)
        _line_buffered(sys.stdout)
        self._progress = Progress(
            TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=self.console, transient=True)
        self._bar: int | None = None

    def on_start(self, run_id: str, todo: int, skipped: int) -> None:
        resumed = f" (resumed: {skipped} done already)" if skipped else ""
        self.console.print(Text(visible(f"run {run_id}: {todo} tasks{resumed}")))
        self._progress.start()
        self._bar = self._progress.add_task(visible(run_id, one_line=True), total=todo)

    def on_result(self, result: EpisodeResult) -> None:
        self._progress.console.print(Text(result_line(result), style=_STYLE.get(result.status, "")),
                                     soft_wrap=True)
        if self._bar is not None:
            self._progress.advance(self._bar)

    def close(self) -> None:
        if self._bar is not None:  # a refused run never started it (stop() would print a line)
            self._progress.stop()
