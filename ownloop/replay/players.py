"""How a replayed step is played: the parent's recorded operations (``ops``) or its actions
translated again (``actions``), each pointer operation checked by the guard first, and the
fidelity of each step measured against the parent on a background thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import msgspec

from ownloop.agents.base import Parsed
from ownloop.errors import OwnloopError
from ownloop.recorder.episode import Episode, OpCheck, Play, Turn, Verdict
from ownloop.replay.fidelity import measure_step
from ownloop.replay.fold import Session, Step
from ownloop.replay.guard import Guard
from ownloop.store import Store
from ownloop.store.events import Event, FidelityMeasured, Op, SessionEnded, now
from ownloop.store.ids import SessionIds

__all__ = ["Fidelity", "play_recorded"]


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


def _checked(
    guard: Guard, ids: SessionIds, recorded: Step, batch: list[Event], fork: Callable[[], None]
) -> OpCheck:
    """The guard's check of each operation of the ``recorded`` step; ``fork`` is told when a
    check hands the step to the live model."""
    elements = {effect.idx: effect.element for effect in recorded.effects}

    def check(index: int, op: Op) -> Verdict:
        verdict = guard.check_op(ids, recorded.step, index, op, elements.get(index), batch)
        if verdict.then == "fork":
            fork()
        return verdict

    return check


def play_recorded(parent: Session, mode: str, guard: Guard | None, fidelity: Fidelity) -> Play:
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
        check: OpCheck | None = None
        if guard is not None:
            ids = episode.ids()
            guard.check_screenshot(ids, number, recorded, observation.screenshot.sha256, batch)

            def fork() -> None:  # this step and the rest are the live model's
                forked.append(number)
                fidelity.fork_at = number + 1

            check = _checked(guard, ids, recorded, batch, fork)
        ops: tuple[tuple[int, int, Op], ...] | None
        if mode == "ops":
            ops = tuple((e.idx, e.action_idx, e.op) for e in recorded.effects)
        else:
            parse = recorded.parsed
            if parse is None or parse.error is not None:  # the parent had no actions here
                return _parent_end(episode, parent, number)
            batch.append(msgspec.structs.replace(parse, at=now(), **episode.ids()))
            ops = None
        # The recording tells whether this step started a download: only then is the grace for
        # one waited out, so a replayed click costs its own time.
        turn = Turn(
            observation,
            _recorded_parse(recorded),
            recorded.response or "",
            ops=ops,
            check=check,
            agent_ends=mode == "actions",
            settle=number < last,
            download_grace=any(e.download for e in recorded.effects),
        )
        ended = episode.step(number, batch, turn)
        if ended is None and not forked and number >= last:
            return _parent_end(episode, parent, number)
        return ended

    return play


class Fidelity:
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
                load_blob=self.store.blobs.get_stored,  # pixels only: a WebP as it is
                rebase_url=self.rebase_url,
            )
        except (OwnloopError, OSError, ValueError):
            return None  # a missing or unreadable parent screenshot: no measurement

    def events(self) -> list[FidelityMeasured]:
        try:
            return [event for future in self.pending if (event := future.result()) is not None]
        finally:
            self.pool.shutdown()
