"""Store benchmark: append cost against a plain harness, ingest rate, query and sync latency.

    .venv/bin/python bench/store_bench.py            # the issue's sizes (a few minutes)
    .venv/bin/python bench/store_bench.py --quick    # a tenth of them

Prints one line per figure, with the aim beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from io import BytesIO
from pathlib import Path

from PIL import Image, ImageDraw

from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.store.journal import decode_lines
from ownloop.testing import synthetic
from ownloop.testing.synthetic import T0, Acted, Grade, Session, Step

AGENTS = ("uitars", "opencua", "fara7b", "molmoweb")
SMOKE = False  # --smoke: every figure taken once, on tiny sizes (a check, not a figure)
REPEAT = 1  # in-process rebuilds of the ingest figure, best taken (3 with --quick)


def screenshots(n: int, seed: int = 1) -> list[bytes]:
    """``n`` distinct 1280x800 PNGs that look like web pages: flat boxes, text, a cursor."""
    rng = random.Random(seed)
    pngs = []
    for i in range(n):
        image = Image.new("RGB", (1280, 800), (250, 250, 250))
        draw = ImageDraw.Draw(image)
        draw.rectangle((0, 0, 1280, 60), fill=(30, 60, 120))
        for _ in range(12):
            x, y = rng.randrange(0, 1100), rng.randrange(80, 740)
            color = tuple(rng.randrange(120, 255) for _ in range(3))
            draw.rectangle(
                (x, y, x + rng.randrange(40, 180), y + rng.randrange(20, 60)),
                fill=color,
                outline=(0, 0, 0),
            )
            draw.text((x + 4, y + 4), f"item {i}-{rng.randrange(10**6)}", fill=(0, 0, 0))
        for line in range(20):
            draw.text((40, 90 + 30 * line), f"step {i} line {line} " * 4, fill=(20, 20, 20))
        out = BytesIO()
        image.save(out, format="PNG")
        pngs.append(out.getvalue())
    return pngs


def bench_step(step: int, sha: str, t: float) -> Step:
    """One recorded step of the benches' sessions (five events), ``t`` seconds after ``T0``."""
    return Step(
        actions=(
            E.Click(
                x=step * 1.0,
                y=200.0,
                model_x=step * 1.0,
                model_y=200.0,
                raw=f"click(start_box='({step},200)')",
            ),
        ),
        thought="I click OK.",
        ops=(
            Acted(E.MouseMove(x=step * 1.0, y=200.0), duration_ms=3.0),
            Acted(
                E.MouseClick(x=step * 1.0, y=200.0),
                duration_ms=20.0,
                element=E.Element(
                    tag="button", name="OK", role="button", css_path="body > div > button"
                ),
            ),
        ),
        response=f"Thought: I click OK.\nAction: click(start_box='({step},200)')",
        url=f"http://127.0.0.1:8312/page/{step}",
        op_urls=False,
        sha256=sha,
        capture_ms=30.0,
        at=t,
        model="uitars15-7b",
        messages=(
            E.Message(
                role="user",
                parts=(E.TextPart(text="Click the OK button"), E.ImagePart(sha256=sha)),
            ),
        ),
        sampling=E.Sampling(temperature=0.0, top_p=0.9, max_tokens=500),
        prompt_tokens=1800,
        completion_tokens=25,
        latency_ms=900.0 + step,
        parser="ui-tars",
    )


def bench_session(run_id: str, session: str, steps: Sequence[Step] = ()) -> Session:
    """A session of the benches' (its steps' times are their own)."""
    return Session(session, steps, run_id=run_id, tick=0.0, call_ids="{session}-{step}")


def step_events(run_id: str, session: str, step: int, sha: str, t: datetime) -> list[E.Event]:
    """The five events of one recorded step, at ``t``."""
    seconds = (t - T0).total_seconds()
    return synthetic.step_events(
        bench_session(run_id, session), step, bench_step(step, sha, seconds)
    )


def timed(fn: Callable[[], object], repeat: int = 1) -> float:
    """The median wall time of ``fn`` in seconds (once with ``--smoke``)."""
    times = []
    for _ in range(1 if SMOKE else repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bench_append(work: Path, steps: int) -> None:
    pngs = screenshots(steps)
    mb = sum(map(len, pngs)) / 1e6
    print(f"append: {steps} steps of 5 events + one 1280x800 PNG ({mb / steps * 1000:.0f} kB avg)")

    def baseline(fsync: bool) -> Callable[[], None]:
        def run() -> None:
            folder = work / f"baseline-{fsync}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            with open(folder / "trajectory.jsonl", "a") as log:
                for i, png in enumerate(pngs):
                    (folder / f"step_{i}.png").write_bytes(png)
                    log.write(
                        json.dumps(
                            {
                                "step": i,
                                "screenshot": f"step_{i}.png",
                                "response": "Action: click(start_box='(1,2)')",
                                "action": {"kind": "click", "x": 1, "y": 2},
                                "url": "http://127.0.0.1/",
                            }
                        )
                        + "\n"
                    )
                    log.flush()
                    if fsync:  # one fsync per step (the log's; the PNG is not synced)
                        os.fsync(log.fileno())

        return run

    def through_store(fsync: bool, blob_fsync: bool = False) -> Callable[[], None]:
        def run() -> None:
            root = work / f"store-{fsync}-{blob_fsync}"
            shutil.rmtree(root, ignore_errors=True)
            store = open_store(root, fsync=fsync)
            if blob_fsync:  # the old way, for comparison: each blob fsync'd before its line
                store.blobs._with_journal = False
            with store.stream() as stream:
                for i, png in enumerate(pngs):
                    sha = store.put_blob(png)
                    stream.append(step_events("r", "s", i, sha, T0))

        return run

    one_sync = open_store(work / "probe").blobs.synced_with_journal
    # Interleaved rounds, so the machine's load hits every writer alike.
    names = ("plain", "plain+fsync", "store", "store+fsync", "store+2fsync")
    runs = (
        baseline(False),
        baseline(True),
        through_store(False),
        through_store(True),
        through_store(True, blob_fsync=True),
    )
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(1 if SMOKE else 3):
        for name, fn in zip(names, runs, strict=True):
            times[name].append(timed(fn))
    t = {name: statistics.median(values) for name, values in times.items()}

    def per_step(name: str) -> str:
        return f"{t[name]:.3f} s ({t[name] / steps * 1000:.2f} ms/step)"

    print(f"  plain harness (JSON line + PNG file, no fsync): {per_step('plain')}")
    print(f"  plain harness, one fsync per step (the line's): {per_step('plain+fsync')}")
    print(
        f"  store, fsync off: {per_step('store')}, "
        f"{t['store'] / t['plain']:.2f}x the plain harness without fsync"
    )
    print(
        f"  store, fsync on ({'one fsync per step' if one_sync else 'blobs fsync each'}): "
        f"{per_step('store+fsync')}, {t['store+fsync'] / t['plain+fsync']:.2f}x the plain "
        f"harness with one fsync per step (aim <= 2x), "
        f"{t['store+fsync'] / t['plain']:.2f}x without"
    )
    print(
        f"  store, each blob fsync'd too (before): {per_step('store+2fsync')}, "
        f"{t['store+2fsync'] / t['plain+fsync']:.2f}x the plain harness with one fsync"
    )


def session_events(
    n: int, run_id: str, session: str, steps: int, sha_of_step: Callable[[int], str]
) -> list[E.Event]:
    """Synthetic session ``n`` of run ``run_id``: its start (and the run's, for the first of
    each of ten runs), ``steps`` steps whose screenshots are ``sha_of_step(step)``, its end and
    its grade."""
    events: list[E.Event] = []
    if n < 10:
        events.append(E.RunStarted(at=T0, run_id=run_id, agent=AGENTS[n % 4], model="m"))
    spec = replace(
        bench_session(
            run_id, session, [bench_step(s, sha_of_step(s), n) for s in range(1, steps + 1)]
        ),
        task=E.Task(task_id=f"task-{n % 500}", prompt="Click OK", start_url="http://x/"),
        agent=AGENTS[n % 4],
        model="m",
        status="finished" if n % 3 else "max_steps",
        answer="42",
        evidence=(),
        grades=(Grade("answer", float(n % 2), bool(n % 2)),),
        start=n,
        end=0.0,
        seconds=steps * 2.0,
    )
    return events + synthetic.session_events(spec)


def write_journal(store: Store, sessions: int, steps: int) -> int:
    """``sessions`` sessions of ``steps`` steps, one stream each; returns the number of events."""
    total = 0
    sha = "ab" * 32
    for n in range(sessions):
        events = session_events(n, f"run{n % 10}", f"s{n:06d}", steps, lambda _: sha)
        with store.stream(f"{n:06d}") as stream:
            stream.append(events)
        total += len(events)
    return total


def decode_journal(store: Store) -> int:
    """Decode every journal line into events, and nothing else; returns how many."""
    count = 0
    for path in sorted(store.journal_dir.glob("*.jsonl")):
        count += len(decode_lines(path.read_bytes().split(b"\n")[:-1]).events)
    return count


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that ended (the ingest's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def bench_index(work: Path, sessions: int, steps: int) -> None:
    store = open_store(work / "big", fsync=False)
    started = time.perf_counter()
    total = write_journal(store, sessions, steps)
    print(
        f"journal: {total:,} events in {sessions:,} streams written in "
        f"{time.perf_counter() - started:.1f} s"
    )
    result = store.sync()
    assert result.events == total, result
    # From nothing, twice in the same run: in this process only (what ingest was before worker
    # processes), then with one decoding worker per core (what a rebuild does by default on a
    # journal this big). CPU seconds count the workers' too. The in-process rebuild is taken
    # best of three with --quick (a loaded machine stretches CPU seconds too), and split into
    # this thread's CPU (reading, the chain check, the decode, the Arrow columns, the schema
    # and the scores) and the rest: DuckDB writing, on the ingest's writer thread and its own.
    cores = _cpus()
    figures = {}
    for name, processes in (("in-process", 0), (f"{cores} worker processes", cores)):
        best = None
        for _ in range(REPEAT if processes == 0 else 1):
            cpu, thread = _cpu_seconds(), time.thread_time()
            ingest = timed(partial(store.index().rebuild, processes=processes))
            cpu, thread = _cpu_seconds() - cpu, time.thread_time() - thread
            if best is None or cpu < best[1]:
                best = (ingest, cpu, thread)
        assert best is not None
        ingest, cpu, thread = best
        figures[name] = (ingest, cpu, thread)
        print(
            f"ingest, {name}: {total / ingest:,.0f} events/s ({ingest:.2f} s for {total:,}, "
            f"from nothing; {total / cpu:,.0f} events per CPU second; load "
            f"{os.getloadavg()[0]:.1f}; aim >= 150,000/s)"
        )
    (here, here_cpu, here_thread), (apart, apart_cpu, _) = figures.values()
    # The baseline, in the same run: only decoding every line into events (no checksum, no
    # Arrow, no DuckDB), the floor of any ingest that builds the events, best of three. On a
    # loaded machine wall times stretch with the load; CPU seconds much less, so the ratio is
    # taken on them.
    floors = []
    for _ in range(3):
        floor = time.process_time()
        decode_journal(store)
        floors.append(time.process_time() - floor)
    floor = min(floors)
    print(
        f"ingest: workers {here / apart:.2f}x the in-process speed (wall), "
        f"{apart_cpu / here_cpu:.2f}x its CPU; bare decode of the same lines "
        f"{total / floor:,.0f} events per CPU second; {cores} cores, load "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        f"ingest CPU / bare decode CPU = {here_cpu / floor:.2f}x (goal ≤ 2.5x); in-process "
        f"rebuild {here_cpu:.2f} s of CPU ({here_thread:.2f} s in the ingesting thread, "
        f"{here_cpu - here_thread:.2f} s DuckDB writing), bare decode {floor:.2f} s, with "
        f"workers {apart_cpu / floor:.2f}x; load {os.getloadavg()[0]:.1f}, {cores} cores"
    )
    queries = {
        "select * from sessions": "select * from sessions",
        "per-agent aggregate": "select agent, count(*) as sessions, avg(score) as score, "
        "avg(steps) as steps, sum(passed::int) as passed "
        "from sessions group by agent order by agent",
        "per-agent latency (model_calls)": "select s.agent, avg(m.latency_ms), count(*) from "
        "model_calls m join sessions s using (session_id) "
        "group by s.agent",
    }
    for name, sql in queries.items():
        seconds = timed(lambda sql=sql: store.sql(sql), 3)
        rows = len(store.sql(sql).rows)
        print(f"query: {name}: {seconds:.3f} s ({rows:,} rows, after sync; aim <= 0.5 s)")
    bench_timing_query(store, sessions)
    noop = timed(lambda: store.sync(), 5)
    print(f"sync with no change, {sessions:,} streams: {noop * 1000:.1f} ms (aim <= 200 ms)")
    session = f"s{min(42, sessions - 1):06d}"
    seconds = timed(lambda: store.session_events(session), 3)
    print(f"session_events of one session: {seconds * 1000:.1f} ms")


def bench_small_syncs(work: Path, rounds: int) -> None:
    """The fixed costs every new store's first sync (each ``record`` into a new store, each
    test that makes one, each rebuild) and every sync of a few new events pay: six small
    sessions in a new store synced, then one more session synced; medians over ``rounds``
    stores, after one round that warms up (the imports, the index template built)."""
    sha = "ab" * 32
    fresh: list[tuple[float, float]] = []
    more: list[tuple[float, float]] = []
    counts = (0, 0)
    for round_ in range(1 + (1 if SMOKE else rounds)):
        store = open_store(work / f"small-{round_}", fsync=False)
        for n in range(6):
            with store.stream(f"{n:06d}") as stream:
                stream.append(session_events(n, "run0", f"s{n}", 3, lambda _: sha))
        started, cpu = time.perf_counter(), time.process_time()
        first = store.sync().events
        taken = (time.perf_counter() - started, time.process_time() - cpu)
        with store.stream("more") as stream:
            stream.append(session_events(6, "run0", "s6", 3, lambda _: sha))
        started, cpu = time.perf_counter(), time.process_time()
        counts = (first, store.sync().events)
        if round_:
            fresh.append(taken)
            more.append((time.perf_counter() - started, time.process_time() - cpu))
        shutil.rmtree(store.root)

    def medians(times: list[tuple[float, float]]) -> str:
        wall, cpu = (statistics.median(column) * 1e3 for column in zip(*times, strict=True))
        return f"{wall:.0f} ms (CPU {cpu:.0f} ms)"

    print(
        f"sync of a new store ({counts[0]} events in 6 sessions): {medians(fresh)}; of one "
        f"more session ({counts[1]} events): {medians(more)}; medians of {len(fresh)} stores, "
        f"load {os.getloadavg()[0]:.1f}"
    )


def _query_seconds(store: Store, sql: str, repeat: int) -> tuple[float, float]:
    """The median wall and CPU seconds of ``store.sql(sql)`` (the journal check included)."""
    walls, cpus = [], []
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        store.sql(sql)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def bench_timing_query(store: Store, sessions: int) -> None:
    """The issue's timing query through the ``model_calls`` view, against the same query on the
    ``model_called`` table (the calls as written, nothing assembled) and against ``select 1``
    (what any ``store.sql`` call costs: DuckDB opened, the journal checked), interleaved in one
    run."""
    through = (
        "select s.agent, avg(m.latency_ms), count(*) from {} m "
        "join sessions s using (session_id) group by s.agent"
    )
    queries = {
        "view": through.format("model_calls"),
        "table": through.format("model_called"),
        "fixed": "select 1",
    }
    for sql in queries.values():
        store.sql(sql)  # warm
    repeat = 1 if SMOKE else 5
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in queries}
    for _ in range(repeat):
        for name, sql in queries.items():
            figures[name].append(_query_seconds(store, sql, 1))
    (view_wall, view_cpu), (table_wall, table_cpu), (fixed_wall, fixed_cpu) = (
        (statistics.median(w for w, _ in f), statistics.median(c for _, c in f))
        for f in figures.values()
    )
    print(
        f"query: per-agent latency, {sessions:,} sessions: model_calls {view_wall:.3f} s "
        f"(CPU {view_cpu:.3f} s), model_called {table_wall:.3f} s (CPU {table_cpu:.3f} s): "
        f"{view_wall / table_wall:.2f}x wall, {view_cpu / table_cpu:.2f}x CPU; a store.sql of "
        f"select 1 {fixed_wall:.3f} s (CPU {fixed_cpu:.3f} s); load {os.getloadavg()[0]:.1f}, "
        f"{_cpus()} cores (aim <= 0.10 s)"
    )


def bench_timing_only(work: Path, sessions: int, steps: int) -> None:
    """The timing query alone, on ``work``'s store of ``bench_index`` (written when absent)."""
    store = open_store(work / "big", fsync=False)
    if not store.stream_paths():
        write_journal(store, sessions, steps)
    store.sync()
    bench_timing_query(store, sessions)


def bench_session_queries(work: Path, sessions: int = 100) -> None:
    """The issue's query figures on 100 sessions x 20 steps: warm through store.sql, and a cold
    ``ownloop sql`` process (no change since the last sync)."""
    store = open_store(work / "hundred", fsync=False)
    write_journal(store, sessions, 20)
    store.sync()
    sql = "select session_id, step, response from steps order by session_id, step"
    rows = len(store.sql(sql).rows)
    warm = timed(lambda: store.sql(sql), 7)
    print(
        f"query: steps + last response of {sessions} sessions ({rows:,} rows), warm through "
        f"store.sql: {warm:.3f} s (aim <= 0.05 s)"
    )
    command = [
        str(Path(sys.executable).with_name("ownloop")),
        "--store",
        str(store.root),
        "sql",
        "--format",
        "csv",
        "select count(*) from steps",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    repeat = 1 if SMOKE else 5
    cold = timed(lambda: subprocess.run(command, check=True, capture_output=True), repeat)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / repeat
    print(
        f"query: a cold `ownloop sql` process, nothing new to sync: {cold:.3f} s "
        f"(aim <= 0.3 s; {cpu:.3f} s of CPU, what a loaded machine cannot stretch)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--dir", help="where to write (default: a temporary folder)")
    parser.add_argument(
        "--only",
        choices=("append", "index", "query", "timing", "small"),
        help="run one part only (timing: the model_calls timing query, on --dir's store when "
        "it has one; small: the syncs of a small new store)",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (a check)")
    args = parser.parse_args()
    global SMOKE, REPEAT
    SMOKE = args.smoke
    REPEAT = 3 if args.quick and not args.smoke else 1
    steps, sessions = (5, 20) if args.smoke else (100, 1_000) if args.quick else (1_000, 10_000)
    work = Path(args.dir or tempfile.mkdtemp(prefix="ownloop-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"ownloop store benchmark ({'quick' if args.quick else 'full'}), {os.cpu_count()} cores, "
        f"in {work}"
    )
    try:
        if args.only in (None, "append"):
            bench_append(work, steps)
        if args.only in (None, "query"):
            bench_session_queries(work, 10 if SMOKE else 100)
        if args.only == "timing":
            bench_timing_only(work, sessions, 2 if SMOKE else 20)
        if args.only in (None, "small"):
            bench_small_syncs(work, 30)
        if args.only in (None, "index"):
            # 20 steps x 5 events + 3 = 103 events per session
            bench_index(work, sessions, 2 if SMOKE else 20)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
