"""Screenshots compacted as a run goes: a low-priority child process fed finished sessions.

A recorder hands each session that ended to ``BackgroundCompaction.add``; the first one starts
``python -m ownloop.store.compactor STORE`` (the child forks once and the first process exits, so
the compactor is no child of the recorder's to reap or wait for). It runs at the lowest priority
the system gives without privileges (Linux's ``SCHED_IDLE``: only on a core nothing else wants;
elsewhere ``nice 19``), reads each session id from its stdin, reads that session's stream and
compacts the PNG blobs its events refer to (``compact.compact_names``: lossless WebP, decoded
again and checked pixel for pixel, the blob keeping its name, exactly as ``ownloop compact``).
It writes a line of JSON a session to its stdout, which the recorder adds up.

Only finished sessions: a session still running may read its screenshots back to send them to
the model, and must get its exact PNG bytes.

At the run's end ``finish(wait_s)`` closes the child's stdin and waits up to ``wait_s`` for it
to be done with what is left; after that the child goes on alone (the run is handed off: its
stdin already holds every session id) and ends when it is done. Killing it at any point, -9
included, loses nothing: a blob is a PNG, a PNG beside its WebP, or a WebP, each readable and
``verify``-clean, and ``ownloop compact`` finishes what it left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, NamedTuple

from ownloop.errors import OwnloopError

__all__ = [
    "WAIT_S",
    "WAIT_VARIABLE",
    "BackgroundCompaction",
    "CompactionEnd",
    "main",
    "wait_seconds",
]

WAIT_S = 10.0  # how long a run's end waits for its compaction, by default
WAIT_VARIABLE = "OWNLOOP_COMPACT_WAIT"
_PID_S = 2.0  # how long a run's end waits at most for the compactor to say its pid


class CompactionEnd(NamedTuple):
    """Where the background compaction stood when the run ended."""

    sessions: int  # sessions handed to it
    done: bool  # it finished within the wait
    pid: int | None  # the compactor's process, while it goes on
    compacted: int  # PNG blobs it replaced so far
    bytes_before: int
    bytes_after: int
    errors: tuple[str, ...] = ()
    cpu_s: float = 0.0  # the compactor's CPU time so far

    def summary(self) -> str:
        """One line for the run's closing lines ("" when nothing was handed to it)."""
        if not self.sessions:
            return ""
        saved = f"{_mb(self.bytes_before)} -> {_mb(self.bytes_after)}"
        line = (
            f"screenshots: {self.compacted} compacted to lossless WebP (pixel-identical), {saved}"
        )
        if not self.done:
            pid = f"pid {self.pid}, " if self.pid is not None else ""
            line += (
                f"; the rest of {self.sessions} sessions goes on in the background ({pid}"
                "lowest priority); if it is stopped, ownloop compact finishes it"
            )
        if self.errors:
            line += f"; {len(self.errors)} sessions not compacted: {self.errors[0]}"
        return line


def wait_seconds() -> float:
    """How long a run's end waits for its compaction: ``$OWNLOOP_COMPACT_WAIT`` seconds, else
    10."""
    given = os.environ.get(WAIT_VARIABLE, "")
    try:
        return max(0.0, float(given)) if given else WAIT_S
    except ValueError:
        raise OwnloopError(
            f"${WAIT_VARIABLE} is {given!r}: give seconds, e.g. {WAIT_VARIABLE}=30"
        ) from None


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


class BackgroundCompaction:
    """The recorder's side: starts the compactor at the first session, feeds it, ends it.

    Thread-safe: workers add the sessions they finish.
    """

    def __init__(self, store_root: Path, wait_s: float | None = None) -> None:
        self.store_root = store_root
        self.wait_s = wait_seconds() if wait_s is None else wait_s
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._added: set[str] = set()
        self._compacted = 0
        self._before = 0
        self._after = 0
        self._errors: list[str] = []
        self._cpu_s = 0.0
        self._pid: int | None = None
        self._told_pid = threading.Event()

    @property
    def pid(self) -> int | None:
        """The compactor's process id, once it has started and said it."""
        with self._lock:
            return self._pid

    def add(self, session_id: str) -> None:
        """Compact ``session_id``'s screenshots (a session that ended) in the background."""
        with self._lock:
            if session_id in self._added:
                return
            if self._process is None:
                self._start()
            process = self._process
            assert process is not None and process.stdin is not None
            try:
                process.stdin.write(session_id.encode() + b"\n")
                process.stdin.flush()
            except (BrokenPipeError, ValueError):  # it died: what it left is readable
                return
            self._added.add(session_id)

    def finish(self, wait_s: float | None = None) -> CompactionEnd:
        """No more sessions: wait up to ``wait_s`` (default: the ``wait_s`` it was made with)
        for the compactor, then leave it to go on."""
        wait_s = self.wait_s if wait_s is None else wait_s
        with self._lock:
            process, reader = self._process, self._reader
            if process is not None and process.stdin is not None and not process.stdin.closed:
                try:
                    process.stdin.close()
                except BrokenPipeError:
                    pass
        if process is None or reader is None:
            return CompactionEnd(0, True, None, 0, 0, 0)
        process.wait()  # the first process: it forked the compactor and exited at once
        began = time.monotonic()
        # Its first line, written as soon as it forked (the first process has exited by now).
        self._told_pid.wait(max(wait_s, _PID_S))
        pid = self.pid
        # The recorder waits on it now, idle: the normal priority meanwhile, as the recorder's
        # own work would have; handed off, the lowest again.
        raised = wait_s > 0 and pid is not None and _priority(lowest=False, pid=pid)
        reader.join(max(0.0, wait_s - (time.monotonic() - began)))  # its stdout ends with it
        done = not reader.is_alive()
        if raised and not done and pid is not None:
            _priority(lowest=True, pid=pid)
        with self._lock:
            return CompactionEnd(
                len(self._added),
                done,
                None if done else self._pid,
                self._compacted,
                self._before,
                self._after,
                tuple(self._errors),
                self._cpu_s,
            )

    def _start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "ownloop.store.compactor", str(self.store_root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal stops the run, not this
        )
        assert self._process.stdout is not None
        self._reader = threading.Thread(
            target=self._read, args=(self._process.stdout,), daemon=True, name="compactor"
        )
        self._reader.start()

    def _read(self, stdout: IO[bytes]) -> None:
        with stdout:
            self._read_lines(stdout)
        self._told_pid.set()  # (it ended without saying it: nothing to wait for)

    def _read_lines(self, stdout: IO[bytes]) -> None:
        for raw in stdout:
            line = json.loads(raw)
            with self._lock:
                self._cpu_s = line.get("cpu", self._cpu_s)
                if "pid" in line:
                    self._pid = line["pid"]
                    self._told_pid.set()
                elif "error" in line:
                    self._errors.append(f"{line['session']}: {line['error']}")
                else:
                    self._compacted += line["compacted"]
                    self._before += line["before"]
                    self._after += line["after"]


# ------------------------------------------------------------------ the child


def _priority(lowest: bool, pid: int = 0) -> bool:
    """Process ``pid`` (0: this one's calling thread) at the lowest priority (Linux's
    SCHED_IDLE: only on a core nothing else wants; elsewhere nice 19), or back at the normal one
    (from SCHED_IDLE only: an unprivileged process may leave it, not lower a nice value). False
    when that could not be done."""
    try:
        policy = os.SCHED_IDLE if lowest else os.SCHED_OTHER
        os.sched_setscheduler(pid, policy, os.sched_param(0))
    except (AttributeError, OSError):
        if not lowest or pid:
            return False
        try:
            os.nice(19)
        except OSError:
            return False
    return True


def _say(out: IO[str], line: dict[str, object]) -> bool:
    """Tell the recorder; False once it is gone (its pipe closed)."""
    try:
        out.write(json.dumps(line) + "\n")
        out.flush()
    except (BrokenPipeError, OSError):
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    """The compactor: ``python -m ownloop.store.compactor STORE``, session ids on stdin."""
    # (first only what the pid line needs: the recorder may wait on it)
    root = Path((argv or sys.argv[1:])[0])
    if hasattr(os, "fork") and os.fork():  # the recorder reaps this one at once; the fork goes on
        os._exit(0)
    told = _say(sys.stdout, {"pid": os.getpid()})  # first: the recorder may change its priority
    _priority(lowest=True)
    from ownloop.store import Store
    from ownloop.store.compact import compact_names
    from ownloop.store.verify import blob_references

    store = Store(root, fsync=True)
    for raw in sys.stdin:
        session_id = raw.strip()
        if not session_id:
            continue
        try:
            names = [
                sha for event in store.read_stream(session_id) for sha in blob_references(event)
            ]
            report = compact_names(store.blobs, names)
        except (OwnloopError, OSError) as exc:
            failed = {"session": session_id, "error": str(exc), "cpu": time.process_time()}
            told = told and _say(sys.stdout, failed)
            continue
        line: dict[str, object] = {
            "session": session_id,
            "compacted": report.compacted,
            "before": report.bytes_before,
            "after": report.bytes_after,
            "cpu": time.process_time(),
        }
        told = told and _say(sys.stdout, line)


if __name__ == "__main__":
    main()
