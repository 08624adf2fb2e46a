"""The threaded executor: worker threads, each with its own Playwright driver and browser (or
a desktop of the pool), sharing one ``TaskRecorder``'s queue of tasks, retries and results."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from ownloop.errors import OwnloopError
from ownloop.recorder.episode import EpisodeResult
from ownloop.recorder.run_options import RunSummary, RunWork
from ownloop.recorder.task_recorder import EndpointErrors, TaskRecorder, has_ended
from ownloop.store.claims import Claim
from ownloop.store.events import SessionEnded, Task, now

__all__ = ["run_on_threads"]

_POLL_S = 0.5  # how often a task held by another recorder is looked at again


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


class _Runner(TaskRecorder):
    """The threaded executor's shared state: the queue of tasks, retries, results."""

    def __init__(self, work: RunWork, on_result: Callable[[EpisodeResult], None]) -> None:
        super().__init__(
            work.store,
            work.suite,
            work.agent,
            work.options,
            work.run_id,
            work.claims,
            work.run_stream,
        )
        self.on_step = work.on_step
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


def run_on_threads(work: RunWork) -> RunSummary:
    """Record ``work.todo`` on worker threads (one per desktop on a desktop, else
    ``--workers``); the runner writes the run's end."""
    store, agent, options, run_id = work.store, work.agent, work.options, work.run_id
    todo, run_stream, on_result = work.todo, work.run_stream, work.on_result
    streak = EndpointErrors(options.max_endpoint_errors)
    left: list[int] = []

    def reported(result: EpisodeResult) -> None:
        if streak.add(result):
            # No task starts any more (a resume runs them); sessions in flight end as they will.
            left.append(_drain(runner))
        on_result(result)

    runner = _Runner(work, reported)
    retries = (
        agent.settings.error_retries if options.error_retries is None else options.error_retries
    )
    for task, repeat in todo:
        attempt = work.attempts.get((task.task_id, repeat), 0) + 1
        runner.queue.put((task, repeat, attempt))
        runner.retries_left[task.task_id, repeat] = retries
    work.on_start(run_id, len(todo), work.skipped)
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
            if not has_ended(store, session_id)
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
    return RunSummary(
        run_id,
        results,
        work.skipped,
        work.crashed + runner.crashed,
        round(time.monotonic() - work.begun, 3),
        interrupted,
        runner.done_elsewhere,
        fatal,
        not_started,
    )


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
