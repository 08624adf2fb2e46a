"""Replay benchmark: one function per measurement, ``main`` runs them.

    .venv/bin/python bench/replay_bench.py               # regrade 10k synthetic sessions
    .venv/bin/python bench/replay_bench.py --sessions 2000
    .venv/bin/python bench/replay_bench.py --execute      # only --execute ops vs its floor
    .venv/bin/python bench/replay_bench.py --execute --workers 2   # (the batch's browsers)
    .venv/bin/python bench/replay_bench.py --execute --rounds 5    # (each batch's rounds)
    .venv/bin/python bench/replay_bench.py --smoke        # every part, tiny: a check

Regrade: 10k synthetic sessions (3 steps each, one journal stream per session, as the recorder
writes them; fsync off) are written with the store API and indexed, then ``regrade`` runs over all
of them twice: with each session's own task grader (miniwob) and with one stricter spec for all.
The figure is sessions per second, end to end: select, read, fold, grade, append, sync.

Execute: MiniWoB sessions recorded with the expert are re-executed with ``--execute ops`` and the
settle pause at 0; the steps' wall time is compared with the sum of the recorded operation and
screenshot times (the floor a replay can reach).

Batch: 20 MiniWoB sessions re-executed with ``replay --run R --execute ops`` on 1, 2 and
``--workers`` reused browsers, against the sum of their floors, next to 20 single replays (a
browser each) measured in the same run, and against Chromium alone on as many browsers (issue
33's goal 5: a fresh context, the task page and a screenshot per step; and the same with the
recorded operations performed by Playwright's calls alone), the three alternated for
``--rounds`` rounds; for each batch, where its time went per session (from the children's
events), the CPU it took, and the messages it and both baselines sent to Playwright's driver
(a count the machine's load does not move). Then the CPU Chromium spends per part of a session
(a fresh context, a task page, a screenshot).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext as _nothing
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from ownloop.replay.regrade import regrade
from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.testing import synthetic
from ownloop.testing.synthetic import T0, Grade, Session, Step

PROMPT = "You are a GUI agent. You are given a task and your action history. " * 20
REGRADE_AIM = 2000.0


def session_events(run_id: str, number: int, sha: str) -> list[E.Event]:
    """A finished three-step MiniWoB-like session with evidence and its recorded grade."""
    answer = "yes" if number % 3 else "no"
    reward = 1 if number % 4 else 0
    task = E.Task(
        task_id=f"click-button-{number}",
        prompt='Click on the "yes" button.',
        start_url=f"http://127.0.0.1:8000/miniwob/click-button.html?seed={number}",
        suite="miniwob",
        seed=number,
        grader="miniwob",
    )
    step = Step(
        actions=(E.Click(x=91.4, y=228.6),),
        ops=(E.MouseClick(x=91.4, y=228.6),),
        url=task.start_url,
        capture_ms=40.0,
        model="bench",
        messages=(
            E.Message(
                role="user",
                parts=(
                    E.TextPart(text=PROMPT),
                    E.ImagePart(sha256=sha, width=1280, height=800),
                ),
            ),
        ),
        finish_reason=None,
        latency_ms=300.0,
        element=E.Element(tag="button", name="yes"),
    )
    session = Session(
        f"s{number:06d}",
        [
            replace(
                step,
                thought=f"step {n}",
                response=f"Thought: step {n}\nAction: click(start_box='(100,200)')",
            )
            for n in (1, 2, 3)
        ],
        run_id=run_id,
        task=task,
        model="bench",
        answer=answer,
        evidence=(
            ("final_url", f'"{task.start_url}"'),
            (
                "miniwob_reward",
                f'{{"reward": {reward}, "raw_reward": {reward}, "done": true, "reason": null}}',
            ),
        ),
        grades=(Grade("miniwob", float(reward), bool(reward), grader_version="1"),),
        start=number,
        step_seconds=0.1,
        tick=0.0,
        end=1.0,
        sha256=sha,
        call_ids="{session}c{step}",
    )
    return synthetic.session_events(session)


def write_sessions(store: Store, run_id: str, count: int) -> None:
    """``count`` sessions, one stream each, then one sync of the index."""
    sha = store.put_blob(b"a synthetic screenshot")
    with store.stream(f"{run_id}-start") as stream:
        stream.append([E.RunStarted(at=T0, run_id=run_id, agent="uitars")])
    for number in range(count):
        with store.stream(f"{run_id}-{number:06d}") as stream:
            stream.append(session_events(run_id, number, sha))
    store.sync()


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    began = time.perf_counter()
    result = fn()
    return time.perf_counter() - began, result


def bench_regrade(work: Path, sessions: int) -> float:
    """Regrade ``sessions`` synthetic sessions; prints and returns the slower rate (sessions/s)."""
    store = open_store(work / "regrade", fsync=False)
    took, _ = timed(lambda: write_sessions(store, "bench", sessions))
    print(f"setup: wrote and indexed {sessions} sessions in {took:.1f}s")
    rates = []
    for label, spec in (
        ("own task graders (miniwob)", None),
        ("stricter grader answer:exact:yes", "answer:exact:yes"),
    ):
        took, result = timed(lambda spec=spec: regrade(store, run_id="bench", grader=spec))
        assert result.graded == sessions, result  # type: ignore[attr-defined]
        rate = sessions / took
        rates.append(rate)
        print(
            f"regrade {sessions} sessions, {label}: {took:.2f}s = {rate:,.0f} sessions/s "
            f"(aim >= {REGRADE_AIM:,.0f}/s); {len(result.flips)} flipped"
        )  # type: ignore[attr-defined]
    return min(rates)


EXECUTE_AIM = 1.5
EXECUTE_TASKS = "login-user,enter-text,click-checkboxes"


def _steps_span_s(session: Any) -> float:
    """From the start of the first screenshot to the last event of the last step, seconds."""
    events = [
        e
        for step in session.steps
        for e in (step.screenshot, *step.calls, *step.effects)
        if e is not None
    ]
    first = min(
        session.steps[0].screenshot.at
        - timedelta(milliseconds=session.steps[0].screenshot.capture_ms),
        *(e.at for e in events),
    )
    return (max(e.at for e in events) - first).total_seconds()


def bench_execute_ops(work: Path, tasks: str = EXECUTE_TASKS) -> tuple[float, Store]:
    """``--execute ops`` (settle 0) against its floor: the recorded operation and screenshot times
    (BrowserActed.duration_ms + ScreenshotTaken.capture_ms) of the same session, recorded in this
    run with the expert. Prints per session the steps' wall time and the whole replay's (browser
    start, task setup, evidence, grade, index sync included); returns the worst steps ratio, and
    the store (its run ``bench``: the recorded sessions)."""
    from ownloop.modelserver.endpoint import make_server
    from ownloop.recorder.episode import EpisodeLimits
    from ownloop.recorder.runner import RecordOptions, record
    from ownloop.replay import fold
    from ownloop.replay.execute import execute_session
    from ownloop.replay.options import ReplayOptions
    from ownloop.world.suites import load_suite

    store = open_store(work / "execute")
    with load_suite(suite=f"miniwob:{tasks}") as suite, make_server("miniwob", "uitars") as url:
        record(
            store,
            suite,
            RecordOptions(
                agent="uitars",
                endpoint=url,
                model="expert",
                run_id="bench",
                workers=1,
                limits=EpisodeLimits(12, 120.0),
                settle_s=0.0,
            ),
        )
    ratios = []
    for (session_id,) in store.sql("select session_id from sessions order by task_id").rows:
        parent = fold(store.session_events(session_id))
        floor = (
            sum(e.duration_ms for s in parent.steps for e in s.effects) / 1000
            + sum(s.screenshot.capture_ms for s in parent.steps if s.screenshot) / 1000
        )
        took, replayed = timed(
            lambda parent=parent: execute_session(store, parent, "ops", ReplayOptions(settle_s=0.0))
        )
        child = replayed.child  # type: ignore[attr-defined]
        span = _steps_span_s(child)
        ratios.append(span / floor)
        print(
            f"--execute ops {parent.task_id} ({len(parent.steps)} steps, {child.status}): "
            f"floor {floor:.3f}s, steps {span:.3f}s = {span / floor:.2f}x (aim <= "
            f"{EXECUTE_AIM}), whole replay {took:.2f}s = {took / floor:.1f}x"
        )
    return max(ratios), store


BATCH_AIM = 1.5
ALONE_AIM = 1.15  # the batch against Chromium alone (issue 33, goal 5)
BATCH_TASKS = "login-user,enter-text,click-checkboxes,click-button,focus-text"


def _floor_s(parent: Any) -> float:
    """The recorded operation and screenshot times of a session, seconds: its browser floor."""
    return float(
        sum(e.duration_ms for s in parent.steps for e in s.effects) / 1000
        + sum(s.screenshot.capture_ms for s in parent.steps if s.screenshot) / 1000
    )


def _seconds(values: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _machine_busy() -> tuple[float, float]:
    """Seconds of CPU time the whole machine has spent busy and in all (every core, every
    process), from /proc/stat: it counts a browser's renderers whether or not their CPU reaches
    this process's rusage, and anything else running. (0, 0) where there is no /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


def _cpu_s() -> tuple[float, float]:
    """CPU seconds so far of this process, and of its finished children (the browsers and their
    Playwright drivers, once closed)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


_ONE_WAY = ("__waitInfo__", "updateSubscription")  # sent, and no reply waited for


class _DriverMessages:
    """Counts the messages this process sends to Playwright's driver while on (the bench's
    only use of Playwright's internals): unlike the clock, the count does not move with the
    machine's load. ``round_trips`` leaves out the ones no reply is waited for (a wait's
    notes, a listener's subscription)."""

    def __init__(self) -> None:
        self.sent = 0
        self.one_way = 0

    def __enter__(self) -> _DriverMessages:
        from playwright._impl import connection

        self._connection = connection.Connection
        self._send = send = self._connection.send_message_to_server

        def counted(channel: Any, owner: Any, method: str, *args: Any, **kwargs: Any) -> Any:
            self.sent += 1
            self.one_way += method in _ONE_WAY
            return send(channel, owner, method, *args, **kwargs)

        self._connection.send_message_to_server = counted  # type: ignore[method-assign]  # counted while on, put back by __exit__
        return self

    def __exit__(self, *exc: object) -> None:
        self._connection.send_message_to_server = self._send  # type: ignore[method-assign]  # Playwright's own again

    @property
    def round_trips(self) -> int:
        return self.sent - self.one_way


def _phases(children: list[Any], took: float, workers: int) -> str:
    """Where a batch's time went, per session (means, seconds), read from its children's
    events: setup (the context, the task page, the episode's start), steps (of which the
    browser's own operation and screenshot times), end (evidence, grade) and the workers' time
    outside any session (planning, the fidelity write, waiting for a context, closing)."""
    setup = steps = own = end = spans = 0.0
    for child in children:
        first = child.steps[0].screenshot
        began = first.at - timedelta(milliseconds=first.capture_ms)
        last = max(
            e.at for s in child.steps for e in (s.screenshot, *s.calls, *s.effects) if e is not None
        )
        ended = max([child.outcome.at, *(grade.at for grade in child.grades)])
        setup += (began - child.started_at).total_seconds()
        steps += _steps_span_s(child)
        own += _floor_s(child)
        end += (ended - last).total_seconds()
        spans += (ended - child.started_at).total_seconds()
    n = len(children)
    outside = (took * workers - spans) / n
    return (
        f"per session: setup {setup / n:.3f}s, steps {steps / n:.3f}s (browser's own "
        f"{own / n:.3f}s), end {end / n:.3f}s, outside sessions {outside:.3f}s"
    )


def bench_browser_cpu(count: int = 10, smoke: bool = False) -> None:
    """What Chromium and its driver spend per part of a session, in CPU (the growth of this
    process's finished children's CPU time, against a browser that only starts and stops):
    a fresh context with its first page, made and closed; a MiniWoB task page loaded into it and
    its episode started; one screenshot. With ``smoke``, every part once in one browser (a
    check: no figure)."""
    from ownloop.world.browser import BrowserSession, open_context
    from ownloop.world.chromium import open_browser
    from ownloop.world.suites.miniwob import html_dir, serve_static, start_episode

    server = serve_static(html_dir(), poll_interval=0.02)
    url = f"http://127.0.0.1:{server.server_address[1]}/miniwob/login-user.html"

    def contexts(browser: Any) -> None:
        for _ in range(count):
            open_context(browser, (1280, 800)).context.close()

    def loads(browser: Any, shots: int = 0) -> None:
        for _ in range(count):
            session = BrowserSession(browser, (1280, 800), settle_s=0.0)
            session.goto(url)
            start_episode(session, 3)
            for _ in range(shots):
                session.screenshot()
            session.close()

    def cpu_of(work: Callable[[Any], None]) -> float:
        before = _cpu_s()[1]
        launched = open_browser()
        try:
            work(launched.browser)
        finally:
            launched.close()
        return _cpu_s()[1] - before

    try:
        if smoke:
            took = cpu_of(lambda browser: (contexts(browser), loads(browser, 1)))
            print(f"Chromium's CPU per part of a session: every part once, {took:.2f}s (smoke)")
            return
        bare = cpu_of(lambda browser: None)
        made = cpu_of(contexts)
        loaded = cpu_of(loads)
        shot = cpu_of(lambda browser: loads(browser, 4))
    finally:
        server.shutdown()
        server.server_close()
    print(
        f"Chromium's CPU per part of a session ({_load()}): a fresh context and its first page "
        f"{(made - bare) / count:.3f}s, the task page loaded and its episode started "
        f"{(loaded - made) / count:.3f}s, a screenshot {(shot - loaded) / count / 4:.3f}s"
    )


def _perform(page: Any, op: Any) -> None:
    """One recorded operation through Playwright's own calls (as ``BrowserSession`` makes
    them, without its checks, waits or events)."""
    from ownloop.store import actions as A

    match op:
        case A.MouseClick():
            page.mouse.click(op.x, op.y, button=op.button, click_count=op.click_count)
        case A.MouseMove():
            page.mouse.move(op.x, op.y, steps=max(1, op.steps))
        case A.MouseDown():
            page.mouse.down(button=op.button)
        case A.MouseUp():
            page.mouse.up(button=op.button)
        case A.MouseWheel():
            page.mouse.wheel(op.dx, op.dy)
        case A.KeyboardType(paste=True):
            page.keyboard.insert_text(op.text)
        case A.KeyboardType():
            page.keyboard.type(op.text)
        case A.KeyboardPress():
            page.keyboard.press(op.key)
        case A.KeyboardDown():
            page.keyboard.down(op.key)
        case A.KeyboardUp():
            page.keyboard.up(op.key)
        case A.PageGoto():
            page.goto(op.url, wait_until="load")
        case A.PageGoBack():
            page.go_back(wait_until="load")
        case A.Sleep():
            page.wait_for_timeout(op.seconds * 1000)
        case _:  # (a desktop's call): a baseline that skipped it would measure less work
            raise ValueError(f"Chromium alone cannot perform {op!r}")


def bare_chromium(parents: list[Any], browsers: int, operations: bool = False) -> float:
    """Seconds Chromium alone takes for the unavoidable part of re-executing ``parents`` on
    ``browsers`` browsers (launched inside the time, as a batch launches its own): per session
    a fresh context and page, the task page with its seeded episode started, and one screenshot
    per recorded step; no ownloop. With ``operations``, each step's recorded operations too,
    after its screenshot (Playwright's calls alone: no look-up, guard, wait or event). A batch
    that records everything cannot be faster than this on the same machine."""
    import base64
    import queue
    import threading
    from urllib.parse import urlsplit

    from ownloop.world.chromium import open_browser
    from ownloop.world.suites.miniwob import html_dir, serve_static, start_episode

    server = serve_static(html_dir(), poll_interval=0.02)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    todo: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for parent in parents:
        todo.put(parent)

    def worker() -> None:
        launched = open_browser()
        try:
            while True:
                try:
                    parent = todo.get_nowait()
                except queue.Empty:
                    return
                context = launched.browser.new_context(viewport={"width": 1280, "height": 800})
                page = context.new_page()
                start_episode(
                    page, parent.task.seed, url=base + urlsplit(parent.task.start_url).path
                )
                cdp = context.new_cdp_session(page)
                for step in parent.steps:
                    shot = cdp.send(
                        "Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}
                    )
                    base64.b64decode(shot["data"])
                    for effect in step.effects if operations else ():
                        _perform(page, effect.op)
                context.close()
        finally:
            launched.close()

    began = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(browsers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - began
    server.shutdown()
    server.server_close()
    return took


def bench_batch(
    work: Path,
    workers: int = 2,
    seeds: str = "1-4",
    tasks: str = BATCH_TASKS,
    browsers: set[int] | None = None,
    recorded: Store | None = None,
    rounds: int = 3,
) -> float:
    """``replay --run R --execute ops --workers N`` over 20 MiniWoB sessions (5 tasks x 4 seeds,
    recorded in this run with the expert, settle 0) against the sum of their browser floors, next
    to the baseline measured in the same run: the same sessions replayed one by one, each in a
    Chromium of its own. Returns the batch's ratio to the floors (aim <= 1.5). ``recorded``: a
    store whose run ``bench`` is already recorded (``--smoke``: ``bench_execute_ops``'s), used
    instead of recording one. ``rounds``: each batch and its two Chromium-alone baselines,
    alternated, the medians taken."""
    from ownloop.modelserver.endpoint import make_server
    from ownloop.recorder.episode import EpisodeLimits
    from ownloop.recorder.runner import RecordOptions, record
    from ownloop.replay.batch import batch_sessions, execute_batch
    from ownloop.replay.execute import execute_session
    from ownloop.replay.options import ReplayOptions
    from ownloop.world.suites import load_suite

    store = recorded or open_store(work / "batch")
    if recorded is None:
        with (
            load_suite(suite=f"miniwob:{tasks}", seeds=seeds) as suite,
            make_server("miniwob", "uitars") as url,
        ):
            record(
                store,
                suite,
                RecordOptions(
                    agent="uitars",
                    endpoint=url,
                    model="expert",
                    run_id="bench",
                    workers=2,
                    limits=EpisodeLimits(12, 120.0),
                    settle_s=0.0,
                    # The run's end waits for its screenshots' compaction: the batch replays
                    # them as a store at rest holds them (lossless WebP), and no compactor
                    # works beside the timed replays.
                    compact_wait_s=300.0,
                ),
            )
    webp = sum(1 for _ in (store.root / "blobs").rglob("*.webp"))
    print(f"batch: the recorded screenshots compacted as at rest ({webp} WebP blobs)")
    parents = batch_sessions(store, "bench")
    floor = sum(_floor_s(parent) for parent in parents)
    passed = sum(1 for p in parents if p.latest_grade is not None and p.latest_grade.passed)
    print(f"batch: {len(parents)} recorded sessions ({passed} passed), floors sum {floor:.2f}s")
    single, _ = timed(
        lambda: [
            execute_session(store, parent, "ops", ReplayOptions(settle_s=0.0)) for parent in parents
        ]
    )
    print(
        f"  {len(parents)} single replays, a browser each: {single:.2f}s = "
        f"{single / floor:.2f}x the floors (baseline; {_load()})"
    )
    ratio = float("inf")
    for n in sorted(browsers or {1, 2, workers}):
        # Rounds alternate the batch and both Chromium-alone baselines, so a minute's change
        # in the machine's speed reaches all three; the figures are each one's median.
        batch_s: list[float] = []
        bare_s: list[float] = []
        acting_s: list[float] = []
        batch_busy: list[float] = []  # the whole machine's busy CPU seconds in each
        bare_busy: list[float] = []
        acting_busy: list[float] = []
        counts: dict[str, _DriverMessages] = {}
        for round_ in range(rounds):
            last = round_ == rounds - 1  # its driver messages counted
            cpu_before, machine_before = _cpu_s(), _machine_busy()
            began = time.perf_counter()
            with counts.setdefault("batch", _DriverMessages()) if last else _nothing():
                batched = execute_batch(
                    store, parents, "ops", ReplayOptions(settle_s=0.0), workers=n
                )
            batch_s.append(time.perf_counter() - began)
            own_cpu, children_cpu = (b - a for a, b in zip(cpu_before, _cpu_s(), strict=True))
            busy, whole = (b - a for a, b in zip(machine_before, _machine_busy(), strict=True))
            batch_busy.append(busy)
            for seconds, cores, operations in (
                (bare_s, bare_busy, False),
                (acting_s, acting_busy, True),
            ):
                before = _machine_busy()[0]
                name = "acting" if operations else "bare"
                with counts.setdefault(name, _DriverMessages()) if last else _nothing():
                    seconds.append(bare_chromium(parents, n, operations=operations))
                cores.append(_machine_busy()[0] - before)
        took, bare, acting = (statistics.median(s) for s in (batch_s, bare_s, acting_s))
        cpu = {
            name: statistics.median(s)
            for name, s in (("batch", batch_busy), ("bare", bare_busy), ("acting", acting_busy))
        }
        rows = batched.rows
        same = sum(1 for row in rows if row.reproduced)
        ratio = took / floor
        each = f" (median of {rounds}: {_seconds(batch_s)})" if rounds > 1 else ""
        print(
            f"  batch --workers {n} ({batched.browsers} browsers): {took:.2f}s{each} = "
            f"{ratio:.2f}x the floors (aim <= {BATCH_AIM}), {single / took:.1f}x faster than "
            f"the baseline; {same}/{len(rows)} rewards reproduced ({_load()})"
        )
        print(
            f"    Chromium alone on {n} browsers (a fresh context, the task page, a screenshot "
            f"per step; no ownloop): {bare:.2f}s = {bare / floor:.2f}x the floors; the batch "
            f"is {took / bare:.2f}x that (aim <= {ALONE_AIM}); the machine's busy CPU "
            f"{cpu['batch']:.1f}s against {cpu['bare']:.1f}s, "
            f"{cpu['batch'] / max(cpu['bare'], 1e-9):.2f}x"
        )
        print(
            f"    Chromium alone on {n} browsers performing the recorded operations too "
            f"(Playwright's calls alone): {acting:.2f}s = {acting / floor:.2f}x the floors; the "
            f"batch is {took / acting:.2f}x that; busy CPU {cpu['acting']:.1f}s, the batch's "
            f"{cpu['batch'] / max(cpu['acting'], 1e-9):.2f}x"
        )
        children = [row.child for row in rows if row.child is not None and row.child.steps]
        print(f"    the last round's {_phases(children, batch_s[-1], n)}")
        print(
            f"    the last round's CPU: {own_cpu + children_cpu:.1f}s ({own_cpu:.1f}s ownloop's "
            f"Python, {children_cpu:.1f}s Chromium and its driver) in {batch_s[-1]:.1f}s: "
            f"{(own_cpu + children_cpu) / batch_s[-1]:.2f} of a core on average; the whole "
            f"machine (every process) {busy / batch_s[-1]:.2f} of its {whole / batch_s[-1]:.0f} "
            "cores busy"
        )
        each = {
            name: (c.sent / len(parents), c.round_trips / len(parents))
            for name, c in counts.items()
        }
        print(
            "    the last round's messages to Playwright's driver per session (round trips in "
            f"brackets): the batch {each['batch'][0]:.1f} ({each['batch'][1]:.1f}), Chromium "
            f"alone {each['bare'][0]:.1f} ({each['bare'][1]:.1f}), performing the operations "
            f"{each['acting'][0]:.1f} ({each['acting'][1]:.1f})"
        )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions to regrade")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--execute",
        action="store_true",
        help="only the --execute ops measurements (real Chromium, MiniWoB): one session against "
        "its floor, and a batch of 20 against theirs",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="the batch's browsers (besides 1 and 2)"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="each batch and its Chromium-alone baselines"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="every part on one task, once (a check)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ownloop-replay-bench-"))
    try:
        if args.smoke:
            # Every part on one session, Chromium launched as few times as the code allows: the
            # batch replays the session recorded for --execute ops instead of recording its own.
            bench_regrade(work, 2)
            _, recorded = bench_execute_ops(work, "click-button")
            bench_batch(work, 1, browsers={1}, recorded=recorded, rounds=1)
            bench_browser_cpu(1, smoke=True)
            return
        if not args.execute:
            bench_regrade(work, args.sessions)
        bench_execute_ops(work)
        bench_batch(work, args.workers, rounds=args.rounds)
        bench_browser_cpu()
    finally:
        if args.keep:
            print(f"work directory: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
