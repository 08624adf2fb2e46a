"""The runner: tasks × worker threads, each with its own browser; resume; error retries.

A run is named by ``--run`` (or a generated name). Running the same command again with the same
run resumes it, and several recorders may run it at once: each task is claimed before its session
starts (:mod:`ownloop.store.claims`), a task whose session ended with a final outcome (every
status but error, endpoint_error, interrupted and crashed) is done and skipped, the others run as
a new attempt, and sessions a killed recorder left without an end are first marked ``crashed``.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ownloop.agents import make_agent, world_agent_options
from ownloop.agents.base import Agent
from ownloop.errors import OwnloopError
from ownloop.recorder.admission import (
    SourceState,
    admit,
    check_clean,
    check_graders,
    check_suite,
    declare,
    source_state,
)
from ownloop.recorder.episode import EpisodeResult
from ownloop.recorder.model import ModelClient
from ownloop.recorder.probe import EndpointUnusable
from ownloop.recorder.run_options import Executor, RecordOptions, RunSummary, RunWork, redact_argv
from ownloop.recorder.task_recorder import SCORED, count_session, crash_end
from ownloop.recorder.threads import run_on_threads
from ownloop.store import Store
from ownloop.store.claims import Claims, lease_seconds
from ownloop.store.compactor import BackgroundCompaction
from ownloop.store.events import (
    Event,
    RunEnded,
    Task,
    Versions,
    now,
)
from ownloop.store.ids import new_id
from ownloop.store.ledger import ledger_sessions
from ownloop.version import __version__
from ownloop.world.suites import Suite

__all__ = ["RecordOptions", "RunSummary", "check_world", "record", "redact_argv"]


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
    for session in ledger_sessions(store, run_id) if store.has_streams() else ():
        task_id, repeat, session_id = session.task_id, session.repeat, session.session_id
        attempts[task_id] = max(attempts.get(task_id, 0), session.attempt)
        repeat_attempts[task_id, repeat] = max(
            repeat_attempts.get((task_id, repeat), 0), session.attempt
        )
        live = claims.in_flight(task_id, repeat) == session_id
        if session.status is None:
            ended = None if live else crash_end(store, claims, run_id, session_id)
            if ended is not None:
                events.append(ended)
                crashed += 1
        elif session.status in SCORED and session.counted is None and not live:
            events.append(count_session(claims, run_id, task_id, repeat, session_id))
        elif session.counted and claims.winner(task_id, repeat) is None:
            claims.finish(task_id, repeat, session_id)  # the marker was lost: the journal rules
    return _Standing(events, crashed, attempts, repeat_attempts)


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
    options, agent = _agent_for(options)
    run_id = options.run_id or f"{agent.name}-{new_id(10)}"
    begun = time.monotonic()
    source = source_state()
    if options.require_clean:
        check_clean(source)
    if options.expect_suite:
        check_suite(suite, options.expect_suite)
    _check_endpoints(store, options, on_notice)
    tasks = suite.tasks()[: options.limit]
    if not tasks:
        raise OwnloopError("the suite has no tasks. Check --suite PATTERN or the --tasks file")
    check_world(tasks, agent, options.desktops)
    check_graders(tasks, suite.default_grader)
    started = declare(run_id, options, agent, suite, tasks, _versions(source))
    claims = Claims(store.root, run_id, lease_s=lease_seconds(options.limits.timeout_s))
    # Each session that ends has its screenshots compacted in a low-priority child process
    # (ownloop.store.compactor); the run's end waits a little for it, then hands it off.
    compaction = (
        None if options.keep_png else BackgroundCompaction(store.root, options.compact_wait_s)
    )
    if compaction is not None:
        on_result = _then_compact(on_result, compaction)
        # The sessions' blobs go to one pack, not a file each (ownloop.store.packs); the
        # compaction writes them out as files once the run has closed it.
        store.blobs.start_packing()
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
            work = RunWork(
                store,
                suite,
                agent,
                options,
                run_id,
                [(unit.task, unit.repeat) for unit in todo],
                skipped,
                standing.crashed,
                standing.repeat_attempts,
                claims,
                run_stream,
                begun,
                on_start,
                on_result,
                on_step,
            )
            summary = _executor(options)(work)
            run_stream.append([_run_ended(summary)])
    except BaseException:
        store.blobs.close_pack()
        if compaction is not None:
            compaction.finish(0.0)  # what it was given goes on; nothing is waited for
        raise
    finally:
        store.blobs.close_pack()  # before the compaction's end: it writes out what is left
        claims.close()
    # The index is not brought up to date here: its readers do that when they ask (ownloop sql,
    # the closing score line), so a run on a node, or a library caller that only records, pays
    # nothing for it.
    if compaction is not None:
        for result in summary.results:
            compaction.add(result.session_id)  # those ended at a Ctrl-C too
        # (after a Ctrl-C the user wants out: handed off at once)
        ended = compaction.finish(0.0 if summary.interrupted else None)
        summary = summary._replace(compaction=ended)
    if summary.fatal and not summary.results:
        raise OwnloopError(summary.fatal)
    return summary


def _agent_for(options: RecordOptions) -> tuple[RecordOptions, Agent]:
    """The run's agent, made once, and the options with its world's defaults filled in."""
    if options.repeats < 1:
        raise OwnloopError(f"--repeat must be 1 or more, not {options.repeats}")
    if options.executor == "ray":  # before anything is written: a missing extra says so
        from ownloop.recorder.ray_executor import require_ray

        require_ray()
    # On a desktop (check_world refuses --desktop without desktop tasks) the agent runs its
    # released OSWorld loop's defaults; the options the Ray actors get say the same.
    world = "desktop" if options.desktops else "browser"
    options = options._replace(
        agent_options=world_agent_options(options.agent, world, options.agent_options)
    )
    return options, make_agent(options.agent, released=options.released, **options.agent_options)


def _check_endpoints(
    store: Store, options: RecordOptions, on_notice: Callable[[str], None]
) -> None:
    """Every endpoint is checked before anything is written and before a browser starts
    (MiniWoB's prompts are read in one): a dead endpoint is one line in a second, not every
    task's retries. In a pool, the run goes on while one endpoint answers: the others are named,
    and the pool benches them when their sessions fail."""
    unusable: list[EndpointUnusable] = []
    pool = list(dict.fromkeys(options.endpoints or (options.endpoint,)))
    for endpoint in pool:
        try:
            with ModelClient(
                endpoint,
                options.model,
                load_blob=store.get_blob,
                api_key=options.api_key,
                timeout_s=options.call_timeout_s,
            ) as client:
                client.check()
        except EndpointUnusable as exc:
            unusable.append(exc)
    if len(unusable) == len(pool):
        raise unusable[0]
    for refusal in unusable:
        on_notice(f"notice: {refusal}; the run goes on with the other endpoints")


def _executor(options: RecordOptions) -> Executor:
    """The threads, or Ray's actors (imported only then: Ray is an optional extra)."""
    if options.executor == "ray":
        from ownloop.recorder.ray_executor import run_on_ray

        return run_on_ray
    return run_on_threads


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


def _run_ended(summary: RunSummary) -> RunEnded:
    """The run's end as this recorder saw it: its sessions' statuses, and those it crashed."""
    counts = summary.counts()
    if summary.crashed:
        counts["crashed"] = counts.get("crashed", 0) + summary.crashed
    return RunEnded(at=now(), run_id=summary.run_id, counts=counts, seconds=summary.seconds)


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
