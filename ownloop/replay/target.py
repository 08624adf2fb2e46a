"""What a TARGET on the command line means: a session id, or a task id and its latest session.

A task id picks that task's latest session in ``--run``, or, without ``--run``, in the latest run
(by the start of its first session) that has the task. A MiniWoB task name without its seed
(``click-button`` for ``click-button-44284``) counts as that task's id when no task has it exactly.
"""

from __future__ import annotations

from ownloop.replay.fold import Session, fold
from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.queries import target_session

__all__ = ["TargetNotFound", "load_session", "resolve_target"]


class TargetNotFound(OwnloopError):
    """No session or task has the id given."""


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
                f"List them with: ownloop sessions --run {run_id}")
        raise TargetNotFound(
            f"no session or task '{target}' in {store.root}. List them with: ownloop sessions")
    return session_id


def load_session(store: Store, target: str | None, run_id: str | None = None) -> Session:
    """The session ``target`` names (see ``resolve_target``), rebuilt offline from its events.

    Raises:
        TargetNotFound: no target was given, or nothing matches it.
    """
    if not target:
        raise TargetNotFound("give a TARGET: a session id or a task id. List them with: "
                             "ownloop sessions")
    session_id = resolve_target(store, target, run_id)
    return fold(store.session_events(session_id), session_id)
