"""What a TARGET on the command line means: a session id, or a task id and its latest session.

A task id picks that task's latest session in ``--run``, or, without ``--run``, in the latest run
(by the start of its first session) that has the task. A MiniWoB task name without its seed
(``click-button`` for ``click-button-44284``) counts as that task's id when no task has it exactly.
"""

from __future__ import annotations

from ownloop.replay.fold import Session, fold
from ownloop.store import Store, sql_literal
from ownloop.store.errors import OwnloopError

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
    t = sql_literal(target)
    in_run = f" and s.run_id = {sql_literal(run_id)}" if run_id else ""
    # rank 0: a session id, 1: a task id, 2: a task name followed by -SEED
    rows = store.sql(
        "with r as (select run_id, min(started_at) as run_start from sessions group by run_id) "
        f"select s.session_id, case when s.session_id = {t} then 0 when s.task_id = {t} then 1 "
        "else 2 end as rank "
        "from sessions s join r using (run_id) "
        f"where (s.session_id = {t} or s.task_id = {t} or (starts_with(s.task_id, {t} || '-') "
        f"and regexp_full_match(s.task_id[length({t}) + 2:], '[0-9]+'))){in_run} "
        "order by rank, r.run_start desc, s.started_at desc, s.session_id desc limit 1").rows
    if not rows:
        if run_id:
            raise TargetNotFound(
                f"no session or task '{target}' in run '{run_id}' of {store.root}. "
                f"List them with: ownloop sessions --run {run_id}")
        raise TargetNotFound(
            f"no session or task '{target}' in {store.root}. List them with: ownloop sessions")
    return str(rows[0][0])


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
