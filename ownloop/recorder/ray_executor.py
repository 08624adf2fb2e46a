"""``ownloop record --executor ray``: the sessions of a run on Ray actors, many nodes, one store.

The driver (the ``ownloop record`` process) has written ``RunStarted`` before it gets here; it
never opens a browser. It starts ``--workers`` actors spread over the cluster's nodes; each owns
one Chromium (a browser context per task) and a
:class:`~ownloop.recorder.task_recorder.TaskRecorder` made from the store's path, the run id
and the options, so the claim, the episode loop and the settling are the threaded executor's
code. The driver hands each idle actor the next task (the
actor pulls by finishing its last one) and shows the same progress lines, the steps of the
sessions in flight included (each busy actor answers a long poll with its new steps). The actor
claims the task in the store before its browser starts and writes its sessions into the shared
store folder, which every node must see at the same path (a shared file system).

On desktops (``--desktop URL``, repeatable) the actors are the desktop pool's workers: one actor
per desktop, each holding its one desktop (``RecordOptions.desktops`` of that URL alone) for all
its sessions, so a desktop is held by one session at a time, as under threads; the actor needs
no browser, and reaches its desktop, and runs ``--reset``, from whichever node it is placed on.
An actor that dies gives its desktop to the actor that replaces it.

A node that dies takes only its sessions in flight: their claims go stale (the holder's process
is gone, or its lease runs out), and the task goes back to the queue, where another actor takes
the claim over, marks the lost session ``crashed`` and records the task as a new attempt.
Ctrl-C on the driver asks every actor to stop: their sessions end ``interrupted``.

This is the one module that imports ``ray`` (the ``ownloop[ray]`` extra).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from ownloop.agents import make_agent
from ownloop.errors import OwnloopError
from ownloop.recorder.endpoints import EndpointPool, bench_seconds
from ownloop.recorder.episode import EpisodeResult
from ownloop.recorder.model import public_endpoint
from ownloop.recorder.run_options import RecordOptions, RunSummary, RunWork
from ownloop.recorder.task_recorder import EndpointErrors, TaskRecorder
from ownloop.store import Store, open_store
from ownloop.store.claims import Claim, Claims, claims_dir, lease_seconds
from ownloop.store.events import EndpointBenched, SessionEnded, Task, now
from ownloop.store.ids import new_id
from ownloop.store.journal import StreamWriter

__all__ = ["require_ray", "run_on_ray"]

_MISSING = "--executor ray needs Ray. Install it with: pip install 'ownloop[ray]'"
_START_WAIT_S = 120.0  # how long the driver waits for the first actor to start
_POLL_S = 0.5  # how often a task held by another recorder is looked at again
_STOP_WAIT_S = 30.0  # after Ctrl-C, how long in-flight sessions get to end themselves
_STEPS_WAIT_S = 2.0  # how long an actor holds a driver's ask for steps when there is no news

StepNews = tuple[str, str, int, str]  # (session id, task id, step, what the step did)


def require_ray() -> Any:
    """The ``ray`` module, or a one-line error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise OwnloopError(_MISSING) from None
    return ray


class _Job(NamedTuple):
    """One session an actor is asked to record: a repeat of a task, its attempt and session id,
    the error retries left for it, and the endpoint the driver's pool chose."""

    task: Task
    repeat: int
    attempt: int
    session_id: str
    retries_left: int
    endpoint: str


class _Done(NamedTuple):
    """What an actor did with one task."""

    outcome: str  # "recorded", "done" (another session counts), "held" (another recorder has it)
    result: EpisodeResult | None = None
    retry: bool = False  # --error-retries: run the task again
    crashed: int = 0  # sessions of stale claims it marked crashed
    elsewhere: int = 0  # 1 when the task turned out done by another recorder


class _Actor:
    """One Ray actor: one Chromium, one TaskRecorder, its own claims and run stream.

    Playwright's sync objects belong to the thread that made them, and Ray may call an actor's
    methods on other threads: every browser call runs on the actor's one own thread.
    """

    def __init__(
        self, store_root: str, run_id: str, options: RecordOptions, lease_s: float
    ) -> None:
        self.store_root, self.run_id, self.options, self.lease_s = (
            store_root,
            run_id,
            options,
            lease_s,
        )
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ownloop-ray-actor")
        self._recorder: TaskRecorder | None = None
        self._suite: Any = None
        self._stream: StreamWriter | None = None
        self._handle: Any = None
        self._news: list[StepNews] = []
        self._news_came = threading.Condition()

    def open(self) -> str:
        """Set up; returns "" or the one-line reason this node cannot record."""
        return self._thread.submit(self._open).result()

    def _open(self) -> str:
        root = Path(self.store_root)
        host = socket.gethostname()
        if not (claims_dir(root, self.run_id) / "contract.json").exists():
            return (
                f"node {host} does not see the store at {root} (the run's claims are not "
                "there): put the store on a file system every node mounts, at the same path"
            )
        probe = claims_dir(root, self.run_id) / f".probe-{new_id()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            return f"node {host} cannot write the store at {root}: {error.strerror}"
        try:
            store = open_store(root)
            options = self.options
            agent = make_agent(options.agent, released=options.released, **options.agent_options)
            source = options.suite_source
            if source is None:
                return "--executor ray needs the suite's source (RecordOptions.suite_source)"
            self._suite = source.load().__enter__()
            claims = Claims(root, self.run_id, lease_s=self.lease_s)
            self._stream = store.stream()
            self._recorder = TaskRecorder(
                store, self._suite, agent, options, self.run_id, claims, self._stream
            )
            self._recorder.on_step = self._stepped
        except OwnloopError as error:
            return f"node {host}: {error}"
        return ""

    def record(self, job: _Job) -> _Done:
        """Claim one repeat of the task and, if this actor got it, run and settle one session
        on ``job.endpoint`` (the driver's pool chose it)."""
        return self._thread.submit(self._record, job).result()

    def _record(self, job: _Job) -> _Done:
        task, repeat, attempt, session_id, retries_left, endpoint = job
        recorder = self._recorder
        assert recorder is not None, "open() first"
        crashed, elsewhere = recorder.crashed, recorder.done_elsewhere
        taken = recorder.take(task, attempt, session_id, repeat=repeat)
        if not isinstance(taken, Claim):
            return _Done(taken, elsewhere=recorder.done_elsewhere - elsewhere)
        old, self._handle = self._handle, None
        self._handle = recorder.ensure_browser(old, taken)
        result = recorder.run_one(self._handle, task, taken, endpoint)
        retry = recorder.wants_retry(result, retries_left)
        recorder.settle_session(task, taken, result, retry=retry)
        with recorder._lock:
            recorder.in_flight.pop(result.session_id, None)
        return _Done("recorded", result, retry, recorder.crashed - crashed)

    def _stepped(self, session_id: str, task_id: str, step: int, note: str) -> None:
        with self._news_came:
            self._news.append((session_id, task_id, step, note))
            self._news_came.notify_all()

    def steps(self, wait_s: float) -> list[StepNews]:
        """The steps taken since the last call, waiting up to ``wait_s`` for one (called while
        ``record`` runs: the driver's long poll for its progress lines)."""
        with self._news_came:
            self._news_came.wait_for(lambda: self._news, timeout=wait_s)
            news, self._news = self._news, []
        return news

    def stop(self) -> None:
        """End the session in flight as ``interrupted`` (called while ``record`` runs)."""
        if self._recorder is not None:
            self._recorder.stop.set()

    def close(self) -> None:
        """Close the browser, give back every claim, close the stream and the suite."""
        self._thread.submit(self._close).result()

    def _close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._recorder is not None:
            self._recorder.claims.close()
        if self._stream is not None:
            self._stream.close()
        if self._suite is not None:
            self._suite.__exit__(None, None, None)


class _Slot(NamedTuple):
    """A task handed to an actor, until its answer comes back."""

    actor: Any
    task: Task
    repeat: int
    attempt: int
    session_id: str
    endpoint: str


def _connect(ray: Any, address: str | None) -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report from a recorder
    try:
        ray.init(
            address=address,
            log_to_driver=False,
            logging_level="ERROR",
            configure_logging=True,
            include_dashboard=False if address is None else None,
        )
    except ConnectionError as error:
        raise OwnloopError(
            f"cannot reach the Ray cluster at {address}: {error}. Start one "
            "with: ray start --head, or pass --ray-address HOST:PORT"
        ) from None


def run_on_ray(work: RunWork) -> RunSummary:
    """Record ``work.todo``, (task, repeat) units, on ``options.workers`` Ray actors;
    ``on_step`` is told each step of the sessions in flight, as under threads. The runner
    writes the run's end."""
    agent, options, run_id, todo = work.agent, work.options, work.run_id, work.todo
    ray = require_ray()
    _connect(ray, options.ray_address)
    retries = (
        agent.settings.error_retries if options.error_retries is None else options.error_retries
    )
    retries_left = {(task.task_id, repeat): retries for task, repeat in todo}
    driver = _Driver(ray, work, retries_left)
    work.on_start(run_id, len(todo), work.skipped)
    interrupted = False
    try:
        driver.start()
        driver.run()
        if driver.fatal:  # sessions still in flight on other actors end too
            driver.interrupt("the run stopped early")
    except KeyboardInterrupt:
        interrupted = True
        driver.interrupt("interrupted (Ctrl-C)")
    finally:
        driver.close()
        ray.shutdown()
    return RunSummary(
        run_id,
        driver.results,
        work.skipped,
        work.crashed + driver.crashed,
        round(time.monotonic() - work.begun, 3),
        interrupted,
        driver.elsewhere,
        driver.fatal,
        len(driver.pending) + len(driver.deferred) if driver.fatal else 0,
        driver.lost,
    )


class _Driver:
    """The driver's side: actors, the queue of tasks, what is in flight, the results."""

    def __init__(self, ray: Any, work: RunWork, retries_left: dict[tuple[str, int], int]) -> None:
        options = work.options
        self.ray, self.store, self.options, self.run_id = ray, work.store, options, work.run_id
        self.run_stream = work.run_stream
        # (task, repeat, attempt) units to hand out
        self.pending: deque[tuple[Task, int, int]] = deque(
            (task, repeat, work.attempts.get((task.task_id, repeat), 0) + 1)
            for task, repeat in work.todo
        )
        self.deferred: list[tuple[Task, int, int]] = []  # held elsewhere: looked at again
        self.retries_left = retries_left
        self.on_result = work.on_result
        self.results: list[EpisodeResult] = []
        self.crashed = 0
        self.elsewhere = 0
        self.lost = 0  # actors that died; each is replaced, up to the number of workers
        self._remote: Any = None
        self._lease = 0.0
        # Desktops: one actor per desktop (workers = desktops), each holding its own.
        self.desktops = list(dict.fromkeys(url.rstrip("/") for url in options.desktops))
        self.workers = len(self.desktops) if self.desktops else options.workers
        self.desktop_of: dict[Any, str] = {}  # actor -> the desktop it holds
        self.fatal = ""
        self.actors: list[Any] = []
        self.opening: dict[Any, Any] = {}  # open() ref -> actor
        self.idle: list[Any] = []
        self.running: dict[Any, _Slot] = {}  # record() ref -> what it runs
        self.pool = EndpointPool(options.endpoints or (options.endpoint,), bench_seconds())
        self.streak = EndpointErrors(options.max_endpoint_errors)
        self._started = time.monotonic()
        self._deferred_at = 0.0
        self.on_step = work.on_step
        self.asking: dict[Any, Any] = {}  # steps() ref -> actor: the long polls out

    def start(self) -> None:
        # Three calls at once: record(), the driver's long poll for steps and stop() (Ctrl-C).
        self._remote = self.ray.remote(num_cpus=1, max_concurrency=3)(_Actor)
        self._lease = lease_seconds(self.options.limits.timeout_s)
        for number in range(max(1, min(self.workers, len(self.pending)))):
            self._spawn(self.desktops[number] if self.desktops else None)
        self._started = time.monotonic()

    def _spawn(self, desktop: str | None = None) -> None:
        """One more actor; on desktops, the one that holds ``desktop``."""
        options = self.options if desktop is None else self.options._replace(desktops=(desktop,))
        actor = self._remote.options(scheduling_strategy="SPREAD").remote(
            str(self.store.root.resolve()), self.run_id, options, self._lease
        )
        self.actors.append(actor)
        if desktop is not None:
            self.desktop_of[actor] = desktop
        self.opening[actor.open.remote()] = actor

    def _lose(self, actor: Any) -> None:
        """An actor died with its node or process: ask the cluster for another (once per worker
        in all, so a node that kills every actor placed on it cannot loop), if work is left. On
        desktops, the new actor holds the lost one's desktop."""
        self.actors.remove(actor)
        self.lost += 1
        desktop = self.desktop_of.pop(actor, None)
        if self.lost <= self.workers and (self.pending or self.deferred):
            self._spawn(desktop)
            if not self.idle and not self.running:
                self._started = time.monotonic()  # the start wait counts from here

    def run(self) -> None:
        ray = self.ray
        while not self.fatal:
            self._hand_out()
            if not self.running and not self.pending and not self.deferred:
                return
            if not self.running and not self.idle and not self.opening:
                self.fatal = "every Ray worker died: run the same command again to finish the run"
                return
            if (
                not self.running
                and not self.idle
                and time.monotonic() - self._started > _START_WAIT_S
            ):
                self.fatal = (
                    f"no Ray worker started in {_START_WAIT_S:.0f}s: each takes one "
                    "CPU of the cluster (see: ray status)"
                )
                return
            waiting = [*self.running, *self.opening, *self.asking]
            if not waiting:  # only tasks held elsewhere are left: look again in a while
                time.sleep(_POLL_S)
                continue
            ready, _ = ray.wait(waiting, num_returns=1, timeout=_POLL_S)
            for ref in ready:
                if ref in self.opening:
                    self._opened(ref)
                elif ref in self.asking:
                    self._told(ref)
                else:
                    self._answered(ref)

    def _hand_out(self) -> None:
        if not self.pending and self.deferred and time.monotonic() - self._deferred_at >= _POLL_S:
            self.pending.extend(self.deferred)
            self.deferred.clear()
        while self.idle and self.pending:
            task, repeat, attempt = self.pending.popleft()
            actor = self.idle.pop()
            session_id, endpoint = new_id(), self.pool.pick()
            retries_left = self.retries_left.get((task.task_id, repeat), 0)
            ref = actor.record.remote(
                _Job(task, repeat, attempt, session_id, retries_left, endpoint)
            )
            self.running[ref] = _Slot(actor, task, repeat, attempt, session_id, endpoint)
            self._ask(actor)

    def _ask(self, actor: Any) -> None:
        """Keep one long poll for steps out to ``actor`` while it runs a session."""
        if self.on_step is not None and actor not in self.asking.values():
            self.asking[actor.steps.remote(_STEPS_WAIT_S)] = actor

    def _told(self, ref: Any) -> None:
        actor = self.asking.pop(ref)
        try:
            news: list[StepNews] = self.ray.get(ref)
        except self.ray.exceptions.RayError:
            return  # its actor died: its record() answer says so
        in_flight = {slot.session_id for slot in self.running.values()}
        assert self.on_step is not None
        for session_id, task_id, step, note in news:
            if session_id in in_flight:  # a late step of a session already reported: dropped
                self.on_step(session_id, task_id, step, note)
        if any(slot.actor == actor for slot in self.running.values()):
            self._ask(actor)

    def _opened(self, ref: Any) -> None:
        actor = self.opening.pop(ref)
        try:
            problem = self.ray.get(ref)
        except self.ray.exceptions.RayActorError:
            self._lose(actor)  # its node died as it started
            return
        if problem:
            self.fatal = problem
            return
        self.idle.append(actor)

    def _answered(self, ref: Any) -> None:
        slot = self.running.pop(ref)
        try:
            done: _Done = self.ray.get(ref)
        except self.ray.exceptions.RayActorError:
            # Its node (or process) died: the session in flight is lost. Its claim goes stale,
            # and whoever takes the task over marks that session crashed.
            self._defer(slot.task, slot.repeat, slot.attempt + 1)
            self._lose(slot.actor)
            return
        except self.ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            self.fatal = (
                str(cause)
                if isinstance(cause, OwnloopError)
                else f"{type(cause or error).__name__}: {cause or error}"
            )
            return
        self.idle.append(slot.actor)
        self.crashed += done.crashed
        self.elsewhere += done.elsewhere
        if done.outcome == "held":
            self._defer(slot.task, slot.repeat, slot.attempt)
        elif done.result is not None:
            if done.result.status == "endpoint_error" and self.pool.bench(slot.endpoint):
                self.run_stream.append(
                    [
                        EndpointBenched(
                            at=now(),
                            run_id=self.run_id,
                            session_id=done.result.session_id,
                            endpoint=public_endpoint(slot.endpoint),
                            seconds=self.pool.bench_s,
                        )
                    ]
                )
            self.results.append(done.result)
            self.on_result(done.result)
            if self.streak.add(done.result):
                self.fatal = self.streak.stopped
            if done.retry:
                self.retries_left[slot.task.task_id, slot.repeat] -= 1
                self.pending.append((slot.task, slot.repeat, slot.attempt + 1))

    def _defer(self, task: Task, repeat: int, attempt: int) -> None:
        self.deferred.append((task, repeat, attempt))
        self._deferred_at = time.monotonic()

    def interrupt(self, why: str) -> None:
        """Ctrl-C (or a stop): every actor ends its session as ``interrupted``; sessions whose
        actor did not answer in time are ended here, so none is left open."""
        for actor in self.actors:
            actor.stop.remote()
        deadline = time.monotonic() + _STOP_WAIT_S
        while self.running and time.monotonic() < deadline:
            ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=1.0)
            for ref in ready:
                self._answered(ref)
        unended = [
            SessionEnded(
                at=now(),
                run_id=self.run_id,
                session_id=slot.session_id,
                status="interrupted",
                error=why,
            )
            for slot in self.running.values()
            if _open_session(self.store, slot.session_id)
        ]
        self.run_stream.append(unended)
        tasks = {slot.session_id: slot.task.task_id for slot in self.running.values()}
        self.results.extend(
            EpisodeResult(
                e.session_id, tasks[e.session_id], "interrupted", None, 0, 0.0, None, None, e.error
            )
            for e in unended
        )
        self.running.clear()

    def close(self) -> None:
        """Close every started actor (browsers, claims, streams), then end them all (one still
        waiting for a place in the cluster is ended without waiting)."""
        waiting = set(self.opening.values())
        closing = [actor.close.remote() for actor in self.actors if actor not in waiting]
        if closing:
            self.ray.wait(closing, num_returns=len(closing), timeout=_STOP_WAIT_S)
        for actor in self.actors:
            self.ray.kill(actor)


def _open_session(store: Store, session_id: str) -> bool:
    """Whether the session's stream was started and holds no end yet."""
    path = store.journal_dir / f"{session_id}.jsonl"
    if not path.exists():
        return False
    try:
        return not any(isinstance(e, SessionEnded) for e in store.read_stream(session_id))
    except OwnloopError:
        return False
