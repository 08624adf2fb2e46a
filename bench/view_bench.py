"""Viewer benchmark: every page of ``ownloop view`` on a store of 10k sessions.

    .venv/bin/python bench/view_bench.py                  # 10k sessions (a few minutes to build)
    .venv/bin/python bench/view_bench.py --sessions 2000  # smaller
    .venv/bin/python bench/view_bench.py --store DIR      # reuse (or keep) the store in DIR

The store is written with the store's own writers (``Store.stream``, ``put_blob``), as a recorder
writes it: one stream per session, ten runs of 250 tasks with 4 repeats, 6 steps a session, each
task with its own difficulty so repeats and runs disagree. Each page is fetched over HTTP from
the real server, a few times; the line gives the median and the slowest, with the aim (300 ms),
and the CPU time the first load took in this process (server and client: on a busy machine the
wall-clock times move with the load, the CPU times much less).

    .venv/bin/python bench/view_bench.py --baseline   # also, first, the viewer reading as
                                                      # Store.sql does (journal scanned and index
                                                      # opened for each page): the ratios

The viewer keeps the index open between pages (``ownloop.store.kept``); ``--baseline`` serves
the same pages with a viewer that scans and opens for every page's reads, in the same run, one
after the other (DuckDB shares a database within a process, so not side by side).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_bench import screenshots  # noqa: E402

from ownloop.store import Store, open_store  # noqa: E402
from ownloop.store import events as E  # noqa: E402
from ownloop.view.server import ViewServer  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUNS, REPEATS, STEPS = 10, 4, 6
AIM_MS = 300.0
RARE = "wombatquasar"


class Ids(TypedDict):
    """The ids every event of a session carries, to pass as ``**ids``."""

    run_id: str
    session_id: str


def _session(
    run_id: str,
    session_id: str,
    task: str,
    repeat: int,
    passed: bool,
    t: datetime,
    shots: list[str],
    rare: bool,
) -> list[E.Event]:
    ids: Ids = {"run_id": run_id, "session_id": session_id}
    events: list[E.Event] = [
        E.SessionStarted(
            at=t,
            **ids,
            agent="uitars",
            model="m",
            repeat=repeat,
            budget=15,
            task=E.Task(task_id=task, prompt=f"Do {task}", start_url="http://127.0.0.1/"),
        )
    ]
    for step in range(1, STEPS + 1):
        at = t + timedelta(seconds=step)
        call = f"{session_id}-{step}"
        hit = "OK" if passed or step < 4 else "Cancel"
        thought = f"I see the {RARE} now." if rare and step == 3 else f"I click {hit}."
        events += [
            E.ScreenshotTaken(
                at=at,
                **ids,
                step=step,
                sha256=shots[step % len(shots)],
                width=1280,
                height=800,
                url=f"http://127.0.0.1/{task}/{step}",
            ),
            E.ModelCalled(
                at=at,
                **ids,
                step=step,
                call_id=call,
                response=f"Thought: {thought}\nAction: click(start_box='({step},200)')",
                latency_ms=800.0 + step,
                prompt_tokens=1800,
                completion_tokens=25,
                finish_reason="stop",
            ),
            E.ActionParsed(
                at=at,
                **ids,
                step=step,
                call_id=call,
                parser="ui-tars",
                thought=thought,
                actions=(E.Click(x=step * 10.0, y=200.0),),
            ),
            E.BrowserActed(
                at=at,
                **ids,
                step=step,
                idx=0,
                op=E.MouseClick(x=step * 10.0, y=200),
                duration_ms=20.0 + step,
                element=E.Element(tag="button", name=hit, role="button"),
            ),
        ]
    end = t + timedelta(seconds=STEPS + 1)
    status: E.Status = "max_steps" if not passed and repeat == 2 else "finished"
    return events + [
        E.SessionEnded(
            at=end,
            **ids,
            status=status,
            steps=STEPS,
            seconds=STEPS + 1.0,
            answer="ok" if passed else "no",
        ),
        E.SessionGraded(at=end, **ids, grader="answer", score=float(passed), passed=passed),
        E.SessionCounted(
            at=end, **ids, task_id=task, repeat=repeat, counted=True, winner=session_id
        ),
    ]


def build(store: Store, sessions: int, distinct: int = 12) -> tuple[list[str], str, str]:
    """Write the store, its steps showing ``distinct`` screenshots; returns the run ids, and the
    ids of a session pair of one task."""
    rng = random.Random(7)
    shots = [store.put_blob(png) for png in screenshots(distinct)]
    tasks = max(1, sessions // (RUNS * REPEATS))
    difficulty = [rng.random() for _ in range(tasks)]
    runs = [f"run-{r:02d}" for r in range(RUNS)]
    n = 0
    for r, run_id in enumerate(runs):
        with store.stream(f"run-{run_id}") as stream:
            stream.append(
                [
                    E.RunStarted(
                        at=T0 + timedelta(hours=r),
                        run_id=run_id,
                        agent="uitars",
                        model="m",
                        suite="bench",
                        max_steps=15,
                    )
                ]
            )
        skill = 0.4 + 0.04 * r
        for task in range(tasks):
            for repeat in range(1, REPEATS + 1):
                session_id = f"s{n:06d}"
                passed = rng.random() < skill + 0.5 * (difficulty[task] - 0.5)
                t = T0 + timedelta(hours=r, seconds=10 * n)
                with store.stream(session_id) as stream:
                    stream.append(
                        _session(
                            run_id,
                            session_id,
                            f"task-{task:04d}",
                            repeat,
                            passed,
                            t,
                            shots,
                            rare=n == sessions // 2,
                        )
                    )
                n += 1
    return runs, "s000000", f"s{tasks * REPEATS:06d}"


def fetch(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url) as response:
        response.read()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--store", type=Path, help="where the store is (built when empty)")
    parser.add_argument("--repeat", type=int, default=5, help="fetches of each page")
    parser.add_argument(
        "--baseline", action="store_true", help="also time a viewer that opens the index per page"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="40 sessions, 2 screenshots, one fetch (a check)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.sessions, args.repeat = RUNS * REPEATS, 1
    root = args.store or Path(tempfile.mkdtemp(prefix="view-bench-")) / "store"
    store = open_store(root, fsync=False)
    if not (root / "journal").exists() or not any((root / "journal").iterdir()):
        started = time.perf_counter()
        runs, left, right = build(store, args.sessions, 2 if args.smoke else 12)
        print(f"wrote {args.sessions} sessions in {time.perf_counter() - started:.1f} s to {root}")
    else:
        runs = [f"run-{r:02d}" for r in range(RUNS)]
        left = "s000000"
        right = f"s{max(1, args.sessions // (RUNS * REPEATS)) * REPEATS:06d}"
    started = time.perf_counter()
    count = store.sql("select count(*) from sessions").rows[0][0]
    print(f"index sync: {time.perf_counter() - started:.1f} s ({count} sessions)")
    sha = store.sql("select sha256 from screenshots limit 1").rows[0][0]
    pages = [
        ("runs", ""),
        ("sessions", "sessions"),
        ("sessions, page 20", "sessions?page=20"),
        ("sessions of a run, by task", f"sessions?run={runs[3]}&sort=task_id"),
        ("a run with charts", f"run/{runs[3]}"),
        ("compare two runs", f"compare?run={runs[0]}&run={runs[9]}"),
        ("  its interval (paired bootstrap)", f"compare/intervals?run={runs[0]}&run={runs[9]}"),
        ("compare three runs", f"compare?run={runs[0]}&run={runs[4]}&run={runs[9]}"),
        ("a pair at its divergence", f"pair/{left}/{right}"),
        ("search: a rare word", f"search?q={RARE}"),
        ("search: a common word", "search?q=cancel"),
        ("search: a common word, page 30", "search?q=cancel&page=30"),
        ("a session", f"session/{left}"),
        ("a thumbnail (made, then cached)", f"thumb/{sha}?w=160"),
        ("a content box", f"box/{sha}"),
    ]
    baseline = serve(store, pages, args.repeat, keep=False) if args.baseline else None
    kept = serve(store, pages, args.repeat, keep=True)
    if baseline is not None:
        print("ratio kept / baseline (first load; median of the loads again):")
        for (name, _), (first, median), (first0, median0) in zip(
            pages, kept, baseline, strict=True
        ):
            print(
                f"  {name:34s} {first / first0:5.2f}  {median / median0:5.2f}  "
                f"({first0:.0f} -> {first:.0f} ms; {median0:.0f} -> {median:.0f} ms)"
            )


def serve(
    store: Store, pages: list[tuple[str, str]], repeat: int, *, keep: bool
) -> list[tuple[float, float]]:
    """Each page's first load and the median of ``repeat`` loads again, from a viewer that
    keeps the index open (``keep``) or opens it for every page's reads."""
    # "first": the page's first load (its queries run); "again": the same page while the store
    # has not changed (the viewer answers from its cache of the table pages; sessions, pairs,
    # thumbnails and boxes are built each time or cached by blob).
    print("the viewer, index kept open:" if keep else "baseline, index opened for each page:")
    worst_first = worst_again = 0.0
    found = []
    with ViewServer(store, port=0, keep_index=keep) as url:
        fetch(url + "static/view.css")  # the server is up
        fetch(url + "search")  # and has opened the index (an empty search: one small query)
        for name, path in pages:
            cpu = time.process_time()  # the server runs in this process: its CPU, load aside
            first = fetch(url + path)
            cpu = (time.process_time() - cpu) * 1000
            times = [fetch(url + path) for _ in range(repeat)]
            median, slowest = statistics.median(times), max(times)
            worst_first, worst_again = max(worst_first, first), max(worst_again, median)
            found.append((first, median))
            mark = "ok" if max(first, median) < AIM_MS else "SLOW"
            print(
                f"  {name:34s} first {first:6.0f} ms (CPU {cpu:4.0f} ms), again median "
                f"{median:5.0f} ms, "
                f"max {slowest:5.0f} ms  [{mark}] /{urllib.parse.unquote(path)}"
            )
    print(
        f"slowest first load: {worst_first:.0f} ms, slowest again: {worst_again:.0f} ms "
        f"(aim < {AIM_MS:.0f} ms); load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs"
    )
    return found


if __name__ == "__main__":
    main()
