"""The runner: tasks × worker threads, each with its own browser; resume; error retries.

A run is named by ``--run`` (or a generated name). Running the same command again with the same
run resumes it: tasks whose latest session ended with a final status are skipped, the others run as
a new attempt, and sessions a killed process left without an end are first marked ``crashed``.
"""

from __future__ import annotations

import platform
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ownloop import __version__
from ownloop.agents import make_agent
from ownloop.agents.base import Agent
from ownloop.recorder.browser import BrowserSession, browser_versions, open_browser
from ownloop.recorder.episode import EpisodeLimits, EpisodeResult, run_episode
from ownloop.recorder.model import ModelClient, public_endpoint
from ownloop.recorder.suites import Suite
from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.events import (
    RunEnded,
    RunStarted,
    SessionEnded,
    SessionStarted,
    Task,
    Versions,
    now,
)
from ownloop.store.ids import new_id
from ownloop.store.queries import run_sessions
from ownloop.store.scrub import scrub_text

__all__ = ["RecordOptions", "RunSummary", "record", "redact_argv", "FINAL_STATUSES"]

# A task whose latest session ended with one of these is done; the rest are re-run on resume.
FINAL_STATUSES = frozenset(
    {"finished", "call_user", "fail", "max_steps", "timeout", "parse_error", "no_action", "error"})
_RETRIED = frozenset({"error", "parse_error"})
_SECRET_FLAGS = ("--api-key",)


class RecordOptions(NamedTuple):
    agent: str
    endpoint: str
    model: str
    api_key: str | None = None
    agent_options: dict[str, Any] = {}
    run_id: str | None = None
    workers: int = 2
    limits: EpisodeLimits = EpisodeLimits()
    error_retries: int | None = None  # None: the agent's default
    settle_s: float = 1.0
    chromium: str | None = None
    call_retries: int = 3
    call_retry_wait_s: float = 5.0
    call_timeout_s: float = 120.0
    argv: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()  # --allow-host: host globs the model may navigate to


class RunSummary(NamedTuple):
    run_id: str
    results: list[EpisodeResult]
    skipped: int
    crashed: int
    seconds: float
    interrupted: bool

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


def _git_commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
            timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


class _Previous(NamedTuple):
    latest: dict[str, str | None]  # task id -> status of its latest session (None: no end)
    open_sessions: list[str]  # sessions without an end
    attempts: dict[str, int]


def _previous(store: Store, run_id: str) -> _Previous:
    """For a resumed run: each task's latest status, sessions without an end, attempts per task.

    Replays of a run's sessions (``ownloop replay --execute``) share its run id but are not its
    attempts: they are left out.
    """
    latest: dict[str, str | None] = {}
    open_sessions: list[str] = []
    attempts: dict[str, int] = {}
    for session in run_sessions(store, run_id):
        latest[session.task_id] = session.status
        attempts[session.task_id] = max(attempts.get(session.task_id, 0), int(session.attempt or 0))
        if session.status is None:
            open_sessions.append(session.session_id)
    return _Previous(latest, open_sessions, attempts)


class _Worker(threading.Thread):
    """Owns one Playwright driver and browser (they are bound to the thread that made them)."""

    def __init__(self, runner: _Runner, number: int) -> None:
        super().__init__(name=f"ownloop-worker-{number}", daemon=True)
        self.runner = runner
        self.browser_info: dict[str, str] = {}

    def run(self) -> None:
        runner = self.runner
        handle = None
        try:
            handle = open_browser(runner.options.chromium)
            runner.browser_versions = browser_versions(handle.browser)
            runner.ready.release()
            runner.go.wait()
            while not runner.stop.is_set():
                try:
                    task, attempt = runner.queue.get_nowait()
                except queue.Empty:
                    return
                if not handle.browser.is_connected():  # it crashed: the next task gets a new one
                    handle.close()
                    handle = open_browser(runner.options.chromium)
                result = runner.run_one(handle, task, attempt)
                runner.report(result)
                retries = runner.retries_left.get(task.task_id, 0)
                if result.status in _RETRIED and retries > 0 and not runner.stop.is_set():
                    runner.retries_left[task.task_id] = retries - 1
                    runner.queue.put((task, attempt + 1))
        except Exception as exc:  # noqa: BLE001 - a worker that cannot start a browser says why
            runner.fatal.append(str(exc) if isinstance(exc, OwnloopError)
                                else f"{type(exc).__name__}: {exc}")
            runner.stop.set()
            runner.ready.release()
        finally:
            if handle is not None:
                handle.close()


class _Runner:
    def __init__(self, store: Store, suite: Suite, agent: Agent, options: RecordOptions,
                 run_id: str, on_result: Callable[[EpisodeResult], None]) -> None:
        self.store, self.suite, self.agent, self.options = store, suite, agent, options
        self.run_id = run_id
        self.on_result = on_result
        self.stop = threading.Event()
        self.go = threading.Event()  # set once RunStarted is written
        self.ready = threading.Semaphore(0)  # released by each worker once its browser is up
        self.queue: queue.Queue[tuple[Task, int]] = queue.Queue()
        self.retries_left: dict[str, int] = {}
        self.results: list[EpisodeResult] = []
        self.fatal: list[str] = []
        self.in_flight: dict[str, str] = {}  # session id -> task id, until reported
        self.browser_versions: dict[str, str] = {}
        self._lock = threading.Lock()
        self.client = ModelClient(
            options.endpoint, options.model, load_blob=store.get_blob, put_blob=store.put_blob,
            api_key=options.api_key,
            timeout_s=options.call_timeout_s, retries=options.call_retries,
            retry_wait_s=options.call_retry_wait_s)

    def run_one(self, handle: Any, task: Task, attempt: int) -> EpisodeResult:
        settings = self.agent.settings
        session = BrowserSession(handle.browser, settings.viewport, settle_s=self.options.settle_s,
                                 allow_hosts=self.options.allow_hosts)
        try:
            started = SessionStarted(
                at=now(), run_id=self.run_id, session_id=new_id(), task=task,
                agent=self.agent.name, model=self.options.model, attempt=attempt,
                viewport=settings.viewport)
            with self._lock:
                self.in_flight[started.session_id] = task.task_id
            return run_episode(
                store=self.store, agent=self.agent, client=self.client, browser=session,
                suite=self.suite, started=started, limits=self.options.limits, stop=self.stop,
                grader_spec=task.grader or self.suite.default_grader)
        finally:
            session.close()

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
) -> RunSummary:
    """Record ``options.agent`` on every task of ``suite`` not yet done in the run."""
    agent = make_agent(options.agent, **options.agent_options)
    run_id = options.run_id or f"{agent.name}-{new_id(10)}"
    begun = time.monotonic()
    tasks = suite.tasks()
    if not tasks:
        raise OwnloopError("the suite has no tasks. Check --suite PATTERN or the --tasks file")
    latest, open_sessions, attempts = _previous(store, run_id)
    todo = [t for t in tasks if latest.get(t.task_id) not in FINAL_STATUSES]
    skipped = len(tasks) - len(todo)
    if not todo and not open_sessions:
        return RunSummary(run_id, [], skipped, 0, 0.0, False)

    with store.stream() as run_stream:
        crashed = [SessionEnded(at=now(), run_id=run_id, session_id=session_id, status="crashed",
                                error="no end recorded: the recorder stopped mid-session")
                   for session_id in open_sessions]
        runner = _Runner(store, suite, agent, options, run_id, on_result)
        retries = agent.settings.error_retries if options.error_retries is None \
            else options.error_retries
        for task in todo:
            runner.queue.put((task, attempts.get(task.task_id, 0) + 1))
            runner.retries_left[task.task_id] = retries
        workers = [_Worker(runner, n) for n in range(max(1, min(options.workers, len(todo))))]
        for worker in workers:
            worker.start()
        for _ in workers:
            runner.ready.acquire()
        if runner.fatal:
            runner.stop.set()
            runner.go.set()
            raise OwnloopError(runner.fatal[0])
        started = RunStarted(
            at=now(), run_id=run_id, argv=redact_argv(options.argv), agent=agent.name,
            agent_settings=agent.options(), model=options.model,
            endpoint=public_endpoint(options.endpoint), sampling=agent.settings.sampling,
            viewport=agent.settings.viewport, suite=suite.name, tasks_sha256=suite.tasks_sha256,
            prompt_source=agent.prompt_source,
            versions=_versions(runner.browser_versions.get("chromium", "")))
        run_stream.append([started, *crashed])
        on_start(run_id, len(todo), skipped)
        runner.go.set()
        interrupted = False
        try:
            for worker in workers:
                while worker.is_alive():
                    worker.join(0.2)
        except KeyboardInterrupt:
            interrupted = True
            runner.stop.set()
            for worker in workers:
                worker.join(30)
            # A session whose worker did not get to write its end (it was still stopping, or
            # its browser went down with the same Ctrl-C) ends here, so none is left open.
            unended = [SessionEnded(at=now(), run_id=run_id, session_id=session_id,
                                    status="interrupted", error="interrupted (Ctrl-C)")
                       for session_id in list(runner.in_flight)
                       if not _has_ended(store, session_id)]
            run_stream.append(unended)
            runner.results.extend(
                EpisodeResult(e.session_id, runner.in_flight[e.session_id], "interrupted", None,
                              0, 0.0, None, None, e.error) for e in unended)
        summary = RunSummary(run_id, runner.results, skipped, len(crashed),
                             round(time.monotonic() - begun, 3), interrupted)
        counts = summary.counts()
        if crashed:
            counts["crashed"] = counts.get("crashed", 0) + len(crashed)
        run_stream.append([RunEnded(at=now(), run_id=run_id, counts=counts,
                                    seconds=summary.seconds)])
    store.sync()
    if runner.fatal and not runner.results:
        raise OwnloopError(runner.fatal[0])
    return summary


def _has_ended(store: Store, session_id: str) -> bool:
    """Whether the session's own stream already holds its end (written, not yet reported)."""
    return any(isinstance(event, SessionEnded) for event in store.read_stream(session_id))


def _versions(chromium: str) -> Versions:
    try:
        from importlib.metadata import version

        playwright_version = version("playwright")
    except Exception:  # noqa: BLE001 - metadata may be missing in odd installs
        playwright_version = ""
    return Versions(
        ownloop=__version__, git_commit=_git_commit(), python=sys.version.split()[0],
        playwright=playwright_version, chromium=chromium,
        os=platform.platform())
