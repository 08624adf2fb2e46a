"""What recording costs: the same expert-driven MiniWoB run with the store on, and with a sink that
discards every event (screenshots kept in memory only, as a bare harness would to send them).

Prints the wall-time ratio (aim: <= 1.03), the CPU seconds of both runs (this process and the
browsers it started; the background compactor's apart), and, per step, the recorder's own
milliseconds (event appends with fsync and blob writes) beside the screenshot's and the model
call's. The recorder's default compacts each finished session's screenshots in the background
and does not wait for it: after each recording run, outside the timed window, the bench waits
for the compactor to end (so one round's compaction does not land in the next round's timing)
and prints how long after the run's end that was, and the store's bytes against the plain
folder of the same steps (a PNG and a ``traj.jsonl`` line each, the seed's layout).

    .venv/bin/python bench/record_bench.py [--tasks N] [--rounds R] [--keep-png]
    .venv/bin/python bench/record_bench.py --smoke   # one task, one round: the bench still runs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ownloop.modelserver.endpoint import make_server
from ownloop.recorder.episode import EpisodeLimits
from ownloop.recorder.runner import RecordOptions, record
from ownloop.store import Store
from ownloop.store.compactor import CompactionEnd
from ownloop.store.events import Event, StreamHead
from ownloop.store.journal import StreamWriter
from ownloop.testing.processes import running
from ownloop.world.suites import load_suite

TASKS = "click-button,click-link,enter-text,focus-text,click-checkboxes,login-user"


class _Timed:
    """Adds up the seconds spent in the store's write paths."""

    def __init__(self) -> None:
        self.seconds = 0.0


class TimedStore(Store):
    """The real store, with its write paths timed."""

    def __init__(self, root: Path, timer: _Timed) -> None:
        root.mkdir(parents=True)
        super().__init__(root)
        self.timer = timer
        self.written: dict[str, bytes] = {}  # each blob's bytes as written (for the plain folder)

    def stream(self, stream_id: str | None = None) -> StreamWriter:
        writer = super().stream(stream_id)
        timer, append = self.timer, writer.append

        def timed(events: Sequence[Event]) -> None:
            began = time.perf_counter()
            append(events)
            timer.seconds += time.perf_counter() - began

        writer.append = timed  # type: ignore[method-assign]
        return writer

    def put_blob(self, data: bytes) -> str:
        began = time.perf_counter()
        try:
            sha = super().put_blob(data)
        finally:
            self.timer.seconds += time.perf_counter() - began
        self.written[sha] = data
        return sha


class _NullWriter:
    """A stream that keeps nothing but its count, so the run's catalog can still name its head."""

    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        self._events = 0

    def append(self, events: Sequence[Event]) -> None:
        self._events += len(events)

    def head(self) -> StreamHead:
        return StreamHead(stream=self.stream_id, events=self._events, head="")

    def close(self) -> None:
        pass

    def __enter__(self) -> _NullWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class DiscardingStore(Store):
    """Events go nowhere; blobs stay in memory so the model can still be sent the screenshots."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True)
        super().__init__(root)
        self._blobs: dict[str, bytes] = {}

    def stream(self, stream_id: str | None = None) -> StreamWriter:
        # duck-typed: the recorder only appends, asks for the head and closes
        return _NullWriter(stream_id or uuid.uuid4().hex)  # type: ignore[return-value]

    def put_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        self._blobs[sha] = data
        return sha

    def get_blob(self, sha256: str) -> bytes:
        return self._blobs[sha256]


class Run(NamedTuple):
    seconds: float  # wall time of the run, as a user waits for it
    cpu_s: float  # CPU of this process and the children it reaped (the browsers) meanwhile
    steps: int
    compaction: CompactionEnd | None
    tail_s: float = 0.0  # how long after the run's end its background compaction ended
    compactor_cpu_s: float = 0.0  # the compactor's CPU, last seen before it ended
    held_bytes: int = 0  # the store's bytes once the compaction ended, before any query


def _cpu() -> float:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _run(store: Store, endpoint: str, tasks: str, run_id: str, keep_png: bool = False) -> Run:
    """One run; the recorder's default compacts each finished session's screenshots in the
    background (``keep_png``: not, as a bare harness keeps them)."""
    options = RecordOptions(
        agent="uitars",
        endpoint=endpoint,
        model="expert",
        run_id=run_id,
        workers=1,
        limits=EpisodeLimits(12, 120.0),
        settle_s=0.0,
        keep_png=keep_png,
    )
    with load_suite(suite=f"miniwob:{tasks}") as suite:
        began, cpu = time.perf_counter(), _cpu()
        summary = record(store, suite, options)
        seconds, cpu = time.perf_counter() - began, _cpu() - cpu
    assert all(r.status == "finished" for r in summary.results), summary.counts()
    steps = sum(r.steps for r in summary.results)
    end = summary.compaction
    if end is None or end.done or end.pid is None:
        compactor_cpu = end.cpu_s if end is not None else 0.0
        return Run(seconds, cpu, steps, end, 0.0, compactor_cpu, tree_bytes(store.root))
    ended, compactor_cpu = time.perf_counter(), end.cpu_s
    while running(end.pid):  # outside the timed window: the next run starts on a quiet CPU
        compactor_cpu = max(compactor_cpu, _cpu_of(end.pid))
        time.sleep(0.02)
    tail = time.perf_counter() - ended
    return Run(seconds, cpu, steps, end, tail, compactor_cpu, tree_bytes(store.root))


def _cpu_of(pid: int) -> float:
    """Process ``pid``'s CPU seconds so far (0 where /proc cannot say)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_bytes(root: Path) -> int:
    """What ``root`` takes on disk (allocated blocks: a small file costs a whole block)."""
    if root.is_file():
        return root.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def write_plain(store: TimedStore, folder: Path) -> None:
    """The same steps in the seed's layout (as OSWorld's result folders): per session a folder
    with ``traj.jsonl`` (a line per step: its response and action) and the step's PNG."""
    rows = store.sql(
        "select s.session_id, s.step, s.screenshot_sha256, s.response, s.actions::varchar, "
        "x.prompt from steps s join sessions x using (session_id) order by all"
    ).rows
    for session_id, step, sha, response, actions, prompt in rows:
        session = folder / session_id
        if not session.exists():
            session.mkdir(parents=True)
            (session / "instruction.txt").write_text(prompt or "")
        name = f"step_{step}.png"
        (session / name).write_bytes(store.written[sha])
        line = {"step_num": step, "action": actions, "response": response, "screenshot_file": name}
        with open(session / "traj.jsonl", "a") as log:
            log.write(json.dumps(line) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--keep-png", action="store_true", help="the recording keeps PNGs: no compaction"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="one task, one round, no warm-up (a check)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.rounds = 1, 1
    tasks = ",".join(TASKS.split(",")[: args.tasks])
    runs: dict[str, list[Run]] = {"rec": [], "null": []}
    timer = _Timed()
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp, make_server("miniwob", "uitars") as endpoint:
        root = Path(tmp)
        if not args.smoke:  # plans cached, pages hot (the discarding run again: no new path)
            _run(DiscardingStore(root / "warm"), endpoint, tasks, "warm", keep_png=True)
        stores = []
        for n in range(args.rounds):  # alternate the order so drift hits both alike
            pair: list[tuple[str, Store]] = [
                ("rec", TimedStore(root / f"rec{n}", timer)),
                ("null", DiscardingStore(root / f"null{n}")),
            ]
            for kind, store in pair if n % 2 == 0 else reversed(pair):
                keep = kind == "null" or args.keep_png
                runs[kind].append(_run(store, endpoint, tasks, f"{kind}{n}", keep_png=keep))
                loads.append(os.getloadavg()[0])
            stores.append(pair[0][1])
        _report(args, runs, timer, loads, stores, root)


def _report(
    args: argparse.Namespace,
    runs: dict[str, list[Run]],
    timer: _Timed,
    loads: list[float],
    stores: list[Store],
    root: Path,
) -> None:
    shot_ms, call_ms = (
        stores[0]
        .sql(
            "select (select avg(capture_ms) from screenshots), "
            "(select avg(latency_ms) from model_calls)"
        )
        .rows[0]
    )
    plain = 0
    for n, store in enumerate(stores):
        assert isinstance(store, TimedStore)
        write_plain(store, root / f"plain{n}")
        plain += tree_bytes(root / f"plain{n}")
    held = sum(tree_bytes(store.root) for store in stores)
    parts = {
        part: sum(tree_bytes(p) for store in stores for p in store.root.glob(f"{part}*"))
        for part in ("journal", "blobs", "claims", "index")
    }
    index = parts["index"]
    rec = statistics.median(r.seconds for r in runs["rec"])
    null = statistics.median(r.seconds for r in runs["null"])
    steps = sum(r.steps for r in runs["rec"])
    load = os.getloadavg()
    print(f"tasks: {args.tasks}, rounds: {args.rounds}, steps per run: {steps // args.rounds}")
    print(
        f"load         : {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (1, 5, 15 min), "
        f"{os.cpu_count()} cores; 1 min load through the runs {min(loads):.1f}-{max(loads):.1f}"
    )
    for name, kind in (("recording on", "rec"), ("discarding  ", "null")):
        times = [round(r.seconds, 2) for r in runs[kind]]
        cpu = statistics.median(r.cpu_s for r in runs[kind])
        median = rec if kind == "rec" else null
        print(f"{name} : median {median:.2f} s  {times}, CPU median {cpu:.2f} s")
    keep = " (--keep-png: no compaction)" if args.keep_png else ""
    print(f"ratio        : {rec / null:.3f}  (aim <= 1.03){keep}")
    print(
        f"per step     : recorder {1000 * timer.seconds / steps:.2f} ms, "
        f"screenshot {shot_ms:.1f} ms, model call {call_ms:.1f} ms"
    )
    done = [r for r in runs["rec"] if r.compaction is not None]
    if done:
        ends = [r.compaction for r in done if r.compaction is not None]
        before, after = sum(e.bytes_before for e in ends), sum(e.bytes_after for e in ends)
        tails = [round(r.tail_s, 2) for r in done]
        print(
            f"compaction   : {sum(e.compacted for e in ends) // len(ends)} screenshots a run by "
            f"its end, of {sum(e.sessions for e in ends) // len(ends)} sessions; finished by "
            f"the run's end in {sum(e.done for e in ends)} of {len(ends)} runs, the others "
            f"{tails} s after it (outside the timed window); the compactor's CPU "
            f"{statistics.median(r.compactor_cpu_s for r in done):.2f} s a run (lowest priority)"
        )
        if before:
            print(f"               {after / before:.2f} of the compacted PNGs' bytes by the end")
    at_end = sum(r.held_bytes for r in runs["rec"])
    print(
        f"bytes        : plain folder {plain / 1e6:.2f} MB = 1.00; the store as the run left "
        f"it, once its compaction ended {at_end / plain:.2f} ({at_end / 1e6:.2f} MB: a run "
        f"writes no index); with the index a first query builds {held / plain:.2f} "
        f"({held / 1e6:.2f} MB, index {index / 1e6:.2f} MB)"
    )
    print("               " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in parts.items()))


if __name__ == "__main__":
    main()
