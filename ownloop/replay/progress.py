"""Progress of one long piece of work (the steps of a re-execution, the frames of a GIF), on
stderr so stdout stays pipeable: a bar on a terminal, else one plain line at most every few
seconds (and one for the last item), e.g. ``replay: step 3 of 7``."""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import Progress
from rich.text import Text

from ownloop.recorder.progress import progress_bar
from ownloop.store.text import visible

__all__ = ["StepProgress"]


class StepProgress:
    """``with StepProgress("replay", "step", 7) as progress: progress.advance(n)``.

    Args:
        what: the work, first on each line (e.g. ``replay``).
        unit: what is counted (``step``, ``frame``).
        total: how many there will be, or None when unknown.
        console: where to show it (default stderr).
        interval_s: not on a terminal, the shortest time between two lines.
    """

    def __init__(
        self,
        what: str,
        unit: str,
        total: int | None,
        *,
        console: Console | None = None,
        interval_s: float = 3.0,
    ) -> None:
        self.what, self.unit, self.total = what, unit, total
        self.console = console or Console(stderr=True, highlight=False)
        self._interval = interval_s
        self._last = -float("inf")
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._bar = None
        if self.console.is_terminal:
            self._progress = progress_bar(self.console)
            self._bar = self._progress.add_task(visible(what, one_line=True), total=total)

    def __enter__(self) -> StepProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, done: int, note: str = "") -> None:
        """``done`` items are finished (``note``: what the last one was, shown beside it)."""
        if self._progress is not None and self._bar is not None:
            label = f"{self.what} {self.unit} {done}" + (f" ({note})" if note else "")
            self._progress.update(
                self._bar, completed=done, description=visible(label, one_line=True)
            )
            return
        with self._lock:
            now = time.monotonic()
            last = self.total is not None and done >= self.total
            if now - self._last < self._interval and not last:
                return
            self._last = now
        of = f" of {self.total}" if self.total is not None else ""
        line = f"{self.what}: {self.unit} {done}{of}" + (f" ({note})" if note else "")
        self.console.print(Text(visible(line, one_line=True)), soft_wrap=True)
