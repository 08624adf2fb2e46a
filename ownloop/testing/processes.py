"""Whether a process still runs, and waiting for it to end: for tests and benches that wait on a
process ownloop hands off (the background compactor, whose pid a run's closing line names)."""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["running", "wait_ended"]


def running(pid: int) -> bool:
    """Process ``pid`` is there and not a zombie (a process handed off to an init that does not
    reap it stays a zombie once it ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (not Linux): whether a signal could reach it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state != "Z"


def wait_ended(pid: int, timeout_s: float, poll_s: float = 0.05) -> bool:
    """Wait up to ``timeout_s`` for process ``pid`` to end; whether it did."""
    deadline = time.monotonic() + timeout_s
    while running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True
