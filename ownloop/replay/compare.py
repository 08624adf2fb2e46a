"""Two runs of the same tasks compared: per task, the paired difference, and where they split.

Each run's scored units (``unit_outcomes``: one per task and repeat it planned) give a task's
pass rate; an errored unit (its sessions ended with no grade, or it has none) is a failure by
default (``errors="fail"``), left out with ``"exclude"``, and refused with ``"refuse"``. Over
the tasks both runs scored: the mean of B's rate minus A's with the paired t interval (Miller's
paired standard error; the gate) and a paired bootstrap over tasks beside it, and a test of no
difference: the exact sign-flip permutation test on the tasks' differences when a run has
repeats, McNemar's exact test on whether each run solved the task when both have one. A task
is **split** when one run solved it (passed in more than half of its repeats) and the other did
not; beside their count, how many identical runs would split (each task's outcomes shuffled
between the runs) and each split task's Fisher exact p with Holm's correction. For each split
task a representative pair (the solving run's first passing repeat, the other run's first
failing one) is aligned step by step (``align.py``): its first divergent step.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import msgspec

from ownloop.errors import OwnloopError
from ownloop.replay.agreement import reports_of
from ownloop.replay.align import Divergence, first_divergence
from ownloop.replay.comparison import (
    MIN_TASKS,
    Comparison,
    ErrorPolicy,
    JudgeAgreement,
    RunSide,
    TaskComparison,
    comparison_view,
    plural,
)
from ownloop.replay.fold import Session, fold
from ownloop.scoring.paired import (
    TaskTable,
    fisher_exact,
    holm,
    paired_t,
    sign_flip_test,
    split_expected,
)
from ownloop.scoring.stats import mcnemar_exact, paired_bootstrap
from ownloop.store import Store
from ownloop.store.queries import run_judge_verdicts
from ownloop.store.scores import Unit, grader_judge, judge_units, run_units
from ownloop.store.seal import completeness_reasons

__all__ = [
    "MIN_TASKS",
    "Comparison",
    "Divergence",
    "ErrorPolicy",
    "TaskComparison",
    "compare_runs",
    "comparison_view",
    "first_divergence",
]


# ------------------------------------------------------------------ the comparison
def _by_task(units: Sequence[Unit]) -> dict[str, list[Unit]]:
    tasks: dict[str, list[Unit]] = {}
    for unit in units:
        tasks.setdefault(unit.task_id, []).append(unit)
    return tasks


def _load(store: Store, session_id: str) -> Session:
    return fold(store.session_events(session_id), session_id)


def _flip_rate(tasks: dict[str, list[Unit]]) -> float:
    graded = [[u.passed for u in units if not u.errored] for units in tasks.values()]
    mixed = sum(1 for outcomes in graded if len(set(outcomes)) > 1)
    return mixed / len(tasks) if tasks else 0.0


def _side(
    store: Store, run: str, errors: ErrorPolicy, judge: str | None = None
) -> tuple[RunSide, dict[str, list[Unit]]]:
    """One run's units under the error policy, scored by the rule graders (``judge`` None) or
    by a model judge's verdicts, and what it brought."""
    units = run_units(store, run) if judge is None else judge_units(store, run, judge)
    if not any(not u.errored for u in units):
        raise OwnloopError(
            f"run '{run}' has no graded scored sessions in {store.root}. List runs with: "
            'ownloop sql "select run_id, sessions from runs"'
        )
    errored = Counter(u.status for u in units if u.errored)
    if errors == "refuse" and errored:
        kinds = ", ".join(f"{n} {status}" for status, n in sorted(errored.items()))
        raise OwnloopError(
            f"run '{run}' has {sum(errored.values())} of {len(units)} units with no graded "
            f"session ({kinds}) and --errors refuse was given: resume the run to record them, "
            "or compare with --errors fail (count them as failures) or --errors exclude"
        )
    kept = [u for u in units if not (errors == "exclude" and u.errored)]
    tasks = _by_task(kept)
    side = RunSide(
        run_id=run,
        units=len(kept),
        passes=sum(u.passed for u in kept),
        tasks=len(tasks),
        repeats=max((len(v) for v in _by_task(units).values()), default=1),
        errored=dict(errored),
        planned=len(units),
        flip_rate=_flip_rate(_by_task([u for u in units if not u.errored])),
        incomplete=tuple(completeness_reasons(store, run)),
    )
    return side, tasks


def _row(task_id: str, a: list[Unit], b: list[Unit]) -> TaskComparison:
    return TaskComparison(
        task_id=task_id,
        n_a=len(a),
        passes_a=sum(u.passed for u in a),
        n_b=len(b),
        passes_b=sum(u.passed for u in b),
        errored_a=sum(u.errored for u in a),
        errored_b=sum(u.errored for u in b),
    )


def compare_runs(
    store: Store,
    run_a: str,
    run_b: str,
    *,
    errors: ErrorPolicy = "fail",
    min_tasks: int = MIN_TASKS,
    grader: str = "rule",
) -> Comparison:
    """Compare run B with run A over their scored units (errored ones as ``errors`` says),
    scored by ``grader``: ``rule`` (the rule graders) or ``judge:NAME`` (a model judge).

    Raises:
        OwnloopError: a bad ``grader``, a run has no graded scored session (or, under a judge,
            a session the judge has not judged), the runs share no task, or a run has errored
            units and ``errors`` is "refuse".
    """
    judge = grader_judge(grader)
    side_a, tasks_a = _side(store, run_a, errors, judge)
    side_b, tasks_b = _side(store, run_b, errors, judge)
    common = tasks_a.keys() & tasks_b.keys()
    if not common:
        raise OwnloopError(
            f"runs '{run_a}' and '{run_b}' share no scored task ({run_a}: "
            f"{plural(len(tasks_a), 'task')}, {run_b}: {plural(len(tasks_b), 'task')}): "
            "compare runs of the same tasks"
        )
    rows = [
        _row(t, tasks_a.get(t, []), tasks_b.get(t, []))
        for t in sorted(tasks_a.keys() | tasks_b.keys())
    ]
    shared = [r for r in rows if r.shared]
    tables = [TaskTable(r.passes_a, r.n_a, r.passes_b, r.n_b) for r in shared]
    fisher = [fisher_exact(t) for t in tables]
    adjusted = dict(
        zip((r.task_id for r in shared), zip(fisher, holm(fisher), strict=True), strict=True)
    )
    rows = [
        msgspec.structs.replace(r, p_value=adjusted[r.task_id][0], p_holm=adjusted[r.task_id][1])
        if r.task_id in adjusted
        else r
        for r in rows
    ]
    rows = [_with_divergence(store, r, tasks_a, tasks_b) for r in rows]
    shared = [r for r in rows if r.shared]
    pairs = [
        ([u.passed for u in tasks_a[r.task_id]], [u.passed for u in tasks_b[r.task_id]])
        for r in shared
    ]
    deltas = [r.delta for r in shared if r.delta is not None]
    t_interval = paired_t([float(d) for d in deltas])
    se = _standard_error([float(d) for d in deltas])
    only_a = sum(1 for r in shared if r.solved_a and not r.solved_b)
    only_b = sum(1 for r in shared if r.solved_b and not r.solved_a)
    repeats = max(side_a.repeats, side_b.repeats)
    if repeats > 1:
        p_value, exact = sign_flip_test(deltas)
        test = "sign_flip"
    else:
        p_value, exact, test = mcnemar_exact(only_a, only_b), True, "mcnemar"
    return Comparison(
        run_a=run_a,
        run_b=run_b,
        side_a=side_a,
        side_b=side_b,
        errors=errors,
        tasks=tuple(rows),
        difference=paired_bootstrap(pairs),
        paired_t=t_interval,
        se=se,
        only_a=only_a,
        only_b=only_b,
        test=test,
        p_value=p_value,
        exact=exact,
        split_expected=split_expected(tables),
        min_tasks=min_tasks,
        grader=grader,
        judges=_judges(store, run_a, run_b),
    )


def _judges(store: Store, *runs: str) -> tuple[JudgeAgreement, ...]:
    """Per run and model judge that judged it: the judge's agreement with the rule graders."""
    return tuple(
        JudgeAgreement(run_id=run, report=report)
        for run in dict.fromkeys(runs)
        for report in reports_of(run_judge_verdicts(store, run))
    )


def _standard_error(differences: list[float]) -> float:
    n = len(differences)
    if n < 2:
        return float("nan")
    mean = sum(differences) / n
    return math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1) / n)


def _with_divergence(
    store: Store,
    row: TaskComparison,
    tasks_a: dict[str, list[Unit]],
    tasks_b: dict[str, list[Unit]],
) -> TaskComparison:
    """A split task with its representative pair's first divergent step: the solving run's
    first passing repeat against the other's first failing one, both graded (an errored unit
    did not get as far as the agent's choices, or has no session at all): none when there is
    no such pair."""
    if not row.flipped:
        return row
    pick_a = next(
        (u for u in tasks_a[row.task_id] if u.passed == row.solved_a and not u.errored), None
    )
    pick_b = next(
        (u for u in tasks_b[row.task_id] if u.passed == row.solved_b and not u.errored), None
    )
    if pick_a is None or pick_b is None:
        return row
    divergence = first_divergence(_load(store, pick_a.session_id), _load(store, pick_b.session_id))
    return msgspec.structs.replace(row, divergence=divergence)
