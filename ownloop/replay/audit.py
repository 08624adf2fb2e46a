"""``ownloop audit blind``: does a benchmark task measure the agent, or would a blind script pass?

For each task of a run with a passing session, that session's recorded browser operations are
re-executed blind (``replay --execute ops`` with ``--on-diverge ignore``: no model, no screenshot
read to decide anything) on fresh episodes of the same task with other seeds. A task a blind
replay passes is ``non_discriminative``: its layout and goal do not depend on the episode, so a
fixed script solves it. The replays are ordinary child sessions of the run's sessions; the views
``blind_replays``, ``blind_audit`` and ``non_discriminative`` read them, so the verdict is in
the store, and running the audit again only runs the replays still missing.

Only MiniWoB tasks have other episodes (seeds) today. A desktop task (OSWorld's) has one start
state, its setup on a reset desktop: its blind replay runs the passing session's recorded
pyautogui operations there once (``--desktop URL``, ``--reset CMD``), and a pass says a fixed
script solves the task as it is set up. Other tasks are skipped and said so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from ownloop.errors import OwnloopError
from ownloop.replay.fold import fold
from ownloop.replay.options import ReplayOptions
from ownloop.replay.serial import SerialReplays
from ownloop.store import Store
from ownloop.store.queries import (
    blind_audit_rows,
    blind_replayed,
    passing_sessions,
    sql_command,
)
from ownloop.store.query import QueryResult
from ownloop.world.pool import DesktopTarget
from ownloop.world.suites.miniwob import parse_seeds

__all__ = ["BlindAudit", "DEFAULT_SEEDS", "audit_blind"]

DEFAULT_SEEDS = 3
"""Blind replays per task without ``--seeds``: the first seeds from 1 that are not the task's."""


class BlindAudit(NamedTuple):
    """The audit of one run: the ``blind_audit`` rows, the replays this call ran, what it
    skipped (one line each)."""

    run_id: str
    rows: QueryResult  # task_id, replays, passes, blind_pass_rate, non_discriminative
    replayed: int
    skipped: tuple[str, ...]

    def lines(self) -> list[str]:
        """The closing lines: what was skipped, the flagged tasks, a query to see them."""
        flagged = [str(row[0]) for row in self.rows.rows if row[4]]
        lines = list(self.skipped)
        lines.append(
            f"run {self.run_id}: {len(self.rows.rows)} tasks audited, {self.replayed} "
            f"blind replays run now; non-discriminative: {', '.join(flagged) or 'none'}"
        )
        lines.append(
            "query: "
            + sql_command("select * from blind_replays where run_id = $run", run=self.run_id)
        )
        return lines


def audit_blind(
    store: Store,
    run_id: str,
    seeds: str | None = None,
    *,
    settle_s: float = 0.2,
    chromium: str | None = None,
    on_replay: Callable[[str, int | None, bool | None], None] | None = None,
    desktop: DesktopTarget | None = None,
) -> BlindAudit:
    """Replay each passing task of ``run_id`` blind on other seeds; the audit's rows.

    Args:
        store: the store holding the run; the replays are written to it.
        run_id: the run to audit.
        seeds: ``--seeds`` text (``1,2,10-19``); a task's own seed is left out. None: the first
            ``DEFAULT_SEEDS`` seeds from 1 that are not the task's.
        settle_s: the pause after each replayed step.
        chromium: a Chromium executable overriding discovery.
        on_replay: told (task id, seed, passed) after each replay (seed None on a desktop).
        desktop: the desktop to replay desktop tasks on (and its reset).

    Raises:
        OwnloopError: the run has no passing session to audit, the seeds do not parse, or it
            has desktop tasks and no ``desktop``.
    """
    store.sync()
    given = parse_seeds(seeds) if seeds else None
    candidates = passing_sessions(store, run_id)
    if not candidates:
        raise OwnloopError(
            f"run {run_id} has no passing session to audit. List runs with: "
            'ownloop sql "select run_id, score from run_scores"'
        )
    done = blind_replayed(store, run_id)
    replayed = 0
    skipped: list[str] = []
    with SerialReplays(chromium) as replays:  # one Chromium for all the replays
        for task_id, session_id in candidates:
            parent = fold(store.session_events(session_id))
            task = parent.task
            if task is not None and task.world == "desktop":
                if (session_id, None) in done:
                    continue
                if desktop is None:
                    raise OwnloopError(
                        f"run {run_id} has desktop tasks: give --desktop URL (and --reset CMD) "
                        "to replay them on"
                    )
                result = replays.execute(
                    store,
                    parent,
                    "ops",
                    ReplayOptions(settle_s=settle_s, desktop=desktop, audit="blind"),
                )
                replayed += 1
                if on_replay is not None:
                    grade = result.child.latest_grade
                    on_replay(task_id, None, None if grade is None else grade.passed)
                continue
            if task is None or task.suite != "miniwob":
                skipped.append(
                    f"{task_id}: skipped, not a MiniWoB task (a blind audit needs other "
                    "episodes of the task: seeds)"
                )
                continue
            for seed in _seeds_for(task.seed, given):
                if (session_id, seed) in done:
                    continue
                options = ReplayOptions(
                    seed=seed,
                    on_diverge="ignore",
                    settle_s=settle_s,
                    chromium=chromium,
                    audit="blind",
                )
                result = replays.execute(store, parent, "ops", options)
                replayed += 1
                if on_replay is not None:
                    grade = result.child.latest_grade
                    on_replay(task_id, seed, None if grade is None else grade.passed)
    store.sync()
    return BlindAudit(run_id, blind_audit_rows(store, run_id), replayed, tuple(skipped))


def _seeds_for(own: int | None, given: Sequence[int] | None) -> list[int]:
    if given is not None:
        return [seed for seed in given if seed != own]
    seeds: list[int] = []
    candidate = 1
    while len(seeds) < DEFAULT_SEEDS:
        if candidate != own:
            seeds.append(candidate)
        candidate += 1
    return seeds
