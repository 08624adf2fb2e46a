"""One recorder's work on one task at a time, shared by both executors: claim the task, start
its browser or take a desktop, run the session, settle it (count it, or give the claim back)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ownloop.agents.base import Agent
from ownloop.errors import OwnloopError
from ownloop.recorder.endpoints import EndpointPool, bench_seconds
from ownloop.recorder.episode import EpisodeResult, EpisodeSetup, StepHook, run_episode
from ownloop.recorder.model import ModelClient, public_endpoint
from ownloop.recorder.run_options import RecordOptions
from ownloop.store import Store
from ownloop.store.claims import Claim, Claims
from ownloop.store.events import (
    ActionParsed,
    EndpointBenched,
    Event,
    ModelCalled,
    SessionCounted,
    SessionEnded,
    SessionStarted,
    StreamsCataloged,
    Task,
    TaskClaimed,
    now,
)
from ownloop.store.ids import new_id
from ownloop.store.journal import StreamWriter
from ownloop.world import World
from ownloop.world.browser import BrowserSession
from ownloop.world.browser_world import BrowserWorld
from ownloop.world.chromium import browser_versions, open_browser
from ownloop.world.pool import DesktopLease, DesktopPool
from ownloop.world.suites import Suite

__all__ = [
    "FINAL_STATUSES",
    "SCORED",
    "EndpointErrors",
    "TaskRecorder",
    "count_session",
    "crash_end",
    "has_ended",
]

# Statuses a session may end with that are not a pause (endpoint_error, interrupted, crashed).
FINAL_STATUSES = frozenset(
    {"finished", "call_user", "fail", "max_steps", "timeout", "parse_error", "no_action", "error"}
)
# The outcomes that count for a task: the first session to end with one wins it. An error (the
# browser or the harness failed, not the agent) gives the task back, like the ungraded statuses.
SCORED = FINAL_STATUSES - {"error"}
_RETRIED = frozenset({"error", "parse_error"})


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
        self.run_stream.append(
            [count_session(self.claims, self.run_id, task.task_id, claim.repeat, old)]
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
            crashed = crash_end(self.store, self.claims, self.run_id, claim.took_over_session)
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
            setup = EpisodeSetup(
                self.store,
                self.agent,
                self.client_for(endpoint),
                world,
                self.suite,
                self.options.limits,
                self.stop,
                task.grader or self.suite.default_grader,
            )
            result = run_episode(
                setup,
                started,
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
            events.append(
                count_session(
                    self.claims, self.run_id, task.task_id, claim.repeat, result.session_id
                )
            )
        else:
            if result.status in SCORED:  # retried: this attempt does not count, the retry may
                events.append(
                    _counted(self.run_id, task.task_id, claim.repeat, result.session_id, False)
                )
            self.claims.release(claim)
        if result.head is not None:
            events.append(StreamsCataloged(at=now(), run_id=self.run_id, heads=(result.head,)))
        self.run_stream.append(events)


class EndpointErrors:
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


def count_session(
    claims: Claims, run_id: str, task_id: str, repeat: int, session_id: str
) -> SessionCounted:
    """Mark ``session_id`` scored in the claims (the first scored session of the task and repeat
    wins it) and the event that says so."""
    counting = claims.finish(task_id, repeat, session_id)
    return _counted(run_id, task_id, repeat, session_id, counting.counted, counting.winner)


def _counted(
    run_id: str, task_id: str, repeat: int, session_id: str, counted: bool, winner: str = ""
) -> SessionCounted:
    """The SessionCounted that says whether ``session_id`` counts for its task and repeat."""
    return SessionCounted(
        at=now(),
        run_id=run_id,
        session_id=session_id,
        task_id=task_id,
        repeat=repeat,
        counted=counted,
        winner=winner,
    )


def crash_end(store: Store, claims: Claims, run_id: str, session_id: str) -> SessionEnded | None:
    """The ``crashed`` end of a session a dead recorder left open, if this recorder is the one to
    write it (exactly one does); None if the session has an end, or never started its stream."""
    if not (store.journal_dir / f"{session_id}.jsonl").exists() or has_ended(store, session_id):
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


def has_ended(store: Store, session_id: str) -> bool:
    """Whether the session's own stream already holds its end (written, not yet reported)."""
    return _end_of(store, session_id) is not None


def _end_of(store: Store, session_id: str) -> SessionEnded | None:
    """The end the session's own stream holds, if any."""
    try:
        ends = [e for e in store.read_stream(session_id) if isinstance(e, SessionEnded)]
    except OwnloopError:  # no stream: the session never got to write one
        return None
    return ends[-1] if ends else None
