"""Run scores the index keeps, and the outcomes ``compare`` reads: SQL over ``scored_units``.

The task-clustered bootstrap of ``run_scores`` is computed in Python (``stats.py``), not in
SQL: DuckDB's ``random()`` cannot be seeded inside a view and its ``hash()`` is not promised
stable across releases, while ``random.Random(seed)`` is. So each sync recomputes, into the
``score_bootstraps`` table, the runs whose units changed (new sessions, a regrade): a digest of
a run's units says which. A sync that changed nothing recomputes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ownloop.store.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, clustered_bootstrap

if TYPE_CHECKING:
    import duckdb

    from ownloop.store import Store

__all__ = ["Unit", "refresh_bootstraps", "run_units"]

_DIGESTS = (
    "select run_id, md5(string_agg(task_id || chr(0) || repeat || chr(0) || passed, chr(1) "
    "order by task_id, repeat)) from scored_units where passed is not null group by run_id"
)


def refresh_bootstraps(con: duckdb.DuckDBPyConnection) -> int:
    """Recompute the bootstrap of every run whose graded units changed; returns how many."""
    digests = dict(con.execute(_DIGESTS).fetchall())
    stored = dict(con.execute("select run_id, units_md5 from score_bootstraps").fetchall())
    changed = sorted(run for run, digest in digests.items() if stored.get(run) != digest)
    gone = sorted(stored.keys() - digests.keys())
    if not changed and not gone:
        return 0
    rows = con.execute(
        "select run_id, task_id, list(passed order by repeat) from scored_units "
        "where passed is not null and list_contains($runs::varchar[], run_id) "
        "group by run_id, task_id order by run_id, task_id",
        {"runs": changed},
    ).fetchall()
    by_run: dict[str, list[list[bool]]] = {}
    for run, _, outcomes in rows:
        by_run.setdefault(run, []).append(outcomes)
    con.begin()
    con.execute(
        "delete from score_bootstraps where list_contains($runs::varchar[], run_id)",
        {"runs": changed + gone},
    )
    for run in changed:
        tasks = by_run.get(run, [])
        interval = clustered_bootstrap(tasks)
        con.execute(
            "insert into score_bootstraps values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            ],
        )
    con.commit()
    return len(changed)


class Unit(NamedTuple):
    """One scored unit of a run: a task's repeat, its session and whether it passed."""

    task_id: str
    repeat: int
    session_id: str
    passed: bool


def run_units(store: Store, run_id: str) -> list[Unit]:
    """The graded scored units of ``run_id`` (see the ``scored_units`` view), by task and
    repeat."""
    rows = store.sql(
        "select task_id, repeat, session_id, passed from scored_units "
        "where run_id = $run and passed is not null order by task_id, repeat",
        {"run": run_id},
    ).rows
    return [Unit(str(t), int(r), str(s), bool(p)) for t, r, s, p in rows]
