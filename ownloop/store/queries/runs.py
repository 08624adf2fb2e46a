"""Sessions and runs looked up by id: a run's sessions, a session's neighbours, what a command
line's TARGET names, a run's start and settings, what an import already holds."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from ownloop.errors import OwnloopError

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = [
    "Neighbours",
    "RunSession",
    "has_run_started",
    "has_session",
    "imported_files",
    "imported_folders",
    "latest_session_of_task",
    "require_run",
    "run_sessions",
    "run_settings",
    "session_neighbours",
    "target_session",
    "task_attempts",
    "task_suites",
]


class RunSession(NamedTuple):
    """A session a run recorded (not a replay of one)."""

    session_id: str
    task_id: str
    agent: str
    attempt: int
    status: str | None  # None: no end yet
    started_at: datetime | None


def run_sessions(store: Store, run_id: str, *, by_task: bool = False) -> list[RunSession]:
    """The sessions ``run_id`` recorded, replays left out: in the order they started, or by
    task id, then attempt, then start when ``by_task``."""
    order = "task_id, attempt, started_at" if by_task else "started_at"
    rows = store.sql(
        "select session_id, task_id, agent, attempt, status, started_at from sessions "
        f"where run_id = $run and parent_session_id is null order by {order}",
        {"run": run_id},
    ).rows
    return [RunSession(*row) for row in rows]


def has_session(store: Store, session_id: str) -> bool:
    """Whether the index has a session with this id."""
    return bool(
        store.sql("select 1 from sessions where session_id = $id limit 1", {"id": session_id}).rows
    )


def latest_session_of_task(store: Store, task_id: str) -> str | None:
    """The id of the task's latest recorded session in any run (replays left out)."""
    rows = store.sql(
        "select session_id from sessions where task_id = $task and parent_session_id is null "
        "order by started_at desc limit 1",
        {"task": task_id},
    ).rows
    return str(rows[0][0]) if rows else None


class Neighbours(NamedTuple):
    """A session's place in its run, for the session page's links."""

    previous: str | None  # the run's session started just before (replays left out)
    next: str | None  # and just after
    repeats: list[tuple[str, int | None, bool | None]]  # the task's other sessions in the run:
    # (session id, repeat, passed), in repeat order


def session_neighbours(store: Store, session_id: str) -> Neighbours:
    """The sessions before and after ``session_id`` in its run (by start; replays of another
    session left out) and the other sessions of its task in the run."""
    rows = store.sql(
        "with me as (select run_id, task_id from session_facts where session_id = $id), "
        "run as (select f.session_id, f.task_id, f.repeat, f.passed, f.started_at, "
        "lag(f.session_id) over w as previous, lead(f.session_id) over w as next "
        "from session_facts f join me using (run_id) where f.parent_session_id is null "
        "window w as (order by f.started_at, f.session_id)) "
        "select session_id, repeat, passed, previous, next, session_id = $id as mine, "
        "task_id = (select task_id from me) as same_task from run "
        "where session_id = $id or task_id = (select task_id from me) "
        "order by repeat, started_at",
        {"id": session_id},
    ).rows
    previous = following = None
    repeats = []
    for sid, repeat, passed, before, after, mine, same_task in rows:
        if mine:
            previous, following = before, after
        elif same_task:
            repeats.append((str(sid), repeat, passed))
    return Neighbours(previous, following, repeats)


def target_session(store: Store, target: str, run_id: str | None = None) -> str | None:
    """The session a command line's TARGET names, or None.

    First a session with the id ``target``; else the latest session of the task ``target``; else
    of a task ``target-SEED`` (a MiniWoB task name without its seed). Tasks are looked for in
    ``run_id``, or without it in the latest run (by its first session's start) that has them.
    A recorded session wins over a replay of one (``parent_session_id``), and, without
    ``run_id``, over one of an imported run (its suite ``import:DIR``); those are chosen only when
    the task has nothing else.
    """
    # The sessions that match first, from session_facts (the sessions view's rows, one a
    # session, without the view's per-run figures): then only their runs' starts.
    rows = store.sql(
        "with s as (select session_id, run_id, task_id, parent_session_id, started_at "
        "from session_facts "
        "where (session_id = $t or task_id = $t or (starts_with(task_id, $t || '-') "
        "and regexp_full_match(task_id[length($t) + 2:], '[0-9]+'))) "
        "and ($run is null or run_id = $run)), "
        "r as (select run_id, min(started_at) as run_start from session_facts "
        "where run_id in (select run_id from s) group by run_id), "
        "imported as (select distinct run_id, true as imported from run_started "
        "where starts_with(suite, 'import:')) "
        "select s.session_id, case when s.session_id = $t then 0 when s.task_id = $t then 1 "
        "else 2 end as rank "
        "from s join r using (run_id) left join imported i using (run_id) "
        "order by rank, s.parent_session_id is not null, "
        "$run is null and coalesce(i.imported, false), "
        "r.run_start desc, s.started_at desc, s.session_id desc limit 1",
        {"t": target, "run": run_id or None},
    ).rows
    return str(rows[0][0]) if rows else None


def has_run_started(store: Store, run_id: str) -> bool:
    """Whether the store holds a ``RunStarted`` of ``run_id``."""
    return bool(
        store.sql("select 1 from run_started where run_id = $run limit 1", {"run": run_id}).rows
    )


def require_run(store: Store, run_id: str, *, shown: int = 8) -> None:
    """Raise unless the store holds a run ``run_id`` (started, or with sessions).

    Raises:
        OwnloopError: one line naming the run asked for and the runs there are.
    """
    known = "select run_id from run_started union select run_id from session_started"
    if store.sql(f"select 1 from ({known}) where run_id = $run limit 1", {"run": run_id}).rows:
        return
    runs = [row[0] for row in store.sql(f"select run_id from ({known}) order by run_id").rows]
    if not runs:
        there = "it holds no run yet (record one with: ownloop record AGENT --suite miniwob ...)"
    else:
        more = f" and {len(runs) - shown:,} more" if len(runs) > shown else ""
        names = ", ".join(repr(run) for run in runs[:shown])
        there = f'its runs: {names}{more}. List them with: ownloop sql "select * from runs"'
    raise OwnloopError(f"no run {run_id!r} in {store.root}; {there}")


def run_settings(store: Store, run_ids: Iterable[str]) -> list[tuple[str, datetime, Any]]:
    """Each ``RunStarted`` of these runs as (run id, time, agent settings JSON), oldest first."""
    runs = sorted(set(run_ids))
    if not runs:
        return []
    rows = store.sql(
        "select run_id, time, agent_settings from run_started "
        "where list_contains($runs, run_id) order by time",
        {"runs": runs},
    ).rows
    return [(run_id, time, settings) for run_id, time, settings in rows]


def imported_folders(store: Store, run_id: str) -> set[str]:
    """The hashes of the folders already imported into ``run_id``."""
    rows = store.sql(
        "select distinct e.value ->> 'sha256' from evidence e join sessions s using (session_id) "
        "where s.run_id = $run and e.name = 'imported_folder'",
        {"run": run_id},
    ).rows
    return {h for (h,) in rows if h}


def imported_files(store: Store, run_id: str, evidence: str) -> set[str]:
    """The sha256 of the files already imported into ``run_id``, as kept by the evidence named
    ``evidence`` (its value's ``sha256``), e.g. ``imported_atif``."""
    rows = store.sql(
        "select distinct e.value ->> 'sha256' from evidence e join sessions s using (session_id) "
        "where s.run_id = $run and e.name = $name",
        {"run": run_id, "name": evidence},
    ).rows
    return {h for (h,) in rows if h}


def task_attempts(store: Store, run_id: str) -> dict[str, int]:
    """Each task's highest attempt in ``run_id``."""
    rows = store.sql(
        "select task_id, max(attempt) from sessions where run_id = $run group by task_id",
        {"run": run_id},
    ).rows
    return {t: int(a) for t, a in rows if t is not None}


def task_suites(store: Store, run_ids: Sequence[str]) -> dict[str, str]:
    """Each task of these runs and the suite its first session came from (e.g. osworld:chrome)."""
    rows = store.sql(
        "select task_id, arg_min(suite, started_at) from sessions "
        "where list_contains($runs, run_id) and task_id is not null group by task_id",
        {"runs": list(run_ids)},
    ).rows
    return {str(t): str(s or "") for t, s in rows}
