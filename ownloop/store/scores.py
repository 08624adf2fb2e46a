"""Run scores the index keeps, and the outcomes ``compare`` reads: SQL over ``unit_outcomes``.

The task-clustered bootstrap of ``run_scores`` is computed in Python (``stats.py``), not in
SQL: DuckDB's ``random()`` cannot be seeded inside a view and its ``hash()`` is not promised
stable across releases, while ``random.Random(seed)`` is. So each sync recomputes, into the
``score_bootstraps`` table, the runs whose units changed (new sessions, a regrade): a digest of
a run's units says which. Only the runs a sync's rows could change are looked at (those of the
sessions whose facts it recomputed, and of new run starts; every run in a new index), so a sync
of steps alone runs no query here, and a sync that changed nothing recomputes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple

from ownloop.errors import OwnloopError
from ownloop.scoring.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, clustered_bootstrap

if TYPE_CHECKING:
    import duckdb

    from ownloop.store import Store

__all__ = ["Unit", "grader_judge", "judge_units", "refresh_bootstraps", "run_units", "score_line"]

# Every scored unit of the runs asked for, in the order the bootstrap and the digest read them.
# scores_as: the grade, false for an errored unit (see unit_outcomes in views.sql).
_UNITS = (
    "select run_id, task_id, repeat, scores_as, errored from unit_outcomes "
    "where scores_as is not null and ($all or list_contains($runs::varchar[], run_id)) "
    "order by run_id, task_id, repeat"
)


def _digest(units: list[tuple[str | None, int, bool, bool]]) -> str | None:
    """The md5 of a run's units, as SQL would give it: ``md5(string_agg(task_id || chr(0) ||
    repeat || chr(0) || scores_as || chr(0) || errored, chr(1) order by task_id, repeat))``
    (a unit without a task id has no part; none at all: NULL)."""
    parts = [
        f"{task}\0{repeat}\0{str(passed).lower()}\0{str(errored).lower()}"
        for task, repeat, passed, errored in units
        if task is not None
    ]
    if not parts:
        return None
    return hashlib.md5("\1".join(parts).encode(), usedforsecurity=False).hexdigest()


def refresh_bootstraps(con: duckdb.DuckDBPyConnection, runs: Collection[str] | None = None) -> int:
    """Recompute the bootstrap of every run whose graded units changed, of ``runs`` (None:
    of every run; a run not named must not have changed); returns how many."""
    if runs is not None and not runs:
        return 0
    asked = sorted(runs or ())
    by_run: dict[str, list[tuple[str | None, int, bool, bool]]] = {}
    for run, task, repeat, passed, errored in con.execute(
        _UNITS, {"all": runs is None, "runs": asked}
    ).fetchall():
        by_run.setdefault(run, []).append((task, repeat, passed, errored))
    digests = {run: _digest(units) for run, units in by_run.items()}
    stored = dict(
        con.execute(
            "select run_id, units_md5 from score_bootstraps "
            "where $all or list_contains($runs::varchar[], run_id)",
            {"all": runs is None, "runs": asked},
        ).fetchall()
    )
    changed = sorted(run for run, digest in digests.items() if stored.get(run) != digest)
    gone = sorted(stored.keys() - digests.keys())
    if not changed and not gone:
        return 0
    con.begin()
    con.execute(
        "delete from score_bootstraps where list_contains($runs::varchar[], run_id)",
        {"runs": changed + gone},
    )
    for run in changed:
        tasks = [
            list(map(itemgetter(2), group)) for _, group in groupby(by_run[run], itemgetter(0))
        ]
        errored = sum(1 for unit in by_run[run] if unit[3])
        interval = clustered_bootstrap(tasks)
        con.execute(
            "insert into score_bootstraps values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                run,
                digests[run],
                len(tasks),
                sum(map(len, tasks)),
                interval.estimate,
                interval.low,
                interval.high,
                BOOTSTRAP_RESAMPLES,
                BOOTSTRAP_SEED,
                errored,
            ],
        )
    con.commit()
    return len(changed)


class Unit(NamedTuple):
    """One scored unit of a run: a task's repeat, its session and whether it passed. An errored
    unit (see ``unit_outcomes``) has passed False, errored True, and its last session's status
    (or "missing", and no session id, when it has none)."""

    task_id: str
    repeat: int
    session_id: str
    passed: bool
    status: str = ""
    errored: bool = False


def run_units(store: Store, run_id: str) -> list[Unit]:
    """The scored units of ``run_id`` (see the ``unit_outcomes`` view): the graded ones and the
    errored ones, by task and repeat; ungraded ones are left out."""
    rows = store.sql(
        "select task_id, repeat, coalesce(session_id, ''), scores_as, status, errored "
        "from unit_outcomes where run_id = $run and scores_as is not null "
        "order by task_id, repeat",
        {"run": run_id},
    ).rows
    return [Unit(str(t), int(r), str(s), bool(p), str(st), bool(e)) for t, r, s, p, st, e in rows]


def grader_judge(grader: str) -> str | None:
    """``--grader``'s judge: None for ``rule`` (the rule graders), NAME for ``judge:NAME``.

    Raises:
        OwnloopError: anything else.
    """
    if grader == "rule":
        return None
    name = grader.removeprefix("judge:")
    if not grader.startswith("judge:") or not name or "/" in name:
        raise OwnloopError(
            f"--grader {grader!r}: use rule (the rule graders) or judge:NAME (a model judge's "
            "verdicts, e.g. judge:final)"
        )
    return name


def judge_units(store: Store, run_id: str, judge: str) -> list[Unit]:
    """The units of ``run_id`` scored by judge ``judge``: each unit's session passes when the
    majority of the judge's latest verdicts on it (one per repeat of the judging, controls
    left out) said passed (a tie fails); an errored unit fails, as under the rule graders.

    Raises:
        OwnloopError: a unit's session has no verdict of the judge (the two kinds of grade are
            never mixed: judge the rest first).
    """
    units = store.sql(
        "select task_id, repeat, coalesce(session_id, ''), status, errored "
        "from unit_outcomes where run_id = $run order by task_id, repeat",
        {"run": run_id},
    ).rows
    verdicts = dict(
        store.sql(
            "with latest as (select session_id, arg_max(passed, judged_at) as passed "
            "from judge_grades where run_id = $run and judge = $judge and control is null "
            "group by session_id, coalesce(repeat, 1)) "
            "select session_id, sum(passed::int) * 2 > count(*) from latest group by session_id",
            {"run": run_id, "judge": judge},
        ).rows
    )
    out, missing = [], 0
    for task, repeat, session, status, errored in units:
        if errored:
            out.append(Unit(str(task), int(repeat), str(session), False, str(status), True))
        elif session in verdicts:
            out.append(Unit(str(task), int(repeat), str(session), bool(verdicts[session])))
        else:
            missing += 1
    if missing:
        judged = store.sql(
            "select distinct judge from judge_grades where run_id = $run order by judge",
            {"run": run_id},
        ).rows
        known = ", ".join(str(row[0]) for row in judged) or "none"
        raise OwnloopError(
            f"judge {judge!r} has no verdict on {missing} of {len(units)} units of run "
            f"'{run_id}' (judges of that run: {known}): judge them first with "
            f"ownloop judge --run {run_id} --judge {judge} ..., or score with --grader rule"
        )
    return out


def score_line(store: Store, run_id: str) -> str | None:
    """How the run did, as the dashboard's headline says it: its pass rate over its scored
    units with the task-clustered 95% interval, errored units counted as failures (named);
    None when nothing of it is graded."""
    rows = store.sql(
        "select sessions, score, ci_low, ci_high, errored, tasks from run_scores "
        "where run_id = $run and method = 'task_bootstrap'",
        {"run": run_id},
    ).rows
    if not rows:
        return None
    units, score, low, high, errored, tasks = rows[0]
    passes = round(score * units)
    errors = store.sql(
        "select status, count(*) from unit_outcomes where run_id = $run and errored "
        "group by status order by count(*) desc, status",
        {"run": run_id},
    ).rows
    counted = (
        "; " + ", ".join(f"{n} {status}" for status, n in errors) + " counted as failures"
        if errored
        else ""
    )
    return (
        f"passed {passes}/{units} units: {score:.3f} (95% task-clustered interval "
        f"{low:.3f} to {high:.3f} over {tasks} tasks{counted})"
    )
