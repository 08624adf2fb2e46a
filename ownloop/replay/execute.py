"""Re-execute a recorded session in a fresh browser, recorded as a new session linked to it.

Modes (``SessionStarted.replay_mode``):

- ``ops``: each step's recorded browser operations, exactly, in order;
- ``actions``: each step's recorded (accepted) actions, translated by today's agent code with the
  recorded agent options and any ``-o`` overrides — a translation change changes what runs;
- ``responses``: the agent loop itself, with a cassette that serves the recorded responses in
  place of the model (no network);
- ``fork``: like ``responses`` for the steps before ``fork_step``, then the live model.

``ops`` and ``actions`` replays are guarded (:mod:`ownloop.replay.guard`): each step's
screenshot and each pointer operation's element are checked against the parent before acting, and
``on_diverge`` (stop, retarget, fork, ignore) says what a changed element does.

The task is set up as recorded (same Task, same seed; see :mod:`ownloop.replay.reopen`), or on
another seed of a MiniWoB task (``seed``) or another deployment of a tasks file (``base``); each
step's events are written as the recorder writes them, then the end-state evidence, the end and
the grade of the task's grader. A ``FidelityMeasured`` event per step compares it with the parent
(a fork's live steps are not compared); they are measured on a background thread while the replay
goes on and written, in a stream of their own, once it ended. The child joins the parent's run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from ownloop.agents.base import Agent
from ownloop.agents.options import parse_overrides
from ownloop.errors import OwnloopError
from ownloop.recorder.call import ModelCaller
from ownloop.recorder.episode import EpisodeLimits, EpisodeResult, EpisodeSetup, run_episode
from ownloop.recorder.model import ModelClient
from ownloop.replay.cassette import Cassette, CassetteClient
from ownloop.replay.fold import Session, fold
from ownloop.replay.guard import ON_DIVERGE, Guard
from ownloop.replay.options import ReplayOptions
from ownloop.replay.players import Fidelity, play_recorded
from ownloop.replay.progress import StepProgress
from ownloop.replay.reopen import reopen_suite
from ownloop.replay.runs import child_run, end_run, ensure_run, recorded_agent
from ownloop.store import Store
from ownloop.store.events import (
    Event,
    GuardChecked,
    SessionStarted,
    now,
)
from ownloop.store.ids import new_id
from ownloop.world import World
from ownloop.world.browser import Browser, BrowserSession
from ownloop.world.browser_world import BrowserWorld
from ownloop.world.chromium import open_browser
from ownloop.world.pool import DesktopTarget

__all__ = [
    "MODES",
    "Plan",
    "ReplayError",
    "Replayed",
    "execute_session",
    "plan_replay",
    "replay_session",
    "run_planned",
]

MODES = ("ops", "actions", "responses")
_DEFAULTS = ReplayOptions()


class ReplayError(OwnloopError):
    pass


class Replayed(NamedTuple):
    """A finished re-execution: the parent, the child, the child's episode result and, for a
    guarded replay, its checks."""

    parent: Session
    child: Session
    result: EpisodeResult
    checks: tuple[GuardChecked, ...] = ()


# ---------------------------------------------------------------- one re-execution


class Plan(NamedTuple):
    """How to re-execute one parent (``plan_replay``): what ``run_planned`` needs."""

    mode: str
    fork_at: int | None
    agent: Agent
    client: ModelCaller | None
    model: str
    settle_s: float
    chromium: str | None
    run_id: str
    on_step: Callable[[int], None] | None = None
    on_diverge: str = "ignore"
    seed: int | None = None
    base: str | None = None
    desktop: DesktopTarget | None = None  # a desktop session's desktop (replay --desktop URL)
    audit: str = ""  # the audit the replay is for (SessionStarted.audit): blind, noop


def _run(store: Store, parent: Session, plan: Plan, stop: threading.Event) -> EpisodeResult:
    """On the calling thread (Playwright objects stay on the thread that made them), in a
    Chromium of its own (none for a desktop session)."""
    if plan.desktop is not None:
        return run_planned(None, store, parent, plan, stop)
    launched = open_browser(plan.chromium)
    try:
        return run_planned(launched.browser, store, parent, plan, stop)
    finally:
        launched.close()


def run_planned(
    chromium: Browser | None,
    store: Store,
    parent: Session,
    plan: Plan,
    stop: threading.Event,
) -> EpisodeResult:
    """Re-execute ``parent`` as ``plan`` says in a fresh context of ``chromium`` (a browser this
    thread launched, which may serve other sessions before and after), on the calling thread."""
    assert parent.task is not None
    viewport = plan.agent.settings.viewport
    with reopen_suite(parent.task, seed=plan.seed, base=plan.base, browser=chromium) as reopened:
        browser: World
        page: BrowserSession | None = None
        if plan.desktop is not None or chromium is None:
            assert plan.desktop is not None
            browser = plan.desktop.world(settle_s=plan.settle_s)
        else:
            page = BrowserSession(chromium, viewport, settle_s=plan.settle_s)
            browser = BrowserWorld(page)
        try:
            started = SessionStarted(
                at=now(),
                run_id=plan.run_id,
                session_id=new_id(),
                task=reopened.task,
                agent=plan.agent.name,
                model=plan.model,
                attempt=parent.attempt,
                viewport=plan.agent.settings.viewport,
                parent_session_id=parent.session_id,
                replay_mode=plan.mode,
                fork_step=plan.fork_at,
                chromium=chromium.version if chromium is not None else "",
                audit=plan.audit,
            )
            replaying = plan.mode in ("ops", "actions")
            max_steps = len(parent.steps) if replaying else plan.agent.settings.max_steps
            if replaying and plan.on_diverge == "fork":
                max_steps = max(max_steps, plan.agent.settings.max_steps)
            fidelity = Fidelity(store, parent, plan.fork_at, reopened.rebase_url)
            # A desktop has no elements to check: its ops replay unguarded.
            guard = (
                Guard(parent.session_id, plan.on_diverge, store.blobs.get_stored, page)
                if page is not None
                else None
            )

            def on_step(number: int, batch: list[Event]) -> None:
                fidelity(number, batch)
                if plan.on_step is not None:
                    plan.on_step(number)

            client = plan.client or CassetteClient(Cassette([]))
            if isinstance(client, CassetteClient):  # the prompt names the task's start URL
                client = client.moved(parent.task.start_url, reopened.task.start_url)
            setup = EpisodeSetup(
                store,
                plan.agent,
                client,
                browser,
                reopened.suite,
                EpisodeLimits(max(1, max_steps), parent.task.timeout_s or 1800.0),
                stop,
                parent.task.grader or reopened.suite.default_grader,
            )
            result = run_episode(
                setup,
                started,
                play=play_recorded(parent, plan.mode, guard, fidelity) if replaying else None,
                on_step=on_step,
            )
            measured = fidelity.events()
            if measured:  # the child's own facts, in a stream of their own
                with store.stream() as stream:
                    stream.append(measured)
            return result
        finally:
            browser.close()


def _in_thread(work: Callable[[threading.Event], EpisodeResult]) -> EpisodeResult:
    """Run ``work`` on its own thread (a caller may already drive Playwright on this one);
    Ctrl-C stops it at the next operation, and the session ends ``interrupted``."""
    stop = threading.Event()
    results: list[EpisodeResult] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work(stop))
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="ownloop-replay", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except KeyboardInterrupt:
        stop.set()
        thread.join(60)
    if errors:
        raise errors[0]
    if not results:
        raise ReplayError("the replay was interrupted before it started")
    return results[0]


def execute_session(
    store: Store,
    parent: Session,
    mode: str,
    options: ReplayOptions = _DEFAULTS,
    *,
    on_step: Callable[[int], None] | None = None,
    runner: Callable[[Store, Session, Plan], EpisodeResult] | None = None,
) -> Replayed:
    """Re-execute ``parent`` in a fresh browser as a new session (see the module docstring).

    Args:
        store: the store holding ``parent``; the child is written to it.
        parent: the folded session to replay.
        mode: ``ops``, ``actions``, ``responses`` or ``fork``.
        options: how (``ReplayOptions``: the live model, the agent options, the guard...).
        on_step: called with each step's number once its events are appended.
        runner: runs the planned replay (``SerialReplays``: in a Chromium kept for many); by
            default in a Chromium of its own, on a thread of its own.

    Raises:
        ReplayError: the session cannot be re-executed so (a one-line reason and the fix).
    """
    plan = plan_replay(store, parent, mode, options, on_step=on_step)
    assert parent.task is not None
    new_run = ensure_run(
        store, plan.run_id, plan.agent, plan.model, options.endpoint, parent.task.suite
    )
    if runner is not None:
        result = runner(store, parent, plan)
    else:
        result = _in_thread(lambda stop: _run(store, parent, plan, stop))
    if new_run:
        end_run(store, plan.run_id, [result])
    store.sync()
    events = list(store.session_events(result.session_id))
    return Replayed(
        parent,
        fold(events),
        result,
        tuple(event for event in events if isinstance(event, GuardChecked)),
    )


def plan_replay(
    store: Store,
    parent: Session,
    mode: str,
    options: ReplayOptions = _DEFAULTS,
    *,
    on_step: Callable[[int], None] | None = None,
    recorded: dict[str, Any] | None = None,
    into_run: str | None = None,
) -> Plan:
    """Check that ``parent`` can be re-executed so and say how (``execute_session``'s
    arguments); nothing is written and no browser starts. A caller planning many parents passes
    what it looked up once for all: ``recorded``, the agent settings the parent's run recorded
    (``recorded_settings``), and ``into_run``, the child's run (``child_run``).

    Raises:
        ReplayError: the session cannot be re-executed so (a one-line reason and the fix).
    """
    if parent.task is None:
        raise ReplayError(
            f"session {parent.session_id} has no recorded start (no Task): it cannot be re-executed"
        )
    if mode not in (*MODES, "fork"):
        raise ReplayError(f"unknown replay mode {mode!r}. Use one of: ops, actions, responses")
    seed, base, desktop, fork_at = options.seed, options.base, options.desktop, options.fork_at
    # retarget is the default only where a guard works: ops and actions (a responses replay
    # asks its model again on the other world, there is no recorded point to re-find)
    moved = (seed is not None or base) and mode in ("ops", "actions")
    guarded = options.on_diverge or ("retarget" if moved else "ignore")
    _check_world(parent, mode, guarded, seed, base)
    if (parent.task.world == "desktop") != (desktop is not None):
        raise ReplayError(
            f"session {parent.session_id} ran on a desktop: pass --desktop URL to re-execute it"
            if desktop is None
            else "--desktop re-executes desktop sessions; this one ran in the browser"
        )
    if desktop is not None and guarded != "ignore":
        raise ReplayError("a desktop session replays unguarded: leave --on-diverge out")
    overrides = parse_overrides(options.agent_options)
    agent = recorded_agent(store, parent, overrides, options.released, recorded)
    forking = mode in ("ops", "actions") and guarded == "fork"
    live = _live_client(store, mode, options, forking)
    if mode == "fork":
        last = max((step.step for step in parent.steps), default=0)
        if fork_at is None or not 1 <= fork_at <= last:
            raise ReplayError(f"--fork-at must be a step of the session, 1 to {last}")
    client: ModelCaller | None = None
    if mode in ("responses", "fork"):
        client = CassetteClient(
            Cassette([parent]),
            on_miss=options.on_miss,
            live=live,
            live_from_step=fork_at if mode == "fork" else None,
        )
    if forking:
        client = live
    return Plan(
        mode,
        fork_at if mode == "fork" else None,
        agent,
        client,
        options.model if (mode == "fork" or forking) and options.model else parent.model,
        options.settle_s,
        options.chromium,
        into_run or child_run(store, options.run_id or parent.run_id),
        on_step,
        guarded,
        seed,
        base,
        desktop,
        options.audit,
    )


def _live_client(
    store: Store, mode: str, options: ReplayOptions, forking: bool
) -> ModelClient | None:
    """The live model a fork, a forwarded cassette miss or a forking guard asks; None when the
    replay asks none."""
    if not (mode == "fork" or options.on_miss == "forward" or forking):
        return None
    if not options.endpoint or not options.model:
        need = (
            "--fork-at"
            if mode == "fork"
            else "--on-diverge fork"
            if forking
            else "--on-miss forward"
        )
        raise ReplayError(f"{need} needs the live model: pass --endpoint URL and --model NAME")
    return ModelClient(
        options.endpoint,
        options.model,
        load_blob=store.get_blob,
        put_blob=store.put_blob,
        api_key=options.api_key,
    )


def _check_world(
    parent: Session, mode: str, on_diverge: str, seed: int | None, base: str | None
) -> None:
    assert parent.task is not None
    if on_diverge not in ON_DIVERGE:
        raise ReplayError(
            f"unknown --on-diverge {on_diverge!r}. Use one of: {', '.join(ON_DIVERGE)}"
        )
    if on_diverge != "ignore" and mode not in ("ops", "actions"):
        raise ReplayError(
            f"--on-diverge {on_diverge} guards --execute ops or actions replays, not {mode}"
        )
    miniwob = parent.task.suite == "miniwob"
    if seed is not None and not miniwob:
        raise ReplayError(
            f"--seed replays a MiniWoB session on another seed; session "
            f"{parent.session_id} is from {parent.task.suite or 'a tasks file'}: "
            "use --base URL for another deployment"
        )
    if base and (miniwob or not parent.task.start_url.startswith(("http://", "https://"))):
        raise ReplayError(
            f"--base replays a tasks-file session against another deployment; "
            f"session {parent.session_id} is from {parent.task.suite}: "
            "use --seed S for a MiniWoB session"
        )


def replay_session(
    store: Store, session: Session, execute: str | None, options: ReplayOptions
) -> Replayed:
    """``ownloop replay TARGET --execute MODE`` / ``--fork-at K``: re-execute with progress on
    stderr (``ownloop.replay.summary.summary_text`` says how it went).

    Raises:
        ReplayError: the options do not fit together, or the session cannot be re-executed.
    """
    fork_at = options.fork_at
    if fork_at is not None and execute not in (None, "responses"):
        raise ReplayError(
            "--fork-at replays recorded responses before step K; "
            f"it cannot be combined with --execute {execute}"
        )
    mode = "fork" if fork_at is not None else str(execute)
    # Progress on stderr (stdout keeps the summary): the parent's step count is the budget.
    with StepProgress(
        f"replay {session.session_id}", "step", len(session.steps) or None
    ) as progress:
        return execute_session(store, session, mode, options, on_step=progress.advance)
