"""``ownloop audit noop``: does a benchmark task pass when the agent does nothing at all?

For each task of a run, one of its sessions is re-executed with none of its steps: the task's
setup on the episode the run used (the same MiniWoB seed, the same start page), no action, no
answer, then the task's graders (``replay --execute ops`` over zero steps, ending
``no_action``). A task whose untouched start state already scores above the threshold (0.2 by
default) or passes does not measure the agent: it is flagged in the views ``noop_audit`` and
``passes_untouched`` (beside ``non_discriminative``), and ``seal`` lists it. The replays are
ordinary child sessions, so the verdict is in the store and running the audit again only runs
the replays still missing. OSWorld's release checks grade the untouched start state the same
way. A desktop task's untouched start state is its setup on a reset desktop (``--desktop URL``,
``--reset CMD``), then its postconfig and getters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import msgspec

from ownloop.errors import OwnloopError
from ownloop.replay.fold import fold
from ownloop.replay.options import ReplayOptions
from ownloop.replay.serial import SerialReplays
from ownloop.store import Store
from ownloop.store.events import SessionEnded, now
from ownloop.store.queries import sql_command
from ownloop.store.query import QueryResult
from ownloop.world.pool import DesktopTarget

__all__ = ["DEFAULT_THRESHOLD", "NoopAudit", "audit_noop"]

DEFAULT_THRESHOLD = 0.2


class NoopAudit(NamedTuple):
    """The audit of one run: a row per task, how many replays this call ran, and the bar."""

    run_id: str
    rows: QueryResult  # task_id, replays, passes, noop_score, flagged
    replayed: int
    threshold: float

    def flagged(self) -> list[str]:
        return [str(row[0]) for row in self.rows.rows if row[4]]

    def lines(self) -> list[str]:
        """The closing lines: the flagged tasks and a query to see the replays."""
        return [
            f"run {self.run_id}: {len(self.rows.rows)} tasks audited, {self.replayed} "
            f"null-agent replays run now; pass untouched (score > {self.threshold:g} or "
            f"passed with no action): {', '.join(self.flagged()) or 'none'}",
            "query: "
            + sql_command("select * from noop_replays where run_id = $run", run=self.run_id),
        ]


def _tasks(store: Store, run_id: str) -> list[tuple[str, str]]:
    """(task id, session id) of each task of the run: its scored unit of the lowest repeat."""
    rows = store.sql(
        "select task_id, arg_min(session_id, repeat) from scored_units "
        "where run_id = $run group by task_id order by task_id",
        {"run": run_id},
    ).rows
    return [(str(t), str(s)) for t, s in rows]


def audit_noop(
    store: Store,
    run_id: str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    settle_s: float = 0.2,
    chromium: str | None = None,
    on_replay: Callable[[str, float | None], None] | None = None,
    desktop: DesktopTarget | None = None,
) -> NoopAudit:
    """Grade each task of ``run_id`` on its untouched start state; the audit's rows.

    ``desktop`` is where desktop tasks are set up (and how it is reset).

    Raises:
        OwnloopError: the run has no scored session to take its tasks from, or it has desktop
            tasks and no ``desktop``.
    """
    store.sync()
    candidates = _tasks(store, run_id)
    if not candidates:
        raise OwnloopError(
            f"run {run_id} has no scored session to audit. List runs with: "
            'ownloop sql "select run_id, score from run_scores"'
        )
    done = {
        str(t)
        for (t,) in store.sql(
            "select distinct task_id from noop_replays where run_id = $run and passed is not null",
            {"run": run_id},
        ).rows
    }
    replayed = 0
    with SerialReplays(chromium) as replays:  # one Chromium for all the replays
        for task_id, session_id in candidates:
            if task_id in done:
                continue
            parent = fold(store.session_events(session_id))
            on_desktop = parent.task is not None and parent.task.world == "desktop"
            if on_desktop and desktop is None:
                raise OwnloopError(
                    f"run {run_id} has desktop tasks: give --desktop URL (and --reset CMD) "
                    "to set them up on"
                )
            # no step to replay, and an end without the parent's answer: nothing the agent did
            untouched = SessionEnded(
                at=now(), run_id=parent.run_id, session_id=parent.session_id, status="no_action"
            )
            result = replays.execute(
                store,
                msgspec.structs.replace(parent, steps=(), outcome=untouched),
                "ops",
                ReplayOptions(
                    on_diverge="ignore",
                    settle_s=settle_s,
                    chromium=chromium,
                    desktop=desktop if on_desktop else None,
                    audit="noop",
                ),
            )
            replayed += 1
            if on_replay is not None:
                grade = result.child.latest_grade
                on_replay(task_id, None if grade is None else grade.score)
    store.sync()
    rows = store.sql(
        "select task_id, replays, passes, noop_score, noop_score > $bar or passes > 0 as flagged "
        "from noop_audit where run_id = $run order by task_id",
        {"run": run_id, "bar": threshold},
    )
    return NoopAudit(run_id, rows, replayed, threshold)
