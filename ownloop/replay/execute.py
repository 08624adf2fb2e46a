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
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import msgspec

from ownloop.agents.base import Agent, Parsed, PastStep
from ownloop.agents.options import parse_overrides
from ownloop.agents.released import released_commit, released_sha256
from ownloop.recorder.call import ModelCaller
from ownloop.recorder.episode import (
    Episode,
    EpisodeLimits,
    EpisodeResult,
    Play,
    run_episode,
)
from ownloop.recorder.model import ModelClient, public_endpoint
from ownloop.replay.cassette import Cassette, CassetteClient
from ownloop.replay.fidelity import RUNGS, measure_step
from ownloop.replay.fold import Session, Step, fold
from ownloop.replay.guard import ON_DIVERGE, Guard, Verdict
from ownloop.replay.progress import StepProgress
from ownloop.replay.reopen import reopen_suite
from ownloop.replay.reparse import agent_for, recorded_settings
from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.events import (
    Event,
    FidelityMeasured,
    GuardChecked,
    MouseMove,
    Op,
    RunEnded,
    RunStarted,
    SessionEnded,
    SessionStarted,
    now,
)
from ownloop.store.ids import new_id
from ownloop.store.queries import has_run_started, sql_command
from ownloop.store.seal import refuse_if_sealed, sealed_fingerprint
from ownloop.world import World
from ownloop.world.browser import Browser, BrowserSession, open_browser
from ownloop.world.browser_world import BrowserWorld
from ownloop.world.pool import DesktopTarget

__all__ = [
    "MODES",
    "Identical",
    "Plan",
    "ReplayError",
    "Replayed",
    "child_run",
    "end_run",
    "ensure_run",
    "execute_session",
    "option_arguments",
    "plan_replay",
    "replay_from_options",
    "run_planned",
    "steps_identical",
    "summary_text",
]

MODES = ("ops", "actions", "responses")


class ReplayError(OwnloopError):
    pass


class Replayed(NamedTuple):
    """A finished re-execution: the parent, the child, the child's episode result and, for a
    guarded replay, its checks."""

    parent: Session
    child: Session
    result: EpisodeResult
    checks: tuple[GuardChecked, ...] = ()


def _agent(
    store: Store,
    session: Session,
    overrides: dict[str, Any],
    released: str | None = None,
    recorded: dict[str, Any] | None = None,
) -> Agent:
    """Today's agent code with the options the parent's run recorded (``recorded`` when the
    caller looked them up already), then ``overrides``."""
    if recorded is None:
        recorded = recorded_settings(store, [session]).get(session.session_id, {})
    return agent_for(session.agent or "uitars", recorded, overrides, released)


# ---------------------------------------------------------------- the players


def _parent_end(episode: Episode, parent: Session, steps: int) -> SessionEnded:
    """The end of an ops/actions replay that ran out of recorded steps: the parent's end."""
    outcome = parent.outcome
    if outcome is None:
        return episode.end("error", steps, error="the replayed session has no recorded end")
    return episode.end(
        outcome.status,
        steps,
        agent_status=outcome.agent_status,
        answer=outcome.answer,
        error=outcome.error,
    )


def _recorded_parse(step: Step) -> Parsed:
    parse = step.parsed
    if parse is None or parse.error is not None:
        return Parsed()
    return Parsed(thought=parse.thought, actions=parse.actions, model_size=parse.model_size)


def _play_recorded(parent: Session, mode: str, guard: Guard | None, fidelity: _Fidelity) -> Play:
    """A step that re-executes the parent's ops (``ops``) or re-translates its actions, each
    pointer operation checked by ``guard`` first; after a fork, the live model's step."""
    steps = {step.step: step for step in parent.steps}
    last = max(steps, default=0)
    forked: list[int] = []

    def play(episode: Episode, number: int, batch: list[Event]) -> SessionEnded | None:
        if forked:
            return episode.agent_step(number, batch)
        recorded = steps.get(number)
        if recorded is None:
            return _parent_end(episode, parent, number - 1)
        # No prompt is built from a replayed step unless the replay may fork to the live model.
        titled = guard is None or guard.on_diverge == "fork"
        observation = episode.observe(number, batch, title=titled)
        if guard is not None:
            guard.check_screenshot(
                episode.ids(), number, recorded, observation.screenshot.sha256, batch
            )
        elements = {effect.idx: effect.element for effect in recorded.effects}

        def run(index: int, action_idx: int, op: Op) -> Verdict:
            verdict = (
                Verdict(op, "act")
                if guard is None
                else guard.check_op(
                    episode.browser, episode.ids(), number, index, op, elements.get(index), batch
                )
            )
            if verdict.then == "act":
                episode.act(number, index, action_idx, verdict.op, batch)
            return verdict

        verdict, index = Verdict(MouseMove(x=0, y=0), "act"), 0
        if mode == "ops":
            parsed = _recorded_parse(recorded)
            for effect in recorded.effects:
                index = effect.idx
                verdict = run(effect.idx, effect.action_idx, effect.op)
                if verdict.then != "act":
                    break
        else:
            parse = recorded.parsed
            if parse is None or parse.error is not None:  # the parent had no actions here
                return _parent_end(episode, parent, number)
            batch.append(msgspec.structs.replace(parse, at=now(), **episode.ids()))
            parsed = _recorded_parse(recorded)
            for action_idx, action in enumerate(parsed.actions):
                for op in episode.world.translate(episode.agent, action):
                    verdict = run(index, action_idx, op)
                    if verdict.then != "act":
                        break
                    index += 1
                if verdict.then != "act":
                    break
        if verdict.then == "stop":
            return episode.end(
                "error",
                number,
                error=f"stopped at step {number}, operation "
                f"{index}: {verdict.reason} (--on-diverge stop)",
            )
        if verdict.then == "fork":  # this step and the rest are the live model's
            forked.append(number)
            fidelity.fork_at = number + 1
            return episode.answer(number, observation, batch)
        ending = episode.agent.ending(parsed, episode.history) if mode == "actions" else None
        episode.history.append(PastStep(observation, recorded.response or "", parsed))
        if ending is not None:
            return episode.end(
                ending.status, number, agent_status=ending.agent_status, answer=ending.answer
            )
        if number >= last:
            return _parent_end(episode, parent, number)
        # The recording tells whether this step started a download: only then is the grace for
        # one waited out, so a replayed click costs its own time.
        episode.settle(batch, download_grace=any(e.download for e in recorded.effects))
        return None

    return play


class _Fidelity:
    """Measures each replayed step against the parent on a background thread, so decoding and
    comparing screenshots never slows the replay down; ``events()`` waits for them all."""

    def __init__(
        self, store: Store, parent: Session, fork_at: int | None, rebase_url: Callable[[str], str]
    ) -> None:
        self.store, self.parent, self.fork_at, self.rebase_url = store, parent, fork_at, rebase_url
        self.steps: dict[int, Step] = {step.step: step for step in parent.steps}
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="ownloop-fidelity")
        self.pending: list[Future[FidelityMeasured | None]] = []

    def __call__(self, number: int, batch: list[Event]) -> None:
        if self.fork_at is not None and number >= self.fork_at:
            return  # a fork's live steps are new: nothing to compare them with
        self.pending.append(self.pool.submit(self._measure, number, tuple(batch)))

    def _measure(self, number: int, batch: tuple[Event, ...]) -> FidelityMeasured | None:
        try:
            return measure_step(
                number,
                batch,
                self.steps.get(number),
                parent_session_id=self.parent.session_id,
                load_blob=self.store.get_blob,
                rebase_url=self.rebase_url,
            )
        except (OwnloopError, OSError, ValueError):
            return None  # a missing or unreadable parent screenshot: no measurement

    def events(self) -> list[FidelityMeasured]:
        try:
            return [event for future in self.pending if (event := future.result()) is not None]
        finally:
            self.pool.shutdown()


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
        if plan.desktop is not None or chromium is None:
            assert plan.desktop is not None
            browser = plan.desktop.world(settle_s=plan.settle_s)
        else:
            browser = BrowserWorld(BrowserSession(chromium, viewport, settle_s=plan.settle_s))
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
            fidelity = _Fidelity(store, parent, plan.fork_at, reopened.rebase_url)
            # A desktop has no elements to check: its ops replay unguarded.
            guard = (
                Guard(parent.session_id, plan.on_diverge, store.get_blob)
                if plan.desktop is None
                else None
            )

            def on_step(number: int, batch: list[Event]) -> None:
                fidelity(number, batch)
                if plan.on_step is not None:
                    plan.on_step(number)

            client = plan.client or CassetteClient(Cassette([]))
            if isinstance(client, CassetteClient):  # the prompt names the task's start URL
                client = client.moved(parent.task.start_url, reopened.task.start_url)
            result = run_episode(
                store=store,
                agent=plan.agent,
                client=client,
                browser=browser,
                suite=reopened.suite,
                started=started,
                limits=EpisodeLimits(max(1, max_steps), parent.task.timeout_s or 1800.0),
                stop=stop,
                grader_spec=parent.task.grader or reopened.suite.default_grader,
                play=_play_recorded(parent, plan.mode, guard, fidelity) if replaying else None,
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


def child_run(store: Store, run_id: str) -> str:
    """The run a replay is recorded into: ``run_id``, or ``<run_id>.replays`` when that run is
    sealed (a sealed run takes no more events)."""
    if sealed_fingerprint(store, run_id) is None:
        return run_id
    replays = f"{run_id}.replays"
    refuse_if_sealed(store, replays, "replay into another run with --run NAME")
    return replays


def _ensure_run(
    store: Store, run_id: str, agent: Agent, model: str, endpoint: str, suite: str
) -> bool:
    """Write a RunStarted for a run id the store does not know yet; True if it did."""
    if has_run_started(store, run_id):
        return False
    with store.stream() as stream:
        stream.append(
            [
                RunStarted(
                    at=now(),
                    run_id=run_id,
                    argv=("ownloop", "replay"),
                    agent=agent.name,
                    agent_settings=agent.options(),
                    model=model,
                    endpoint=endpoint,
                    sampling=agent.settings.sampling,
                    viewport=agent.settings.viewport,
                    suite=suite,
                    prompt_source=agent.prompt_source,
                    released_commit=released_commit(agent),
                    released_sha256=released_sha256(agent),
                )
            ]
        )
    return True


def execute_session(
    store: Store,
    parent: Session,
    mode: str,
    *,
    fork_at: int | None = None,
    endpoint: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    settle_s: float = 1.0,
    chromium: str | None = None,
    agent_overrides: dict[str, Any] | None = None,
    on_miss: str = "stop",
    run_id: str | None = None,
    released: str | None = None,
    on_step: Callable[[int], None] | None = None,
    on_diverge: str | None = None,
    seed: int | None = None,
    base: str | None = None,
    desktop: DesktopTarget | None = None,
    runner: Callable[[Store, Session, Plan], EpisodeResult] | None = None,
    audit: str = "",
) -> Replayed:
    """Re-execute ``parent`` in a fresh browser as a new session (see the module docstring).

    Args:
        store: the store holding ``parent``; the child is written to it.
        parent: the folded session to replay.
        mode: ``ops``, ``actions``, ``responses`` or ``fork``.
        fork_at: (``fork``) the first step the live model answers.
        endpoint: the live model's base URL (``fork``, or ``on_miss="forward"``).
        model: the live model's name.
        api_key: the live endpoint's key (never recorded).
        settle_s: the pause after each step.
        chromium: a Chromium executable overriding discovery.
        agent_overrides: agent options over the ones the parent's run recorded.
        on_miss: what a cassette miss does: ``stop``, ``forward`` or ``force``.
        run_id: the child's run (default: the parent's).
        released: clones of the model's released code to read its prompt texts from.
        on_step: called with each step's number once its events are appended.
        on_diverge: (``ops``, ``actions``) what a changed element does: ``stop``, ``retarget``,
            ``fork`` (the live model from that step) or ``ignore``; default ``ignore``, or
            ``retarget`` on another seed or base.
        seed: replay a MiniWoB session on this seed of its task.
        base: replay a tasks-file session against this base URL (another deployment).
        desktop: (a desktop session) the desktop to re-execute on, and its reset.
        runner: runs the planned replay (``SerialReplays``: in a Chromium kept for many); by
            default in a Chromium of its own, on a thread of its own.
        audit: the audit the replay is run for (``blind``, ``noop``), recorded with the child.

    Raises:
        ReplayError: the session cannot be re-executed so (a one-line reason and the fix).
    """
    plan = plan_replay(
        store,
        parent,
        mode,
        fork_at=fork_at,
        endpoint=endpoint,
        model=model,
        api_key=api_key,
        settle_s=settle_s,
        chromium=chromium,
        agent_overrides=agent_overrides,
        on_miss=on_miss,
        run_id=run_id,
        released=released,
        on_step=on_step,
        on_diverge=on_diverge,
        seed=seed,
        base=base,
        desktop=desktop,
        audit=audit,
    )
    new_run = ensure_run(store, plan, parent, endpoint)
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
    *,
    fork_at: int | None = None,
    endpoint: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    settle_s: float = 1.0,
    chromium: str | None = None,
    agent_overrides: dict[str, Any] | None = None,
    on_miss: str = "stop",
    run_id: str | None = None,
    released: str | None = None,
    on_step: Callable[[int], None] | None = None,
    on_diverge: str | None = None,
    seed: int | None = None,
    base: str | None = None,
    recorded: dict[str, Any] | None = None,
    into_run: str | None = None,
    desktop: DesktopTarget | None = None,
    audit: str = "",
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
    # retarget is the default only where a guard works: ops and actions (a responses replay
    # asks its model again on the other world, there is no recorded point to re-find)
    moved = (seed is not None or base) and mode in ("ops", "actions")
    guarded = on_diverge or ("retarget" if moved else "ignore")
    _check_world(parent, mode, guarded, seed, base)
    if (parent.task.world == "desktop") != (desktop is not None):
        raise ReplayError(
            f"session {parent.session_id} ran on a desktop: pass --desktop URL to re-execute it"
            if desktop is None
            else "--desktop re-executes desktop sessions; this one ran in the browser"
        )
    if desktop is not None and guarded != "ignore":
        raise ReplayError("a desktop session replays unguarded: leave --on-diverge out")
    agent = _agent(store, parent, agent_overrides or {}, released, recorded)
    live: ModelClient | None = None
    forking = mode in ("ops", "actions") and guarded == "fork"
    if mode == "fork" or on_miss == "forward" or forking:
        if not endpoint or not model:
            need = (
                "--fork-at"
                if mode == "fork"
                else "--on-diverge fork"
                if forking
                else "--on-miss forward"
            )
            raise ReplayError(f"{need} needs the live model: pass --endpoint URL and --model NAME")
        live = ModelClient(
            endpoint, model, load_blob=store.get_blob, put_blob=store.put_blob, api_key=api_key
        )
    if mode == "fork":
        last = max((step.step for step in parent.steps), default=0)
        if fork_at is None or not 1 <= fork_at <= last:
            raise ReplayError(f"--fork-at must be a step of the session, 1 to {last}")
    client: ModelCaller | None = None
    if mode in ("responses", "fork"):
        client = CassetteClient(
            Cassette([parent]),
            on_miss=on_miss,
            live=live,
            live_from_step=fork_at if mode == "fork" else None,
        )
    if forking:
        client = live
    plan = Plan(
        mode,
        fork_at if mode == "fork" else None,
        agent,
        client,
        model if (mode == "fork" or forking) and model else parent.model,
        settle_s,
        chromium,
        into_run or child_run(store, run_id or parent.run_id),
        on_step,
        guarded,
        seed,
        base,
        desktop,
        audit,
    )
    return plan


def ensure_run(store: Store, plan: Plan, parent: Session, endpoint: str | None = None) -> bool:
    """Write a RunStarted for the plan's run when the store does not know it yet (a sealed
    parent run's ``.replays``); True if it did (then ``end_run`` ends it)."""
    assert parent.task is not None
    return _ensure_run(
        store,
        plan.run_id,
        plan.agent,
        plan.model,
        public_endpoint(endpoint) if endpoint else "",
        parent.task.suite,
    )


def end_run(store: Store, run_id: str, results: Sequence[EpisodeResult]) -> None:
    """The RunEnded of a run ``ensure_run`` started: its sessions' statuses and seconds."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    with store.stream() as stream:
        stream.append(
            [
                RunEnded(
                    at=now(),
                    run_id=run_id,
                    counts=counts,
                    seconds=sum(result.seconds for result in results),
                )
            ]
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


# ---------------------------------------------------------------- the summary


def _grade_text(session: Session) -> str:
    grade = session.latest_grade
    verdict = (
        "ungraded"
        if grade is None
        else f"{'pass' if grade.passed else 'fail'} {grade.score:.2f} ({grade.grader})"
    )
    return f"{session.status}, {verdict}"


def _served_text(child: Session) -> str:
    counts: dict[str, int] = {}
    for step in child.steps:
        for call in step.calls:
            how = call.served_by or "live"
            counts[how] = counts.get(how, 0) + 1
    return ", ".join(f"{n} {how}" for how, n in sorted(counts.items()))


def _rungs_text(replayed: Replayed) -> str:
    """A guarded replay's operations by rung, and where it stopped, forked or re-targeted."""
    measured = [step.fidelity for step in replayed.child.steps if step.fidelity is not None]
    counts = {rung: sum(getattr(m, f"{rung}_ops") for m in measured) for rung in RUNGS}
    if not any(m.rung for m in measured) and not replayed.checks:
        return ""
    text = "operations: " + ", ".join(f"{n} {rung}" for rung, n in counts.items())
    failed = [
        c
        for c in replayed.checks
        if c.check == "element" and c.rung != "exact" and c.rung != "same_target"
    ]
    acted = {
        "stop": "stopped",
        "fork": "forked to the live model",
        "retarget": "re-targeted",
        "ignore": "acted at the recorded point",
    }
    for check in failed[:10]:
        how = acted.get(check.on_diverge, check.on_diverge)
        if check.on_diverge == "retarget":
            how = (
                f"re-targeted ({check.match})"
                if check.match != "none"
                else "not found again, acted at the recorded point"
            )
        text += f"\n  step {check.step} op {check.idx}: {check.reason}; {how}"
    return text


class Identical(NamedTuple):
    """How many of a re-execution's steps were the same as its parent's, out of compared."""

    same: int
    compared: int
    first_divergent: int | None  # the first step that was not, if any


def steps_identical(parent: Session, child: Session) -> Identical:
    """The child's steps the same as the parent's, out of those compared: the measured ones, and
    for a replay that is no fork every parent step (one the child never reached diverged)."""
    measured = [step.fidelity for step in child.steps if step.fidelity is not None]
    compared = len(measured)
    if child.fork_step is None:
        compared = max(compared, len(parent.steps))
    same = sum(1 for fidelity in measured if not fidelity.diverged)
    first = child.first_divergence
    if first is None and same < compared:
        first = len(measured) + 1
    return Identical(same, compared, first)


def summary_text(replayed: Replayed) -> str:
    """One screen: steps identical out of compared, the first divergent step, both grades, the
    child's id, a line per divergent step (at most 10) and the query that shows them all."""
    parent, child = replayed.parent, replayed.child
    same, compared, first = steps_identical(parent, child)
    measured = [step.fidelity for step in child.steps if step.fidelity is not None]
    exact = sum(1 for fidelity in measured if fidelity.screenshot_identical)
    mode = child.replay_mode or "?"
    lines = [
        f"replay {mode} of {parent.session_id} ({parent.task_id}) -> {child.session_id}",
        f"steps identical: {same}/{compared} ({exact} byte-identical screenshots)   "
        f"first divergent step: {first if first is not None else 'none'}",
        f"parent: {_grade_text(parent)}",
        f"child:  {_grade_text(child)}",
    ]
    if child.fork_step is not None:
        lines.append(
            f"forked at step {child.fork_step}: steps before it from the cassette, "
            f"the rest live ({len(child.steps)} steps)"
        )
    rungs = _rungs_text(replayed)
    if rungs:
        lines.append(rungs)
    served = _served_text(child)
    if served:
        lines.append(f"model calls: {served}")
    if child.outcome is not None and child.outcome.error:
        lines.append(f"error: {child.outcome.error}")
    shown = 0
    for step in child.steps:
        fidelity = step.fidelity
        if fidelity is None or not fidelity.diverged or shown >= 10:
            continue
        shown += 1
        picture = (
            "identical"
            if fidelity.screenshot_identical
            else (
                "other size"
                if fidelity.pixel_diff is None
                else f"{fidelity.pixel_diff:.2%} differs"
            )
        )
        element = {None: "-", True: "same", False: "other"}[fidelity.element_equal]
        lines.append(
            f"  step {step.step}: screenshot {picture}, url "
            f"{'same' if fidelity.url_equal else 'other'}, element {element}"
        )
    lines.append(
        "query: "
        + sql_command("select * from fidelity where session_id = $id", id=child.session_id)
    )
    return "\n".join(lines)


def replay_from_options(store: Store, session: Session, options: dict[str, Any]) -> Replayed:
    """``ownloop replay TARGET --execute MODE`` / ``--fork-at K``: re-execute (``summary_text``
    says how it went).

    ``options`` holds the command's options: execute, fork_at, endpoint, model, api_key,
    settle, chromium, agent_option (``KEY=VALUE`` pairs), on_miss, run_id, on_diverge, seed and
    base.

    Raises:
        ReplayError: the options do not fit together, or the session cannot be re-executed.
    """
    execute, fork_at = options.get("execute"), options.get("fork_at")
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
        return execute_session(
            store,
            session,
            mode,
            fork_at=fork_at,
            run_id=options.get("run_id"),
            on_step=progress.advance,
            **option_arguments(options),
        )


def option_arguments(options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``execute_session`` and ``execute_batch`` that the replay
    command's options give (the ones a single and a batch replay share)."""
    return {
        "endpoint": options.get("endpoint"),
        "model": options.get("model"),
        "api_key": options.get("api_key"),
        "settle_s": float(options.get("settle", 1.0)),
        "chromium": options.get("chromium"),
        "agent_overrides": parse_overrides(options.get("agent_option") or ()),
        "on_miss": options.get("on_miss") or "stop",
        "released": options.get("released"),
        "on_diverge": options.get("on_diverge"),
        "seed": options.get("seed"),
        "base": options.get("base"),
        "desktop": (
            DesktopTarget(options["desktop"], options.get("reset") or None)
            if options.get("desktop")
            else None
        ),
    }
