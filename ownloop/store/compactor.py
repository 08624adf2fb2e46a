"""Screenshots compacted as a run goes: a low-priority child process fed finished sessions.

A recorder hands each session that ended to ``BackgroundCompaction.add``; the first one starts
the compactor, a Python child (``_BOOT``) that forks once before it imports anything and whose
first process exits, so the compactor is no child of the recorder's to reap or wait for, and its
imports already run at the lowest priority. It runs at the lowest priority
the system gives without privileges (Linux's ``SCHED_IDLE``: only on a core nothing else wants;
elsewhere ``nice 19``), reads each session id from its stdin, reads that session's stream and
compacts the PNG blobs its events refer to (``compact.compact_names``: lossless WebP, decoded
again and checked pixel for pixel, the blob keeping its name, exactly as ``ownloop compact``).
It writes a line of JSON a session to its stdout, which the recorder adds up.

Only finished sessions: a session still running may read its screenshots back to send them to
the model, and must get its exact PNG bytes.

While the run goes, a blob is compacted only when the CPUs are free: before each one the
compactor reads Linux's CPU pressure (``/proc/pressure/cpu``, the microseconds in which some
task waited for a CPU) and goes on only while, over the last quarter second or the last blob,
some task waited at most 5% of the time (its own waits count: a task that preempted it wanted
its CPU); otherwise it looks again a quarter second later. ``SCHED_IDLE`` alone was not enough:
on two vCPUs a run with the compactor working beside it took 1.16x a discard sink, 1.04x
without (``docs/performance.md``, "Bytes by default"). A run that keeps the CPUs busy (a fast
model, many workers) thus leaves its compaction for its end; one that waits on a model compacts
as it goes. Without pressure figures (not Linux, or an old kernel) every blob waits for the run's
end. Once the run has ended (its stdin closed), the compactor no longer waits for free CPUs: the
lowest priority alone.

At the run's end ``finish(wait_s)`` closes the child's stdin and waits up to ``wait_s`` (by
default not at all) for it to be done with what is left; after that the child goes on alone
(the run is handed off: its stdin already holds every session id) and ends when it is done.
Killing it at any point, -9 included, loses nothing: a blob is a PNG, a PNG beside its WebP, a
WebP, or a record in a pack, each readable and ``verify``-clean, and ``ownloop compact``
finishes what it left.

Packs (``packs.py``): a recorder appends its blobs to a pack while it records. The compactor
reads a finished session's screenshots from it and writes each as its WebP; after each session it
writes out the packs the run filled and closed (their other blobs as they are: a session still
running reads its exact bytes back) and removes them; when the run is over
(its stdin closed) and the recorder has closed its pack, it writes out what is left in the pack
as files (``compact.unpack``), removes it, and says so in its last line.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, NamedTuple

from ownloop.errors import OwnloopError

__all__ = [
    "WAIT_S",
    "WAIT_VARIABLE",
    "BackgroundCompaction",
    "CompactionEnd",
    "CpuPressure",
    "main",
    "pace",
    "wait_seconds",
]

WAIT_S = 0.0  # how long a run's end waits for its compaction, by default: not at all
WAIT_VARIABLE = "OWNLOOP_COMPACT_WAIT"
PRESSURE = Path("/proc/pressure/cpu")
QUIET = 0.05  # at most this share of the time some task waited for a CPU: the CPUs are free
WINDOW_S = 0.25  # how long the compactor looks at the pressure before a blob, while it waits
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
    sessions_done: int = 0  # sessions it is done with (compacted, or named in errors)

    def summary(self) -> str:
        """One line for the run's closing lines ("" when nothing was handed to it)."""
        if not self.sessions:
            return ""
        saved = f"{_mb(self.bytes_before)} -> {_mb(self.bytes_after)}"
        if self.done:
            line = f"screenshots: {self.compacted} compacted to lossless WebP (pixel-identical), "
            line += saved
        else:
            pid = f"pid {self.pid}, " if self.pid is not None else ""
            so_far = f", {self.compacted} so far ({saved})" if self.compacted else ""
            left = self.sessions - self.sessions_done
            going = (
                f"{left} of {self.sessions} sessions go on"
                if left
                else "the run's pack goes on"  # (every session done: what is left in it)
            )
            line = (
                "screenshots: being compacted to lossless WebP (pixel-identical) in the "
                f"background{so_far}; {going} after this run ({pid}lowest priority); if it is "
                "stopped, ownloop compact finishes it"
            )
        if self.errors:
            line += f"; {len(self.errors)} sessions not compacted: {self.errors[0]}"
        return line


def wait_seconds() -> float:
    """How long a run's end waits for its compaction: ``$OWNLOOP_COMPACT_WAIT`` seconds, else
    not at all (0)."""
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

    Thread-safe: workers add the sessions they finish. ``pressure``: where the compactor reads
    the CPU pressure (tests give a file of their own).
    """

    def __init__(
        self, store_root: Path, wait_s: float | None = None, *, pressure: Path = PRESSURE
    ) -> None:
        self.store_root = store_root
        self.wait_s = wait_seconds() if wait_s is None else wait_s
        self.pressure = pressure
        self._done_sessions = 0
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
        self._unpacked = False  # it said its last line: the packs written out

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
        with self._lock:  # done: its stdout ended, or it said it was done with every session
            done = not reader.is_alive() or (
                self._done_sessions >= len(self._added) and self._unpacked
            )
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
                self._done_sessions,
            )

    def _start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(self.store_root), str(self.pressure)],
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
                elif "unpacked" in line:  # its last line: the packs written out
                    self._unpacked = True
                    self._compacted += line.get("compacted", 0)
                    self._before += line.get("before", 0)
                    self._after += line.get("after", 0)
                    if "error" in line:
                        self._errors.append(f"packs: {line['error']}")
                elif "error" in line:
                    self._errors.append(f"{line['session']}: {line['error']}")
                    self._done_sessions += 1
                else:
                    self._done_sessions += 1
                    self._compacted += line["compacted"]
                    self._before += line["before"]
                    self._after += line["after"]


# ------------------------------------------------------------------ the child


class CpuPressure:
    """How much of the time, lately, some task waited for a CPU: Linux's pressure stall
    information (``/proc/pressure/cpu``'s ``some total``, microseconds), read twice.

    ``share()`` is the share of the time since its last call in which some task waited; None at
    the first call, after more than ``4 * WINDOW_S`` (too long ago to say how it is now), or
    when the figures cannot be read (``available`` is then False).
    """

    def __init__(self, path: Path = PRESSURE, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._mark: tuple[float, int] | None = None
        self.available = self._stalled() is not None

    def share(self) -> float | None:
        stalled, now = self._stalled(), self._clock()
        if stalled is None:
            self.available = False
            return None
        mark, self._mark = self._mark, (now, stalled)
        if mark is None or not 0 < now - mark[0] <= 4 * WINDOW_S:
            return None
        return max(0, stalled - mark[1]) / 1e6 / (now - mark[0])

    def _stalled(self) -> int | None:
        try:
            text = self.path.read_text()
        except OSError:
            return None
        for line in text.splitlines():  # "some avg10=0.00 avg60=0.00 avg300=0.00 total=123"
            fields = line.split()
            if fields[:1] == ["some"]:
                total = dict(field.partition("=")[::2] for field in fields[1:]).get("total", "")
                return int(total) if total.isdigit() else None
        return None


def pace(pressure: CpuPressure, ended: threading.Event) -> None:
    """Before each blob: while the run goes (``ended`` not set), wait until the CPUs are free
    (some task waited for one at most ``QUIET`` of the time, over the last blob or the last
    ``WINDOW_S``); without pressure figures, until the run has ended. After it, at once."""
    while not ended.is_set():
        if not pressure.available:
            ended.wait()
            return
        share = pressure.share()
        if share is not None and share <= QUIET:
            return
        ended.wait(WINDOW_S)


def _sessions(stdin: IO[str], todo: queue.Queue[str | None], ended: threading.Event) -> None:
    """Session ids from the recorder, as they come; ``ended`` once it closed the pipe."""
    try:
        for raw in stdin:
            if raw.strip():
                todo.put(raw.strip())
    finally:
        ended.set()
        todo.put(None)


def _priority(lowest: bool, pid: int) -> bool:
    """The compactor ``pid`` at the lowest priority (Linux's SCHED_IDLE: only on a core nothing
    else wants), or back at the normal one (from SCHED_IDLE only: an unprivileged process may
    leave it). False when that could not be done. (The compactor sets its own lowest priority
    in ``_BOOT``, before its imports.)"""
    try:
        policy = os.SCHED_IDLE if lowest else os.SCHED_OTHER
        os.sched_setscheduler(pid, policy, os.sched_param(0))
    except (AttributeError, OSError):
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


# The compactor's first lines, before any of ownloop is imported (that takes 0.1 s of CPU, which
# would be the normal priority's): fork (the recorder reaps the first process at once; the fork
# goes on, no child of the recorder's), say the pid (the recorder may change its priority), go
# to the lowest priority (SCHED_IDLE, else nice 19), and only then import and run ``main``.
_BOOT = """\
import os, sys
if hasattr(os, "fork") and os.fork():
    os._exit(0)
try:
    print('{"pid": %d}' % os.getpid(), flush=True)
except OSError:
    pass
try:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
except (AttributeError, OSError):
    try:
        os.nice(19)
    except OSError:
        pass
from ownloop.store.compactor import main
main(sys.argv[1:])
"""


def main(argv: list[str] | None = None) -> None:
    """The compactor: ``STORE [PRESSURE]`` as arguments, session ids on stdin. The recorder
    starts it through ``_BOOT`` (forked off, at the lowest priority); ``python -m
    ownloop.store.compactor STORE`` runs it as it is."""
    args = argv or sys.argv[1:]
    root, pressure = Path(args[0]), CpuPressure(Path(args[1]) if len(args) > 1 else PRESSURE)
    told = True
    from ownloop.store import Store
    from ownloop.store.compact import compact_names, unpack
    from ownloop.store.verify import blob_references

    store = Store(root, fsync=True)
    todo: queue.Queue[str | None] = queue.Queue()
    ended = threading.Event()  # the recorder closed the pipe: the run is over
    threading.Thread(target=_sessions, args=(sys.stdin, todo, ended), daemon=True).start()
    while (session_id := todo.get()) is not None:
        try:
            names = [
                sha for event in store.read_stream(session_id) for sha in blob_references(event)
            ]
            report = compact_names(store.blobs, names, pace=lambda: pace(pressure, ended))
        except (OwnloopError, OSError) as exc:
            failed = {"session": session_id, "error": str(exc), "cpu": time.process_time()}
            told = told and _say(sys.stdout, failed)
            continue
        try:  # a pack the run filled and closed: out as files, its sessions' WebPs kept
            unpack(store.blobs, full_only=True, pace=lambda: pace(pressure, ended))
        except (OwnloopError, OSError):
            pass  # (left as it is: readable, and written out at the run's end)
        line: dict[str, object] = {
            "session": session_id,
            "compacted": report.compacted,
            "before": report.bytes_before,
            "after": report.bytes_after,
            "cpu": time.process_time(),
        }
        told = told and _say(sys.stdout, line)
    # The run is over and its recorders closed their packs: what the sessions' compaction left
    # in them (blobs no session named, the screenshots kept as PNG) is written out as files.
    try:
        swept = unpack(store.blobs)
        end: dict[str, object] = {
            "unpacked": swept.unpacked,
            "compacted": swept.compacted,
            "before": swept.bytes_before,
            "after": swept.bytes_after,
            "cpu": time.process_time(),
        }
    except (OwnloopError, OSError) as exc:
        end = {"unpacked": 0, "error": str(exc), "cpu": time.process_time()}
    if told:
        _say(sys.stdout, end)


if __name__ == "__main__":
    main()
