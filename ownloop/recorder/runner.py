"""The runner: tasks × worker threads, each with its own browser; resume; error retries.

A run is named by ``--run`` (or a generated name). Running the same command again with the same
run resumes it, and several recorders may run it at once: each task is claimed before its session
starts (:mod:`ownloop.store.claims`), a task whose session ended with a final outcome (every
status but error, endpoint_error, interrupted and crashed) is done and skipped, the others run as
a new attempt, and sessions a killed recorder left without an end are first marked ``crashed``.
"""

from __future__ import annotations

import platform
import queue
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ownloop.agents import make_agent, world_agent_options
from ownloop.agents.base import Agent
from ownloop.agents.released import Released
from ownloop.recorder.admission import (
    SourceState,
    admit,
    check_clean,
    check_graders,
    check_suite,
    declare,
    source_state,
)
from ownloop.recorder.browser import BrowserSession, browser_versions, open_browser
from ownloop.recorder.browser_world import BrowserWorld
from ownloop.recorder.endpoints import EndpointPool, bench_seconds
from ownloop.recorder.episode import EpisodeLimits, EpisodeResult, StepHook, run_episode
from ownloop.recorder.model import ModelClient, public_endpoint
from ownloop.recorder.probe import EndpointUnusable
from ownloop.recorder.suites import Suite, SuiteSource
from ownloop.store import Store
from ownloop.store.claims import Claim, Claims, lease_seconds
from ownloop.store.compactor import BackgroundCompaction, CompactionEnd
from ownloop.store.errors import OwnloopError
from ownloop.store.events import (
    ActionParsed,
    EndpointBenched,
    Event,
    ModelCalled,
    RunEnded,
    SessionCounted,
    SessionEnded,
    SessionStarted,
    StreamsCataloged,
    Task,
    TaskClaimed,
    Versions,
    now,
)
from ownloop.store.ids import new_id
from ownloop.store.journal import StreamWriter
from ownloop.store.ledger import ledger_sessions
from ownloop.store.scrub import scrub_text
from ownloop.version import __version__
from ownloop.world import World
from ownloop.world.pool import DesktopLease, DesktopPool

__all__ = [
    "RecordOptions",
    "RunSummary",
    "TaskRecorder",
    "record",
    "redact_argv",
    "FINAL_STATUSES",
    "SCORED",
]

# Statuses a session may end with that are not a pause (endpoint_error, interrupted, crashed).
FINAL_STATUSES = frozenset(
    {"finished", "call_user", "fail", "max_steps", "timeout", "parse_error", "no_action", "error"}
)
# The outcomes that count for a task: the first session to end with one wins it. An error (the
# browser or the harness failed, not the agent) gives the task back, like the ungraded statuses.
SCORED = FINAL_STATUSES - {"error"}
_RETRIED = frozenset({"error", "parse_error"})
_POLL_S = 0.5  # how often a task held by another recorder is looked at again
_SECRET_FLAGS = ("--api-key",)


class RecordOptions(NamedTuple):
    agent: str
    endpoint: str
    model: str
    api_key: str | None = None
    agent_options: dict[str, Any] = {}
    released: Released | None = None  # prompt texts read from a clone (agents.released_texts)
    run_id: str | None = None
    workers: int = 2
    limits: EpisodeLimits = EpisodeLimits()
    error_retries: int | None = None  # None: the agent's default
    settle_s: float = 1.0
    chromium: str | None = None
    call_retries: int = 3
    call_retry_wait_s: float = 5.0
    call_timeout_s: float = 120.0
    require_clean: bool = False  # refuse a checkout with uncommitted changes
    expect_suite: str | None = None  # refuse a suite whose sha256 is another
    argv: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()  # --allow-host: host globs the model may navigate to
    max_endpoint_errors: int = 3  # stop after this many endpoint_error sessions in a row; 0: never
    endpoints: tuple[str, ...] = ()  # --endpoint given several times: the pool (endpoint first)
    executor: str = "threads"  # or "ray": sessions on Ray actors (ownloop.recorder.ray_executor)
    ray_address: str | None = None  # --ray-address: "auto", HOST:PORT; None: $RAY_ADDRESS or local
    suite_source: SuiteSource | None = None  # how a Ray actor loads the same suite
    repeats: int = 1  # --repeat N: each task N times (repeats 1..N), each its own scored unit
    limit: int | None = None  # --limit N: only the suite's first N tasks (in the suite's order)
    desktops: tuple[str, ...] = ()  # --desktop URL (repeatable): the desktop world; workers = these
    reset: str | None = None  # --reset CMD: a host command before each desktop task ({url})
    a11y: bool = False  # --a11y: keep each desktop step's accessibility tree as a blob
    keep_png: bool = False  # --keep-png: screenshots stay the browser's PNG bytes (no compaction)
    compact_wait_s: float | None = None  # the run's end waits this long for the compaction
    # (None: $OWNLOOP_COMPACT_WAIT, else 10 s), then hands it off


class RunSummary(NamedTuple):
    run_id: str
    results: list[EpisodeResult]
    skipped: int
    crashed: int
    seconds: float
    interrupted: bool
    elsewhere: int = 0  # tasks another recorder of the run did meanwhile
    fatal: str = ""  # why the run stopped early (no browser, the endpoint failing), if it did
    not_started: int = 0  # tasks left for a resume when the run stopped early
    workers_lost: int = 0  # Ray actors that died (their node or process), each replaced once
    compaction: CompactionEnd | None = None  # the screenshots' background compaction at the end

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.results))


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """argv with secret values replaced, for RunStarted: the values of secret flags, and every
    credential form inside any argument (``user:pw@`` in URLs, tokens; see ownloop.store.scrub)."""
    argv = [scrub_text(arg) for arg in argv]
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in _SECRET_FLAGS:
            if eq:
                out.append(f"{flag}=***")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return tuple(out)


class _Unit(NamedTuple):
    """One scored unit of a run: a repeat of a task."""

    task: Task
    repeat: int


class _Standing(NamedTuple):
    """Where a run stands as a recorder starts: what it must write first, and what is left."""

    events: list[Event]  # crashed ends and settled counts, written with RunStarted
    crashed: int
    attempts: dict[str, int]  # task id -> highest attempt recorded (over its repeats)
    repeat_attempts: dict[tuple[str, int], int]  # (task id, repeat) -> highest attempt


def _standing(store: Store, claims: Claims, run_id: str) -> _Standing:
    """For a resumed run (or a second recorder on it): sessions to mark crashed, scored sessions
    whose count was never written, and the attempts so far.

    A session without an end is crashed unless its task's claim is live with that very session
    (another recorder is running it). A session that ended scored but has no ``SessionCounted``
    (its recorder was killed between the two) is settled now: the first such session of its task
    takes the task's done marker if no other session has. Replays of a run's sessions
    (``ownloop replay --execute``) share its run id but are not its attempts: they are left out.
    """
    events: list[Event] = []
    crashed = 0
    attempts: dict[str, int] = {}
    repeat_attempts: dict[tuple[str, int], int] = {}
    for session in ledger_sessions(store, run_id):
        task_id, repeat, session_id = session.task_id, session.repeat, session.session_id
        attempts[task_id] = max(attempts.get(task_id, 0), session.attempt)
        repeat_attempts[task_id, repeat] = max(
            repeat_attempts.get((task_id, repeat), 0), session.attempt
        )
        live = claims.in_flight(task_id, repeat) == session_id
        if session.status is None:
            ended = None if live else _crash(store, claims, run_id, session_id)
            if ended is not None:
                events.append(ended)
                crashed += 1
        elif session.status in SCORED and session.counted is None and not live:
            counting = claims.finish(task_id, repeat, session_id)
            events.append(
                SessionCounted(
                    at=now(),
                    run_id=run_id,
                    session_id=session_id,
                    task_id=task_id,
                    repeat=repeat,
                    counted=counting.counted,
                    winner=counting.winner,
                )
            )
        elif session.counted and claims.winner(task_id, repeat) is None:
            claims.finish(task_id, repeat, session_id)  # the marker was lost: the journal rules
    return _Standing(events, crashed, attempts, repeat_attempts)


class _Worker(threading.Thread):
    """Owns one Playwright driver and browser (they are bound to the thread that made them).

    The browser starts when the worker has claimed its first task, never before ``RunStarted``.
    """

    def __init__(self, runner: _Runner, number: int) -> None:
        super().__init__(name=f"ownloop-worker-{number}", daemon=True)
        self.runner = runner
        # Set when run() is over. Waited on instead of join(): before Python 3.13, a Ctrl-C that
        # interrupts join() can mark a thread that still runs as stopped, so a later join()
        # returned at once and its session was ended (and counted) twice.
        self.done = threading.Event()

    def run(self) -> None:
        runner = self.runner
        handle = None
        try:
            while not runner.stop.is_set():
                picked = runner.next_task()
                if picked is None:
                    return
                task, claim = picked
                old, handle = handle, None  # closed there if its browser died
                handle = runner.ensure_browser(old, claim)
                result = runner.run_one(handle, task, claim)
                runner.settle(task, claim, result)
                runner.report(result)
        except Exception as exc:  # noqa: BLE001 - a worker that cannot start a browser says why
            runner.fatal.append(
                str(exc) if isinstance(exc, OwnloopError) else f"{type(exc).__name__}: {exc}"
            )
            runner.stop.set()
        finally:
            try:
                if handle is not None:
                    handle.close()
            finally:
                self.done.set()


class TaskRecorder:
    """One recorder's work on one task at a time: claim it, start a browser, run the session,
    settle it. The threads of ``record`` share one; each Ray actor makes its own
    (:mod:`ownloop.recorder.ray_executor`) from the store path, run id and options."""

    # Told (session id, task id, step, what the step did) after each step, when set.
    on_step: Callable[[str, str, int, str], None] | None = None

    def __init__(
        self,
        store: Store,
        suite: Suite,
        agent: Agent,
        options: RecordOptions,
        run_id: str,
        claims: Claims,
        run_stream: StreamWriter,
    ) -> None:
        self.store, self.suite, self.agent, self.options = store, suite, agent, options
        self.run_id = run_id
        self.claims = claims
        self.run_stream = run_stream
        self.stop = threading.Event()
        self.done_elsewhere = 0
        self.crashed = 0  # sessions of stale claims this recorder ended as crashed
        self.in_flight: dict[str, str] = {}  # session id -> task id, until reported
        self._lock = threading.Lock()
        self.pool = EndpointPool(options.endpoints or (options.endpoint,), bench_seconds())
        self.desktops = DesktopPool(options.desktops) if options.desktops else None
        self._clients: dict[str, ModelClient] = {}
        self.client = self.client_for(options.endpoint)

    def client_for(self, endpoint: str) -> ModelClient:
        """The model client of one endpoint of the pool (made once, shared by the threads)."""
        with self._lock:
            if endpoint not in self._clients:
                options = self.options
                self._clients[endpoint] = ModelClient(
                    endpoint,
                    options.model,
                    load_blob=self.store.get_blob,
                    put_blob=self.store.put_blob,
                    api_key=options.api_key,
                    timeout_s=options.call_timeout_s,
                    retries=options.call_retries,
                    retry_wait_s=options.call_retry_wait_s,
                )
            return self._clients[endpoint]

    def take(
        self, task: Task, attempt: int, session_id: str | None = None, repeat: int = 1
    ) -> Claim | str:
        """Claim one repeat of the task for a new session: the Claim, or ``"done"`` (a session
        of it counts already) or ``"held"`` (another recorder runs it; look again later)."""
        claim = self.claims.claim(task.task_id, repeat, session_id or new_id(), attempt=attempt)
        if claim is not None and self._settle_orphan(task, claim):
            return "done"
        if claim is not None:
            return claim
        if self.claims.winner(task.task_id, repeat) is not None:
            with self._lock:
                self.done_elsewhere += 1
            return "done"
        return "held"

    def ensure_browser(self, handle: Any, claim: Claim) -> Any:
        """``handle`` while its browser lives, else a new browser (the first task, or the last
        one crashed); the claim is given back when none starts. On desktops: the worker's
        desktop lease, taken once."""
        if self.desktops is not None:
            try:
                return handle if handle is not None else self.desktops.take()
            except BaseException:
                self.claims.release(claim)
                raise
        try:
            if handle is None or not handle.browser.is_connected():
                if handle is not None:
                    handle.close()
                return open_browser(self.options.chromium)
            return handle
        except BaseException:
            self.claims.release(claim)
            raise

    def wants_retry(self, result: EpisodeResult, retries_left: int) -> bool:
        """Whether ``--error-retries`` runs the task again after this session."""
        return result.status in _RETRIED and retries_left > 0 and not self.stop.is_set()

    def _settle_orphan(self, task: Task, claim: Claim) -> bool:
        """Whether the session of the stale claim just taken over had ended scored (its recorder
        died between writing its end and its count): then it wins the task, first as it was."""
        old = claim.took_over_session
        ended = _end_of(self.store, old) if old else None
        if old is None or ended is None or ended.status not in SCORED:
            return False
        counting = self.claims.finish(task.task_id, claim.repeat, old)
        self.run_stream.append(
            [
                SessionCounted(
                    at=now(),
                    run_id=self.run_id,
                    session_id=old,
                    task_id=task.task_id,
                    repeat=claim.repeat,
                    counted=counting.counted,
                    winner=counting.winner,
                )
            ]
        )
        with self._lock:
            self.done_elsewhere += 1
        return True

    def run_one(
        self, handle: Any, task: Task, claim: Claim, endpoint: str | None = None
    ) -> EpisodeResult:
        """Run the claimed task's session on ``endpoint``, else on the pool's next endpoint (then
        an ``endpoint_error`` takes that endpoint out of the pool for a while)."""
        own_pick = endpoint is None
        endpoint = endpoint or self.pool.pick()
        settings = self.agent.settings
        events: list[Event] = [
            TaskClaimed(
                at=now(),
                run_id=self.run_id,
                session_id=claim.session_id,
                task_id=task.task_id,
                repeat=claim.repeat,
                holder=claim.holder,
                took_over=claim.took_over,
            )
        ]
        if claim.took_over_session:  # its recorder died mid-session: that session crashed
            crashed = _crash(self.store, self.claims, self.run_id, claim.took_over_session)
            if crashed is not None:
                events.append(crashed)
                with self._lock:
                    self.crashed += 1
        self.run_stream.append(events)
        world: World
        if isinstance(handle, DesktopLease):
            options = self.options
            world = handle.world(
                a11y=options.a11y,
                settle_s=options.settle_s,
                reset=options.reset,
                put_blob=self.store.put_blob,  # every exchange kept: the session's cassette
            )
            chromium = ""
        else:
            session = BrowserSession(
                handle.browser,
                settings.viewport,
                settle_s=self.options.settle_s,
                allow_hosts=self.options.allow_hosts,
            )
            world, chromium = BrowserWorld(session), browser_versions(handle.browser)["chromium"]
        try:
            started = SessionStarted(
                at=now(),
                run_id=self.run_id,
                session_id=claim.session_id,
                task=task,
                agent=self.agent.name,
                model=self.options.model,
                attempt=claim.attempt,
                viewport=settings.viewport,
                repeat=claim.repeat,
                chromium=chromium,
                endpoint=public_endpoint(endpoint),
            )
            with self._lock:
                self.in_flight[started.session_id] = task.task_id
            result = run_episode(
                store=self.store,
                agent=self.agent,
                client=self.client_for(endpoint),
                browser=world,
                suite=self.suite,
                started=started,
                limits=self.options.limits,
                stop=self.stop,
                grader_spec=task.grader or self.suite.default_grader,
                on_step=_step_reporter(self.on_step, started) if self.on_step else None,
            )
        finally:
            world.close()
        if own_pick and result.status == "endpoint_error":
            self.bench(endpoint, result.session_id, self.pool, self.run_stream)
        return result

    def bench(
        self, endpoint: str, session_id: str, pool: EndpointPool, stream: StreamWriter
    ) -> None:
        """Take ``endpoint`` out of ``pool`` after ``session_id`` failed on it, recorded."""
        if pool.bench(endpoint):
            stream.append(
                [
                    EndpointBenched(
                        at=now(),
                        run_id=self.run_id,
                        session_id=session_id,
                        endpoint=public_endpoint(endpoint),
                        seconds=pool.bench_s,
                    )
                ]
            )

    def settle_session(
        self, task: Task, claim: Claim, result: EpisodeResult, *, retry: bool
    ) -> None:
        """After a session: count it (a final outcome, unless it is retried) or give its claim
        back, and catalog its stream."""
        events: list[Event] = []
        if result.status in SCORED and not retry:
            counting = self.claims.finish(task.task_id, claim.repeat, result.session_id)
            events.append(
                SessionCounted(
                    at=now(),
                    run_id=self.run_id,
                    session_id=result.session_id,
                    task_id=task.task_id,
                    repeat=claim.repeat,
                    counted=counting.counted,
                    winner=counting.winner,
                )
            )
        else:
            if result.status in SCORED:  # retried: this attempt does not count, the retry may
                events.append(
                    SessionCounted(
                        at=now(),
                        run_id=self.run_id,
                        session_id=result.session_id,
                        task_id=task.task_id,
                        repeat=claim.repeat,
                        counted=False,
                    )
                )
            self.claims.release(claim)
        if result.head is not None:
            events.append(StreamsCataloged(at=now(), run_id=self.run_id, heads=(result.head,)))
        self.run_stream.append(events)


class _Runner(TaskRecorder):
    """The threaded executor's shared state: the queue of tasks, retries, results."""

    def __init__(
        self,
        store: Store,
        suite: Suite,
        agent: Agent,
        options: RecordOptions,
        run_id: str,
        on_result: Callable[[EpisodeResult], None],
        claims: Claims,
        run_stream: StreamWriter,
    ) -> None:
        super().__init__(store, suite, agent, options, run_id, claims, run_stream)
        self.on_result = on_result
        # (task, repeat, attempt) units to claim
        self.queue: queue.Queue[tuple[Task, int, int]] = queue.Queue()
        self.deferred: list[tuple[Task, int, int]] = []  # held elsewhere: looked at again
        self.retries_left: dict[tuple[str, int], int] = {}  # (task id, repeat) -> retries left
        self.results: list[EpisodeResult] = []
        self.fatal: list[str] = []

    def next_task(self) -> tuple[Task, Claim] | None:
        """The next task this recorder claimed, or None when none is left.

        A task another recorder holds is put aside and looked at again once the queue is empty:
        it gets done there (then it is dropped), released (then it is claimed here) or its claim
        goes stale (then it is taken over here).
        """
        while not self.stop.is_set():
            put_aside = False
            try:
                task, repeat, attempt = self.queue.get_nowait()
            except queue.Empty:
                with self._lock:
                    if not self.deferred:
                        return None
                    task, repeat, attempt = self.deferred.pop(0)
                put_aside = True
            taken = self.take(task, attempt, repeat=repeat)
            if isinstance(taken, Claim):
                return task, taken
            if taken == "done":
                continue
            with self._lock:
                self.deferred.append((task, repeat, attempt))
            if put_aside:
                self.stop.wait(_POLL_S)
        return None

    def settle(self, task: Task, claim: Claim, result: EpisodeResult) -> None:
        """``settle_session``, then queue the retry ``--error-retries`` asks for."""
        unit = (task.task_id, claim.repeat)
        retries = self.retries_left.get(unit, 0)
        retry = self.wants_retry(result, retries)
        self.settle_session(task, claim, result, retry=retry)
        if retry:
            self.retries_left[unit] = retries - 1
            self.queue.put((task, claim.repeat, claim.attempt + 1))

    def report(self, result: EpisodeResult) -> None:
        with self._lock:
            self.results.append(result)
            self.in_flight.pop(result.session_id, None)
        self.on_result(result)


def record(
    store: Store,
    suite: Suite,
    options: RecordOptions,
    *,
    on_start: Callable[[str, int, int], None] = lambda run_id, todo, skipped: None,
    on_result: Callable[[EpisodeResult], None] = lambda result: None,
    on_step: Callable[[str, str, int, str], None] | None = None,
    on_notice: Callable[[str], None] = lambda line: None,
) -> RunSummary:
    """Record ``options.agent`` on every task of ``suite`` not yet done in the run.

    Admission comes first and writes nothing when it refuses (see :mod:`.admission`); then
    ``RunStarted`` is written, and only then do browsers start. Other recorders may work on the
    same run at once: each task is claimed before its session starts (:mod:`ownloop.store.claims`).
    """
    if options.repeats < 1:
        raise OwnloopError(f"--repeat must be 1 or more, not {options.repeats}")
    if options.executor == "ray":  # before anything is written: a missing extra says so
        from ownloop.recorder.ray_executor import require_ray

        require_ray()
    agent = make_agent(options.agent, released=options.released, **options.agent_options)
    run_id = options.run_id or f"{agent.name}-{new_id(10)}"
    begun = time.monotonic()
    source = source_state()
    if options.require_clean:
        check_clean(source)
    if options.expect_suite:
        check_suite(suite, options.expect_suite)
    # Every endpoint is checked before anything is written and before a browser starts (MiniWoB's
    # prompts are read in one): a dead endpoint is one line in a second, not every task's retries.
    # In a pool, the run goes on while one endpoint answers: the others are named, and the pool
    # benches them when their sessions fail.
    unusable: list[EndpointUnusable] = []
    pool = list(dict.fromkeys(options.endpoints or (options.endpoint,)))
    for endpoint in pool:
        try:
            ModelClient(
                endpoint,
                options.model,
                load_blob=store.get_blob,
                api_key=options.api_key,
                timeout_s=options.call_timeout_s,
            ).check()
        except EndpointUnusable as exc:
            unusable.append(exc)
    if len(unusable) == len(pool):
        raise unusable[0]
    for refusal in unusable:
        on_notice(f"notice: {refusal}; the run goes on with the other endpoints")
    tasks = suite.tasks()[: options.limit]
    if not tasks:
        raise OwnloopError("the suite has no tasks. Check --suite PATTERN or the --tasks file")
    check_world(tasks, agent, options.desktops)
    world = "desktop" if options.desktops else "browser"
    in_world = world_agent_options(options.agent, world, options.agent_options)
    if in_world != options.agent_options:  # on a desktop: the released OSWorld loop's defaults
        options = options._replace(agent_options=in_world)
        agent = make_agent(options.agent, released=options.released, **in_world)
    check_graders(tasks, suite.default_grader)
    started = declare(
        run_id=run_id,
        argv=redact_argv(options.argv),
        agent=agent,
        model=options.model,
        suite=suite,
        tasks=tasks,
        endpoint=" ".join(public_endpoint(e) for e in options.endpoints or (options.endpoint,)),
        max_steps=options.limits.max_steps,
        timeout_s=options.limits.timeout_s,
        versions=_versions(source),
        repeats=options.repeats,
    )
    claims = Claims(store.root, run_id, lease_s=lease_seconds(options.limits.timeout_s))
    # Each session that ends has its screenshots compacted in a low-priority child process
    # (ownloop.store.compactor); the run's end waits a little for it, then hands it off.
    compaction = (
        None if options.keep_png else BackgroundCompaction(store.root, options.compact_wait_s)
    )
    if compaction is not None:
        on_result = _then_compact(on_result, compaction)
    try:
        admit(store, claims, started)
        standing = _standing(store, claims, run_id)
        todo = [
            _Unit(t, r)
            for t in tasks
            for r in range(1, options.repeats + 1)
            if claims.winner(t.task_id, r) is None
        ]
        skipped = len(tasks) * options.repeats - len(todo)
        if not todo and not standing.events:
            return RunSummary(run_id, [], skipped, 0, 0.0, False)
        with store.stream() as run_stream:
            run_stream.append([started, *standing.events])
            if options.executor == "ray":
                from ownloop.recorder.ray_executor import run_on_ray

                summary = run_on_ray(
                    store,
                    agent,
                    options,
                    run_id,
                    todo,
                    skipped,
                    standing.crashed,
                    standing.repeat_attempts,
                    run_stream,
                    begun,
                    on_start,
                    on_result,
                    on_step,
                )
            else:
                summary = _run(
                    store,
                    suite,
                    agent,
                    options,
                    run_id,
                    todo,
                    skipped,
                    standing,
                    claims,
                    run_stream,
                    begun,
                    on_start,
                    on_result,
                    on_step,
                )
    except BaseException:
        if compaction is not None:
            compaction.finish(0.0)  # what it was given goes on; nothing is waited for
        raise
    finally:
        claims.close()
    store.sync()
    if compaction is not None:
        for result in summary.results:
            compaction.add(result.session_id)  # those ended at a Ctrl-C too
        # (after a Ctrl-C the user wants out: handed off at once)
        ended = compaction.finish(0.0 if summary.interrupted else None)
        summary = summary._replace(compaction=ended)
    if summary.fatal and not summary.results:
        raise OwnloopError(summary.fatal)
    return summary


def _then_compact(
    on_result: Callable[[EpisodeResult], None], compaction: BackgroundCompaction
) -> Callable[[EpisodeResult], None]:
    """``on_result``, then the session's screenshots handed to the background compaction."""

    def reported(result: EpisodeResult) -> None:
        on_result(result)
        compaction.add(result.session_id)

    return reported


_WEB_AGENTS = frozenset({"fara7b", "molmoweb"})


def check_world(tasks: Sequence[Task], agent: Agent, desktops: Sequence[str]) -> None:
    """Refuse, before anything is written, a run whose tasks and world do not go together."""
    on_desktop = any(task.world == "desktop" for task in tasks)
    if on_desktop and not desktops:
        raise OwnloopError("OSWorld tasks run on a desktop: give --desktop URL (repeatable)")
    if desktops and not on_desktop:
        raise OwnloopError("--desktop is for desktop tasks: give --suite osworld:DIR")
    if desktops and agent.name in _WEB_AGENTS:
        raise OwnloopError(
            f"{agent.name} is a web agent (it visits URLs, searches, goes back): record it in "
            "the browser; on a desktop use uitars or opencua"
        )


def _run(
    store: Store,
    suite: Suite,
    agent: Agent,
    options: RecordOptions,
    run_id: str,
    todo: list[_Unit],
    skipped: int,
    standing: _Standing,
    claims: Claims,
    run_stream: StreamWriter,
    begun: float,
    on_start: Callable[[str, int, int], None],
    on_result: Callable[[EpisodeResult], None],
    on_step: Callable[[str, str, int, str], None] | None = None,
) -> RunSummary:
    streak = _EndpointErrors(options.max_endpoint_errors)
    left: list[int] = []

    def reported(result: EpisodeResult) -> None:
        if streak.add(result):
            # No task starts any more (a resume runs them); sessions in flight end as they will.
            left.append(_drain(runner))
        on_result(result)

    runner = _Runner(store, suite, agent, options, run_id, reported, claims, run_stream)
    runner.on_step = on_step
    retries = (
        agent.settings.error_retries if options.error_retries is None else options.error_retries
    )
    for task, repeat in todo:
        attempt = standing.repeat_attempts.get((task.task_id, repeat), 0) + 1
        runner.queue.put((task, repeat, attempt))
        runner.retries_left[task.task_id, repeat] = retries
    on_start(run_id, len(todo), skipped)
    wanted = len(options.desktops) if options.desktops else options.workers  # workers = desktops
    workers = [_Worker(runner, n) for n in range(max(1, min(wanted, len(todo))))]
    for worker in workers if todo else []:
        worker.start()
    interrupted = False
    try:
        for worker in workers if todo else []:
            while not worker.done.wait(0.2):
                pass
    except KeyboardInterrupt:
        interrupted = True
        runner.stop.set()
        for worker in workers if todo else []:
            worker.done.wait(30)
        # A session whose worker did not get to write its end (it was still stopping, or
        # its browser went down with the same Ctrl-C) ends here, so none is left open.
        unended = [
            SessionEnded(
                at=now(),
                run_id=run_id,
                session_id=session_id,
                status="interrupted",
                error="interrupted (Ctrl-C)",
            )
            for session_id in list(runner.in_flight)
            if not _has_ended(store, session_id)
        ]
        run_stream.append(unended)
        runner.results.extend(
            EpisodeResult(
                e.session_id,
                runner.in_flight[e.session_id],
                "interrupted",
                None,
                0,
                0.0,
                None,
                None,
                e.error,
            )
            for e in unended
        )
    with runner._lock:  # a worker still stopping after 30 s must not add to the summary
        results = list(runner.results)
    fatal = runner.fatal[0] if runner.fatal else streak.stopped
    not_started = sum(left) + runner.queue.qsize() + len(runner.deferred) if fatal else 0
    summary = RunSummary(
        run_id,
        results,
        skipped,
        standing.crashed + runner.crashed,
        round(time.monotonic() - begun, 3),
        interrupted,
        runner.done_elsewhere,
        fatal,
        not_started,
    )
    counts = summary.counts()
    if summary.crashed:
        counts["crashed"] = counts.get("crashed", 0) + summary.crashed
    run_stream.append([RunEnded(at=now(), run_id=run_id, counts=counts, seconds=summary.seconds)])
    return summary


class _EndpointErrors:
    """Sessions in a row that ended ``endpoint_error``: at ``limit`` (0: never) the run stops."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_a_row = 0
        self.stopped = ""  # why the run stopped, once it did
        self._lock = threading.Lock()

    def add(self, result: EpisodeResult) -> bool:
        """Count a session's end; True when this one stops the run."""
        with self._lock:
            self.in_a_row = self.in_a_row + 1 if result.status == "endpoint_error" else 0
            if self.stopped or not self.limit or self.in_a_row < self.limit:
                return False
            last = f" (the last: {result.error[:120]})" if result.error else ""
            self.stopped = (
                f"{self.in_a_row} sessions in a row ended endpoint_error{last}; "
                "--max-endpoint-errors stops the run there"
            )
            return True


def _drain(runner: _Runner) -> int:
    """Take every task not started off the runner's queue, and say how many there were."""
    taken = 0
    while True:
        try:
            runner.queue.get_nowait()
        except queue.Empty:
            break
        taken += 1
    with runner._lock:
        taken += len(runner.deferred)
        runner.deferred.clear()
    return taken


def _step_reporter(
    on_step: Callable[[str, str, int, str], None], started: SessionStarted
) -> StepHook:
    """The episode's step hook that tells ``on_step`` what each step did, in a few words."""

    def seen(step: int, batch: list[Event]) -> None:
        on_step(started.session_id, started.task.task_id, step, _step_note(batch))

    return seen


def _step_note(batch: list[Event]) -> str:
    """``click, type``; ``parse error``; ``model call failed``: a step's events in a few words."""
    for event in reversed(batch):
        if isinstance(event, ActionParsed) and event.error is None:
            kinds = [type(action).__struct_config__.tag for action in event.actions]
            return ", ".join(str(kind) for kind in kinds) or "no action"
    if any(isinstance(event, ActionParsed) for event in batch):
        return "parse error"
    calls = [event for event in batch if isinstance(event, ModelCalled)]
    if calls and calls[-1].response is None:
        return "model call failed"
    return "screenshot" if batch else ""


def _crash(store: Store, claims: Claims, run_id: str, session_id: str) -> SessionEnded | None:
    """The ``crashed`` end of a session a dead recorder left open, if this recorder is the one to
    write it (exactly one does); None if the session has an end, or never started its stream."""
    if not (store.journal_dir / f"{session_id}.jsonl").exists() or _has_ended(store, session_id):
        return None
    if not claims.mark_crashed(session_id):
        return None
    return SessionEnded(
        at=now(),
        run_id=run_id,
        session_id=session_id,
        status="crashed",
        error="no end recorded: the recorder stopped mid-session",
    )


def _has_ended(store: Store, session_id: str) -> bool:
    """Whether the session's own stream already holds its end (written, not yet reported)."""
    return _end_of(store, session_id) is not None


def _end_of(store: Store, session_id: str) -> SessionEnded | None:
    """The end the session's own stream holds, if any."""
    try:
        ends = [e for e in store.read_stream(session_id) if isinstance(e, SessionEnded)]
    except OwnloopError:  # no stream: the session never got to write one
        return None
    return ends[-1] if ends else None


def _versions(source: SourceState) -> Versions:
    """Versions known before any browser starts (each session records its Chromium's)."""
    try:
        from importlib.metadata import version

        playwright_version = version("playwright")
    except Exception:  # noqa: BLE001 - metadata may be missing in odd installs
        playwright_version = ""
    return Versions(
        ownloop=__version__,
        git_commit=source.commit,
        git_dirty=source.dirty,
        python=sys.version.split()[0],
        playwright=playwright_version,
        os=platform.platform(),
    )
