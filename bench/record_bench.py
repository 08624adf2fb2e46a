"""What recording costs: the same expert-driven MiniWoB run with the store on, and with a sink that
discards every event (screenshots kept in memory only, as a bare harness would to send them).

Prints the wall-time ratio (aim: <= 1.03) and, per step, the recorder's own milliseconds (event
appends with fsync and blob writes) beside the screenshot's and the model call's.

    .venv/bin/python bench/record_bench.py [--tasks N] [--rounds R]
    .venv/bin/python bench/record_bench.py --smoke   # one task, one round: the bench still runs
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from ownloop.modelserver.endpoint import make_server
from ownloop.recorder.episode import EpisodeLimits
from ownloop.recorder.runner import RecordOptions, record
from ownloop.store import Store
from ownloop.store.compactor import CompactionEnd
from ownloop.store.events import Event, StreamHead
from ownloop.store.journal import StreamWriter
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
            return super().put_blob(data)
        finally:
            self.timer.seconds += time.perf_counter() - began


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


def _run(
    store: Store, endpoint: str, tasks: str, run_id: str, keep_png: bool = False
) -> tuple[float, int, CompactionEnd | None]:
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
        began = time.perf_counter()
        summary = record(store, suite, options)
        seconds = time.perf_counter() - began
    assert all(r.status == "finished" for r in summary.results), summary.counts()
    return seconds, sum(r.steps for r in summary.results), summary.compaction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--smoke", action="store_true", help="one task, one round, no warm-up (a check)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.rounds = 1, 1
    tasks = ",".join(TASKS.split(",")[: args.tasks])
    recorded, discarded, store_seconds, steps_total = [], [], 0.0, 0
    ends: list[CompactionEnd | None] = []
    with tempfile.TemporaryDirectory() as tmp, make_server("miniwob", "uitars") as endpoint:
        root = Path(tmp)
        if not args.smoke:  # plans cached, pages hot (the discarding run again: no new path)
            _run(DiscardingStore(root / "warm"), endpoint, tasks, "warm", keep_png=True)
        for n in range(args.rounds):  # alternate the order so drift hits both alike
            timer = _Timed()
            pair = [
                ("rec", TimedStore(root / f"rec{n}", timer)),
                ("null", DiscardingStore(root / f"null{n}")),
            ]
            for kind, store in pair if n % 2 == 0 else reversed(pair):
                seconds, steps, end = _run(
                    store, endpoint, tasks, f"{kind}{n}", keep_png=kind == "null"
                )
                (recorded if kind == "rec" else discarded).append(seconds)
                if kind == "rec":
                    store_seconds += timer.seconds
                    steps_total += steps
                    ends.append(end)
        real = Store(root / "rec0")
        shot_ms, call_ms = real.sql(
            "select (select avg(capture_ms) from screenshots), "
            "(select avg(latency_ms) from model_calls)"
        ).rows[0]
    rec, null = statistics.median(recorded), statistics.median(discarded)
    per_run = steps_total // args.rounds
    load = os.getloadavg()
    print(f"tasks: {args.tasks}, rounds: {args.rounds}, steps per run: {per_run}")
    print(
        f"load         : {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (1, 5, 15 min), "
        f"{os.cpu_count()} cores"
    )
    print(f"recording on : median {rec:.2f} s  {[round(s, 2) for s in recorded]}")
    print(f"discarding   : median {null:.2f} s  {[round(s, 2) for s in discarded]}")
    print(f"ratio        : {rec / null:.3f}  (aim <= 1.03)")
    print(
        f"per step     : recorder {1000 * store_seconds / steps_total:.2f} ms, "
        f"screenshot {shot_ms:.1f} ms, model call {call_ms:.1f} ms"
    )
    done = [end for end in ends if end is not None]
    if done:
        before, after = sum(e.bytes_before for e in done), sum(e.bytes_after for e in done)
        print(
            f"compaction   : {sum(e.compacted for e in done) // len(done)} screenshots a run to "
            f"lossless WebP in the background, {after / max(before, 1):.2f} of their bytes, "
            f"CPU {sum(e.cpu_s for e in done) / len(done):.2f} s a run (lowest priority); "
            f"finished by the run's end in {sum(e.done for e in done)} of {len(done)} runs"
        )


if __name__ == "__main__":
    main()
