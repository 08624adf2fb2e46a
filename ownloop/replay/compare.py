"""Two runs of the same tasks compared: per task, the paired difference, and where they split.

Each run's scored units (``scored_units``: one per task and repeat) give a task's pass rate. Over
the tasks both runs graded: the mean of B's rate minus A's with a paired bootstrap interval, and
McNemar's exact test on whether each run solved the task (passed in more than half of its
repeats). A task **flipped** when one run solved it and the other did not. For each flipped task
a representative pair (the solving run's first passing repeat, the other run's first failing
one) is aligned step by step on what each step did: the action kinds and the element each
pointer action hit (typed text, keys, URLs and answers for the others), not the step numbers,
so one extra step does not make every later step look different. The first step where the
alignment breaks is the first divergent step.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
from collections.abc import Sequence
from typing import Any

import msgspec
from rich.table import Table
from rich.text import Text

from ownloop.replay.fold import Session, Step, fold
from ownloop.replay.render import element_text
from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.events import Action
from ownloop.store.scores import Unit, run_units
from ownloop.store.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    Interval,
    mcnemar_exact,
    paired_bootstrap,
)
from ownloop.store.text import visible

__all__ = [
    "Comparison",
    "Divergence",
    "TaskComparison",
    "compare_runs",
    "comparison_view",
    "first_divergence",
]

# What identifies a non-pointer action besides its kind.
_TEXT_FIELDS = {
    "type": "text",
    "hotkey": "keys",
    "key_down": "key",
    "key_up": "key",
    "goto": "url",
    "search": "query",
    "finish": "answer",
    "scroll": "direction",
}


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """Where the representative pair of a flipped task first parts."""

    session_a: str
    session_b: str
    step_a: int | None  # None: A has no step there (it ended)
    step_b: int | None
    did_a: str  # what that step did: "click button#ok 'OK'; type 'hi'", or "" (no step)
    did_b: str
    same_before: int  # aligned steps that agree before the divergence
    rejoined: tuple[int, int] | None = None  # (step of A, step of B) where they agree again

    def line(self) -> str:
        if self.step_a is None and self.step_b is None:
            return (
                f"the same {self.same_before} steps in {self.session_a} and "
                f"{self.session_b}: only the outcome differs"
            )
        if self.step_a is None:
            where = f"B step {self.step_b} has no counterpart in A: {self.did_b}"
        elif self.step_b is None:
            where = f"A step {self.step_a} has no counterpart in B: {self.did_a}"
        else:
            where = f"A step {self.step_a} / B step {self.step_b}: {self.did_a} vs {self.did_b}"
        again = (
            ""
            if self.rejoined is None
            else f"; they agree again from A step {self.rejoined[0]} / B step {self.rejoined[1]}"
        )
        return f"first divergent step {where}{again} ({self.session_a} vs {self.session_b})"


class TaskComparison(msgspec.Struct, frozen=True, kw_only=True):
    """One task in both runs (n = 0 where a run has no graded unit of it)."""

    task_id: str
    n_a: int
    passes_a: int
    n_b: int
    passes_b: int
    divergence: Divergence | None = None

    @property
    def rate_a(self) -> float | None:
        return self.passes_a / self.n_a if self.n_a else None

    @property
    def rate_b(self) -> float | None:
        return self.passes_b / self.n_b if self.n_b else None

    @property
    def shared(self) -> bool:
        return bool(self.n_a and self.n_b)

    @property
    def solved_a(self) -> bool:
        return 2 * self.passes_a > self.n_a

    @property
    def solved_b(self) -> bool:
        return 2 * self.passes_b > self.n_b

    @property
    def flipped(self) -> bool:
        return self.shared and self.solved_a != self.solved_b


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Run B against run A."""

    run_a: str
    run_b: str
    tasks: tuple[TaskComparison, ...]
    difference: Interval  # B - A: mean over shared tasks of the pass rate difference
    only_a: int  # shared tasks only A solved
    only_b: int
    p_value: float  # McNemar's exact test over the shared tasks
    flip_rate_a: float  # tasks whose repeats disagree, within run A
    flip_rate_b: float

    @property
    def shared(self) -> list[TaskComparison]:
        return [t for t in self.tasks if t.shared]

    @property
    def flipped(self) -> list[TaskComparison]:
        return [t for t in self.tasks if t.flipped]

    def worse_than(self, delta: float) -> bool:
        """B is worse than A by more than ``delta`` with confidence: the interval's upper
        bound of B - A is below -delta."""
        return self.difference.high < -delta

    def score_lines(self) -> list[str]:
        """The summary, one line each."""
        lines = []
        for name, run in (("A", self.run_a), ("B", self.run_b)):
            n = sum(t.n_a if name == "A" else t.n_b for t in self.tasks)
            passes = sum(t.passes_a if name == "A" else t.passes_b for t in self.tasks)
            tasks = sum(1 for t in self.tasks if (t.n_a if name == "A" else t.n_b))
            rate = self.flip_rate_a if name == "A" else self.flip_rate_b
            lines.append(
                f"{name} {visible(run, one_line=True)}: {passes}/{n} sessions passed "
                f"({passes / n:.3f}) over {tasks} tasks; repeats disagree on "
                f"{rate:.0%} of its tasks"
            )
        d = self.difference
        lines.append(
            f"B - A: {d.estimate:+.3f} (95% paired bootstrap {d.low:+.3f} to "
            f"{d.high:+.3f}; {BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED}) "
            f"over {len(self.shared)} shared tasks"
        )
        lines.append(
            f"McNemar exact over tasks: solved only by A {self.only_a}, only by B "
            f"{self.only_b}, p = {self.p_value:.4g}"
        )
        lonely = len(self.tasks) - len(self.shared)
        if lonely:
            lines.append(f"{lonely} tasks graded in one run only are left out of B - A")
        lines.append(f"{len(self.flipped)} tasks flipped")
        for task in self.flipped:
            side = "A" if task.solved_a else "B"
            where = task.divergence.line() if task.divergence is not None else ""
            lines.append(
                visible(f"  {task.task_id}: solved by {side} only; {where}", one_line=True)
            )
        return lines

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "difference": self.difference._asdict(),
            "resamples": BOOTSTRAP_RESAMPLES,
            "seed": BOOTSTRAP_SEED,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "p_value": self.p_value,
            "flip_rate_a": self.flip_rate_a,
            "flip_rate_b": self.flip_rate_b,
            "tasks": [_task_record(t) for t in self.tasks],
            "flipped": [t.task_id for t in self.flipped],
        }
        return json.dumps(data, indent=2, ensure_ascii=False)

    def to_csv(self) -> str:
        out = io.StringIO()
        records = [_task_record(t) for t in self.tasks]
        columns = [
            "task_id",
            "n_a",
            "passes_a",
            "rate_a",
            "n_b",
            "passes_b",
            "rate_b",
            "delta",
            "flipped",
            "session_a",
            "session_b",
            "step_a",
            "step_b",
            "did_a",
            "did_b",
        ]
        writer = csv.DictWriter(out, columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        for record in records:
            divergence = record.pop("divergence") or {}
            writer.writerow({**record, **{k: divergence.get(k) for k in columns[9:]}})
        return out.getvalue()


def _task_record(task: TaskComparison) -> dict[str, Any]:
    delta = None if not task.shared else task.passes_b / task.n_b - task.passes_a / task.n_a
    return {
        "task_id": task.task_id,
        "n_a": task.n_a,
        "passes_a": task.passes_a,
        "rate_a": task.rate_a,
        "n_b": task.n_b,
        "passes_b": task.passes_b,
        "rate_b": task.rate_b,
        "delta": delta,
        "flipped": task.flipped,
        "divergence": None if task.divergence is None else msgspec.to_builtins(task.divergence),
    }


# ------------------------------------------------------------------ aligning two sessions
def _did(action: Action, step: Step, idx: int) -> str:
    """What one action did: its kind and the element its pointer operation hit, or its text."""
    kind = str(type(action).__struct_config__.tag)
    element = next(
        (e.element for e in step.effects if e.action_idx == idx and e.element is not None), None
    )
    if element is not None:
        return f"{kind} {element_text(element)}"
    field = _TEXT_FIELDS.get(kind)
    value = getattr(action, field, None) if field else None
    if isinstance(value, tuple):
        value = "+".join(map(str, value))
    return kind if value is None else f"{kind} {visible(value, 60, one_line=True)!r}"


def _signature(step: Step) -> str:
    if not step.actions:
        return "no action"
    return "; ".join(_did(action, step, idx) for idx, action in enumerate(step.actions))


def first_divergence(a: Session, b: Session) -> Divergence:
    """Where two sessions first part, their steps aligned on what each step did."""
    sig_a = [_signature(s) for s in a.steps]
    sig_b = [_signature(s) for s in b.steps]
    blocks = difflib.SequenceMatcher(None, sig_a, sig_b, autojunk=False).get_opcodes()
    start = next((i for i, block in enumerate(blocks) if block[0] != "equal"), None)
    if start is None:
        return Divergence(
            session_a=a.session_id,
            session_b=b.session_id,
            step_a=None,
            step_b=None,
            did_a="",
            did_b="",
            same_before=len(sig_a),
        )
    tag, i1, _, j1, _ = blocks[start]
    rejoined = next(
        (
            (a.steps[i].step, b.steps[j].step)
            for kind, i, _, j, _ in blocks[start:]
            if kind == "equal"
        ),
        None,
    )
    # "insert": B's steps from j1 have no counterpart in A; "delete": the other way round
    in_a = tag != "insert" and i1 < len(sig_a)
    in_b = tag != "delete" and j1 < len(sig_b)
    return Divergence(
        session_a=a.session_id,
        session_b=b.session_id,
        step_a=a.steps[i1].step if in_a else None,
        step_b=b.steps[j1].step if in_b else None,
        did_a=sig_a[i1] if in_a else "",
        did_b=sig_b[j1] if in_b else "",
        same_before=i1,
        rejoined=rejoined,
    )


# ------------------------------------------------------------------ the comparison
def _by_task(units: Sequence[Unit]) -> dict[str, list[Unit]]:
    tasks: dict[str, list[Unit]] = {}
    for unit in units:
        tasks.setdefault(unit.task_id, []).append(unit)
    return tasks


def _load(store: Store, session_id: str) -> Session:
    return fold(store.session_events(session_id), session_id)


def _flip_rate(tasks: dict[str, list[Unit]]) -> float:
    mixed = sum(1 for units in tasks.values() if len({u.passed for u in units}) > 1)
    return mixed / len(tasks) if tasks else 0.0


def compare_runs(store: Store, run_a: str, run_b: str) -> Comparison:
    """Compare run B with run A over their graded scored units.

    Raises:
        OwnloopError: a run has no graded scored session.
    """
    tasks_a: dict[str, list[Unit]] = {}
    tasks_b: dict[str, list[Unit]] = {}
    for run, into in ((run_a, tasks_a), (run_b, tasks_b)):
        units = run_units(store, run)
        if not units:
            raise OwnloopError(
                f"run '{run}' has no graded scored sessions in {store.root}. List runs with: "
                'ownloop sql "select run_id, sessions from runs"'
            )
        into.update(_by_task(units))
    rows = []
    for task_id in sorted(tasks_a.keys() | tasks_b.keys()):
        a, b = tasks_a.get(task_id, []), tasks_b.get(task_id, [])
        row = TaskComparison(
            task_id=task_id,
            n_a=len(a),
            passes_a=sum(u.passed for u in a),
            n_b=len(b),
            passes_b=sum(u.passed for u in b),
        )
        if row.flipped:
            # the solving run's first passing repeat against the other's first failing one
            pick_a = next(u for u in a if u.passed == row.solved_a)
            pick_b = next(u for u in b if u.passed == row.solved_b)
            row = msgspec.structs.replace(
                row,
                divergence=first_divergence(
                    _load(store, pick_a.session_id), _load(store, pick_b.session_id)
                ),
            )
        rows.append(row)
    shared = [r for r in rows if r.shared]
    pairs = [
        ([u.passed for u in tasks_a[r.task_id]], [u.passed for u in tasks_b[r.task_id]])
        for r in shared
    ]
    only_a = sum(1 for r in shared if r.solved_a and not r.solved_b)
    only_b = sum(1 for r in shared if r.solved_b and not r.solved_a)
    return Comparison(
        run_a=run_a,
        run_b=run_b,
        tasks=tuple(rows),
        difference=paired_bootstrap(pairs),
        only_a=only_a,
        only_b=only_b,
        p_value=mcnemar_exact(only_a, only_b),
        flip_rate_a=_flip_rate(tasks_a),
        flip_rate_b=_flip_rate(tasks_b),
    )


def _rate(passes: int, n: int) -> str:
    return "-" if not n else f"{passes}/{n} {passes / n:.2f}"


def comparison_view(result: Comparison) -> Table:
    """A table of the tasks, recorded text shown literally (the summary: ``score_lines``)."""
    table = Table(
        title=Text(visible(f"A {result.run_a}  vs  B {result.run_b}", one_line=True)),
        header_style="bold",
    )
    for name in ("task", "A passed", "B passed", "B - A", "flipped", "first divergent step"):
        table.add_column(Text(name), overflow="fold")
    for task in result.tasks:
        delta = (
            "" if not task.shared else f"{task.passes_b / task.n_b - task.passes_a / task.n_a:+.2f}"
        )
        step = (
            ""
            if task.divergence is None
            else f"A {task.divergence.step_a or '-'} / B {task.divergence.step_b or '-'}"
        )
        table.add_row(
            Text(visible(task.task_id, one_line=True)),
            Text(_rate(task.passes_a, task.n_a)),
            Text(_rate(task.passes_b, task.n_b)),
            Text(delta),
            Text("yes" if task.flipped else ""),
            Text(step),
        )
    return table
