"""Re-parse: today's parser and translator over the recorded model responses, offline.

For every recorded response (the accepted one of each step, and those that failed to parse), the
agent parses it again for the recorded screenshot size and translates the new actions; a step is
listed when its actions or its browser operations differ from what was recorded (the operations
recorded are the step's ``BrowserActed.op``). Nothing is written to the store.

The agent is made with the settings its run recorded (``RunStarted.agent_settings``), then the
``-o KEY=VALUE`` overrides: with no overrides, only a change in the code shows up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ownloop.agents import Agent, AgentParseError
from ownloop.agents.base import Observation, Parsed, PastStep
from ownloop.agents.options import parse_overrides
from ownloop.agents.recorded import agent_for
from ownloop.errors import OwnloopError
from ownloop.replay.fold import Session, Step
from ownloop.replay.render import actions_text, op_text
from ownloop.replay.runs import recorded_settings
from ownloop.replay.selection import Selection, fold_selected
from ownloop.replay.target import load_session
from ownloop.store import Store
from ownloop.store.events import ImagePart, ModelCalled, Op

__all__ = [
    "ReparseReport",
    "StepChange",
    "reparse",
    "reparse_session",
    "reparse_target",
]


class StepChange(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded response whose parse or translation is different today (compact texts)."""

    session_id: str
    task_id: str
    step: int
    call_id: str
    change: str  # "actions", "ops", "actions and ops", "now parses", "now fails"
    old_actions: str
    new_actions: str
    old_ops: str
    new_ops: str


class ReparseReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a re-parse found."""

    sessions: int
    steps: int
    responses: int
    changes: tuple[StepChange, ...] = ()
    options: dict[str, Any] = {}

    def lines(self) -> list[str]:
        """One block per changed response, then the count line."""
        lines = []
        for c in self.changes:
            lines.append(
                f"{c.session_id}  {c.task_id}  step {c.step}  call {c.call_id}: {c.change}"
            )
            if c.old_actions != c.new_actions:
                lines.append(f"  actions: {c.old_actions}")
                lines.append(f"       ->  {c.new_actions}")
            if c.old_ops != c.new_ops:
                lines.append(f"  ops:     {c.old_ops}")
                lines.append(f"       ->  {c.new_ops}")
        changed_steps = len({(c.session_id, c.step) for c in self.changes})
        lines.append(
            f"{changed_steps} of {self.steps} steps changed ({len(self.changes)} of "
            f"{self.responses} responses) in {self.sessions} sessions; nothing was "
            "written"
        )
        return lines

    def to_json(self) -> str:
        return msgspec.json.encode(self).decode()


def _ops_text(ops: Iterable[Op]) -> str:
    return "; ".join(op_text(op) for op in ops) or "-"


def _parse(
    agent: Agent, call: ModelCalled, size: tuple[int, int], history: Sequence[PastStep]
) -> tuple[Any, str | None]:
    """(Parsed or None, error or None) as the recorder would have it today."""
    if call.response is None:
        return None, "no response"
    if agent.settings.stop_only and call.finish_reason != "stop":
        return None, f"finish reason {call.finish_reason!r}, not 'stop'"
    try:
        return agent.parse(call.response, size, history), None
    except AgentParseError as exc:
        return None, str(exc)


def _image_size(session: Session, step: Step) -> tuple[int, int]:
    shot = step.screenshot
    if shot is not None and shot.width and shot.height:
        return shot.width, shot.height
    return session.viewport


def reparse_session(session: Session, agent: Agent) -> tuple[list[StepChange], int]:
    """The changed responses of one session and how many responses were parsed again."""
    changes: list[StepChange] = []
    count = 0
    history: list[PastStep] = []  # as recorded: what the agent saw before each step
    for step in session.steps:
        size = _image_size(session, step)
        calls = {call.call_id: call for call in step.calls}
        for parse in step.parses:
            call = calls.get(parse.call_id)
            if call is None or call.response is None:
                continue
            count += 1
            accepted = parse is step.parsed and parse.error is None
            parsed, error = _parse(agent, call, size, history)
            new_actions = parsed.actions if parsed is not None else ()
            new_ops = tuple(op for a in new_actions for op in agent.translate(a))
            old_ops = tuple(effect.op for effect in step.effects) if accepted else ()
            if call.served_by == "import" and not step.effects:
                # An imported step kept no operations of ownloop's (OSWorld ran its own code):
                # only the actions can be compared.
                new_ops = old_ops
            if parse.error is not None and error is not None:
                continue  # failed then, fails now: nothing was or would be done
            if parse.error is not None:
                change = "now parses"
            elif error is not None:
                change = "now fails"
            else:
                differs = [
                    name
                    for name, same in (
                        ("actions", parse.actions == new_actions),
                        ("ops", old_ops == new_ops),
                    )
                    if not same
                ]
                if not differs:
                    continue
                change = " and ".join(differs)
            changes.append(
                StepChange(
                    session_id=session.session_id,
                    task_id=session.task_id,
                    step=step.step,
                    call_id=call.call_id,
                    change=change,
                    old_actions=(
                        f"parse error: {parse.error}"
                        if parse.error is not None
                        else actions_text(parse.actions)
                    ),
                    new_actions=(
                        f"parse error: {error}" if error is not None else actions_text(new_actions)
                    ),
                    old_ops=_ops_text(old_ops),
                    new_ops=_ops_text(new_ops),
                )
            )
        history.append(_past_step(step, size))
    return changes, count


def _past_step(step: Step, size: tuple[int, int]) -> PastStep:
    """The step as the recorder handed it to the agent's history (the accepted parse)."""
    shot = step.screenshot
    image = ImagePart(sha256=shot.sha256 if shot else "", width=size[0], height=size[1])
    accepted = step.parsed if step.parsed is not None and step.parsed.error is None else None
    parsed = (
        Parsed(thought=accepted.thought, actions=accepted.actions, model_size=accepted.model_size)
        if accepted
        else Parsed()
    )
    response = next(
        (c.response for c in step.calls if accepted and c.call_id == accepted.call_id), None
    )
    return PastStep(
        Observation(step.step, image, shot.url if shot else ""),
        response or step.response or "",
        parsed,
    )


def reparse(
    store: Store,
    *,
    session: Session | None = None,
    run_id: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ReparseReport:
    """Re-parse one session, or every session of a run, with today's agent code.

    Args:
        store: the store (read only).
        session: the session to re-parse; else every session of ``run_id``.
        run_id: the run whose sessions to re-parse when ``session`` is None.
        overrides: agent options over the recorded ones, e.g. ``{"scroll_notches": 3}``.

    Raises:
        OwnloopError: neither a session nor a run, an unknown agent, or a bad option.
    """
    overrides = dict(overrides or {})
    if session is not None:
        sessions = [session]
    elif run_id:
        sessions = list(fold_selected(store, Selection(run_id=run_id)).values())
        if not sessions:
            raise OwnloopError(
                f"no sessions in run '{run_id}' of {store.root}. List runs "
                'with: ownloop sql "select * from runs"'
            )
    else:
        raise OwnloopError("give a TARGET (session or task id) or --run R to re-parse")
    settings = recorded_settings(store, sessions)
    agents: dict[str, Agent] = {}
    changes: list[StepChange] = []
    steps = responses = 0
    for one in sessions:
        recorded = settings.get(one.session_id, {})
        name = one.agent
        if not name:
            raise OwnloopError(f"session {one.session_id} recorded no agent; cannot re-parse it")
        key = name + json.dumps(recorded, sort_keys=True, default=str)
        agent = agents.get(key)
        if agent is None:
            agents[key] = agent = agent_for(name, recorded, overrides)
        found, count = reparse_session(one, agent)
        changes.extend(found)
        responses += count
        steps += len(one.steps)
    return ReparseReport(
        sessions=len(sessions),
        steps=steps,
        responses=responses,
        changes=tuple(changes),
        options=overrides,
    )


def reparse_target(
    store: Store, target: str | None, run_id: str | None, pairs: Iterable[str] = ()
) -> ReparseReport:
    """``ownloop replay --reparse``: TARGET's session (in ``run_id`` if given), or every session
    of ``run_id`` when there is no TARGET; ``pairs`` are ``-o KEY=VALUE`` overrides."""
    overrides = parse_overrides(pairs)
    if target:
        return reparse(store, session=load_session(store, target, run_id), overrides=overrides)
    return reparse(store, run_id=run_id, overrides=overrides)
