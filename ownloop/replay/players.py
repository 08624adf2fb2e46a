"""How a replayed step is played: the parent's recorded operations (``ops``) or its actions
translated again (``actions``), each pointer operation checked by the guard first, and the
fidelity of each step measured against the parent on a background thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import msgspec

from ownloop.agents.base import Parsed, PastStep
from ownloop.recorder.episode import Episode, Play
from ownloop.replay.fidelity import measure_step
from ownloop.replay.fold import Session, Step
from ownloop.replay.guard import Guard, Verdict
from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.events import Event, FidelityMeasured, MouseMove, Op, SessionEnded, now

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
