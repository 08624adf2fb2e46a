"""What a TARGET on the command line means: a session id, or a task id and its latest session.

A task id picks that task's latest recorded session in ``--run``, or, without ``--run``, in the
latest run (by the start of its first session) that has the task. Recorded means not a replay of
another session and, without ``--run``, not imported; those are picked only for a task that has
nothing else. A MiniWoB task name without its seed (``click-button`` for ``click-button-44284``)
counts as that task's id when no task has it exactly.
"""

from __future__ import annotations

from ownloop.errors import OwnloopError
from ownloop.replay.fold import Session, fold
from ownloop.store import Store
from ownloop.store.queries import target_session

__all__ = ["NotReplayable", "TargetNotFound", "check_replayable", "load_session", "resolve_target"]


class TargetNotFound(OwnloopError):
    """No session or task has the id given."""


class NotReplayable(OwnloopError):
    """The session lacks what the replay mode re-executes (actions, or model responses)."""


def resolve_target(store: Store, target: str, run_id: str | None = None) -> str:
    """The session id ``target`` names.

    Args:
        store: the store.
        target: a session id, a task id, or a MiniWoB task name without its seed.
        run_id: look only in this run.

    Raises:
        TargetNotFound: nothing matches; the message says how to list what is there.
    """
    session_id = target_session(store, target, run_id)
    if session_id is None:
        if run_id:
            raise TargetNotFound(
                f"no session or task '{target}' in run '{run_id}' of {store.root}. "
                f"List them with: ownloop sessions --run {run_id}"
            )
        raise TargetNotFound(
            f"no session or task '{target}' in {store.root}. List them with: ownloop sessions"
        )
    return session_id


def load_session(store: Store, target: str | None, run_id: str | None = None) -> Session:
    """The session ``target`` names (see ``resolve_target``), rebuilt offline from its events.

    Raises:
        TargetNotFound: no target was given, or nothing matches it.
    """
    if not target:
        raise TargetNotFound(
            "give a TARGET: a session id or a task id. List them with: ownloop sessions"
        )
    session_id = resolve_target(store, target, run_id)
    return fold(store.session_events(session_id), session_id)


def check_replayable(session: Session, mode: str) -> None:
    """Refuse, naming the session to replay instead, when ``session`` has nothing that ``mode``
    re-executes: ``actions`` needs parsed actions, ``responses`` and ``fork`` model responses.
    An ``ops`` replay has neither: it re-ran its parent's browser operations only.

    Raises:
        NotReplayable: the session has none; the message names its parent when it has one.
    """
    if mode == "actions":
        what, has = "actions", any(step.actions for step in session.steps)
    elif mode in ("responses", "fork"):
        what, has = "model responses", any(step.calls for step in session.steps)
    else:
        return
    if has:
        return
    flag = "--fork-at K" if mode == "fork" else f"--execute {mode}"
    if session.parent_session_id:
        raise NotReplayable(
            f"session {session.session_id} is an {session.replay_mode or '?'} replay of "
            f"{session.parent_session_id} and has no recorded {what} to re-execute. Replay its "
            f"parent: ownloop replay {session.parent_session_id} {flag}"
        )
    raise NotReplayable(
        f"session {session.session_id} has no recorded {what} to re-execute "
        f"with {flag}; its browser operations replay with --execute ops"
    )
