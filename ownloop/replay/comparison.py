"""What ``compare`` found, and how it is printed: the per-task rows, each run's side, the
summary lines, CSV, JSON and the table (``compare.py`` computes it; docs/statistics.md says
what every figure is)."""

from __future__ import annotations

import csv
import io
import json
from fractions import Fraction
from typing import Any, Literal

import msgspec
from rich.table import Table
from rich.text import Text

from ownloop.replay.agreement import JudgeReport
from ownloop.replay.align import Divergence
from ownloop.scoring.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Interval
from ownloop.store.text import visible

__all__ = [
    "MIN_TASKS",
    "Comparison",
    "ErrorPolicy",
    "JudgeAgreement",
    "RunSide",
    "TaskComparison",
    "comparison_view",
    "plural",
]

ErrorPolicy = Literal["fail", "exclude", "refuse"]
MIN_TASKS = 5  # below this many shared tasks the gate refuses to pass


# how a run's errored units ended, said of them all when they share one status
_ENDED = {"missing": "were never run", "unfinished": "never ended"}


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class TaskComparison(msgspec.Struct, frozen=True, kw_only=True):
    """One task in both runs (n = 0 where a run has no scored unit of it)."""

    task_id: str
    n_a: int
    passes_a: int
    n_b: int
    passes_b: int
    errored_a: int = 0  # of n_a: errored units counted as failures
    errored_b: int = 0
    p_value: float | None = None  # Fisher's exact test on the task's two runs (shared only)
    p_holm: float | None = None  # the same, Holm-corrected over the shared tasks
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
        """Solved by one run only (not the within-run flip of repeats that disagree)."""
        return self.shared and self.solved_a != self.solved_b

    @property
    def delta(self) -> Fraction | None:
        if not self.shared:
            return None
        return Fraction(self.passes_b, self.n_b) - Fraction(self.passes_a, self.n_a)


class JudgeAgreement(msgspec.Struct, frozen=True, kw_only=True):
    """A model judge's verdicts on one of the runs, measured against the rule graders."""

    run_id: str
    report: JudgeReport

    def line(self, side: str) -> str:
        r, k = self.report, self.report.kappa
        if k.n == 0:
            against = "no session with both a rule grade and a verdict"
        else:
            kappa = (
                "kappa n/a (no variation)"
                if k.kappa is None
                else f"kappa {k.kappa:+.2f} ({k.low:+.2f} to {k.high:+.2f})"
            )
            against = f"agrees with the rule graders on {k.observed:.3f} of {k.n}, {kappa}"
        return visible(
            f"{side}: judge {r.judge} passed {r.passed}/{r.sessions} sessions; {against}",
            one_line=True,
        )

    def record(self) -> dict[str, Any]:
        r, k = self.report, self.report.kappa
        return {
            "run_id": self.run_id,
            "judge": r.judge,
            "sessions": r.sessions,
            "passed": r.passed,
            "repeats": r.repeats,
            "pairs": k.n,
            "observed": k.observed if k.n else None,
            "kappa": k.kappa,
            "kappa_low": k.low,
            "kappa_high": k.high,
            "confusion": [k.both_pass, k.rule_only, k.judge_only, k.both_fail],
        }


class RunSide(msgspec.Struct, frozen=True, kw_only=True):
    """What one run brought: its units, the errored ones by status, and the seal's view."""

    run_id: str
    units: int  # scored units counted (errored ones included under errors="fail")
    passes: int
    tasks: int
    repeats: int  # the most repeats a task has
    errored: dict[str, int]  # status -> errored units (whatever the policy did with them)
    planned: int  # graded + errored units
    flip_rate: float  # tasks whose graded repeats disagree
    incomplete: tuple[str, ...] = ()  # why the seal's completeness audit would refuse the run


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Run B against run A."""

    run_a: str
    run_b: str
    side_a: RunSide
    side_b: RunSide
    errors: ErrorPolicy
    tasks: tuple[TaskComparison, ...]
    difference: Interval  # B - A: mean over shared tasks, the paired bootstrap over tasks
    paired_t: Interval  # the same mean with the paired t interval (the gate's)
    se: float  # Miller's paired standard error: s / sqrt(n)
    only_a: int  # shared tasks only A solved
    only_b: int
    test: str  # "sign_flip" (repeats) or "mcnemar" (one repeat each)
    p_value: float
    exact: bool  # False: the sign-flip p is a seeded Monte Carlo estimate
    split_expected: float  # tasks expected solved by one run only with no difference
    min_tasks: int = MIN_TASKS
    grader: str = "rule"  # whose grades scored the units: "rule" or "judge:NAME"
    judges: tuple[JudgeAgreement, ...] = ()  # per run, the model judges that judged it

    @property
    def flip_rate_a(self) -> float:
        return self.side_a.flip_rate

    @property
    def flip_rate_b(self) -> float:
        return self.side_b.flip_rate

    @property
    def shared(self) -> list[TaskComparison]:
        return [t for t in self.tasks if t.shared]

    @property
    def flipped(self) -> list[TaskComparison]:
        return [t for t in self.tasks if t.flipped]

    def worse_than(self, delta: float) -> bool:
        """B is worse than A by more than ``delta`` with confidence: the paired t interval's
        upper bound of B - A is below -delta."""
        return self.paired_t.high < -delta

    def gate(self, delta: float, *, check_complete: bool) -> list[str]:
        """Why ``--fail-if-worse delta`` fails: B worse, too few shared tasks, or (when
        ``check_complete``) a run the seal's completeness audit would refuse; empty: it passes."""
        reasons = []
        if self.worse_than(delta):
            reasons.append(
                f"B is worse than A by more than {delta} with confidence: the paired t "
                f"interval of B - A ends at {self.paired_t.high:+.3f} < {-delta}"
            )
        if len(self.shared) < self.min_tasks:
            reasons.append(
                f"only {plural(len(self.shared), 'shared task')}, fewer than --min-tasks "
                f"{self.min_tasks}: too few to tell a change from noise"
            )
        if check_complete:
            for name, side in (("A", self.side_a), ("B", self.side_b)):
                if side.incomplete:
                    reasons.append(
                        f"{name} {side.run_id} would fail the seal's completeness audit: "
                        f"{side.incomplete[0]}"
                        + (
                            f" (and {len(side.incomplete) - 1} more)"
                            if len(side.incomplete) > 1
                            else ""
                        )
                        + "; record the rest, or pass --errors exclude to gate on what was graded"
                    )
        return reasons

    def _side_lines(self) -> list[str]:
        lines = []
        for name, side in (("A", self.side_a), ("B", self.side_b)):
            rate = f"{side.passes / side.units:.3f}" if side.units else "-"
            disagree = (
                f"repeats disagree on {side.flip_rate:.0%} of its tasks"
                if side.repeats > 1
                else "one repeat per task"
            )
            lines.append(
                f"{name} {visible(side.run_id, one_line=True)}: {side.passes}/{side.units} "
                f"units passed ({rate}) over {plural(side.tasks, 'task')}; {disagree}"
            )
            errored = sum(side.errored.values())
            if errored:
                how = {
                    "fail": "counted as failures",
                    "exclude": "left out (--errors exclude)",
                    "refuse": "refused",
                }[self.errors]
                kinds = sorted(side.errored.items(), key=lambda kv: (-kv[1], kv[0]))
                ended = (
                    _ENDED.get(kinds[0][0], f"ended {kinds[0][0]}")
                    if len(kinds) == 1
                    else "had no graded session ("
                    + ", ".join(f"{n} {status}" for status, n in kinds)
                    + ")"
                )
                lines.append(f"{name}: {errored} of {side.planned} units {ended}, {how}")
        return lines

    def score_lines(self) -> list[str]:
        """The summary, one line each."""
        lines = []
        if self.grader != "rule":
            lines.append(
                f"scored by {self.grader.replace(':', ' ', 1)} (the majority of its verdicts on "
                "each session), not the rule graders"
            )
        lines.extend(self._side_lines())
        for agreement in self.judges:
            side = "A" if agreement.run_id == self.run_a else "B"
            lines.append(agreement.line(side))
        shared = self.shared
        n = len(shared)
        mean_a = sum(t.passes_a / t.n_a for t in shared) / n
        mean_b = sum(t.passes_b / t.n_b for t in shared) / n
        lines.append(
            f"over the {plural(n, 'shared task')} (mean of the tasks' pass rates): "
            f"A {mean_a:.3f}, B {mean_b:.3f}"
        )
        d, t, b = self.difference, self.paired_t, self.difference
        flat = " (no variation over " + plural(n, "task") + ")" if t.low == t.high else ""
        lines.append(
            f"B - A: {d.estimate:+.3f}, 95% paired t {t.low:+.3f} to {t.high:+.3f}{flat} "
            f"(Miller's paired SE {self.se:.3f}, t with {max(n - 1, 0)} df; the gate's); "
            f"paired bootstrap over tasks {b.low:+.3f} to {b.high:+.3f} "
            f"({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED})"
        )
        if self.test == "mcnemar":
            lines.append(
                f"McNemar exact over tasks: solved only by A {self.only_a}, only by B "
                f"{self.only_b}, p = {self.p_value:.4g}"
            )
        else:
            how = "exact" if self.exact else "seeded Monte Carlo"
            lines.append(
                f"sign-flip permutation test over the tasks' differences ({how}): "
                f"p = {self.p_value:.4g}"
            )
        lonely = len(self.tasks) - n
        if lonely:
            lines.append(
                f"{plural(lonely, 'task')} scored in one run only "
                f"{'is' if lonely == 1 else 'are'} left out of B - A"
            )
        lines.append(
            f"{plural(len(self.flipped), 'task')} solved by one run only "
            f"(expected with no change: {self.split_expected:.1f})"
        )
        for task in self.flipped:
            side = "A" if task.solved_a else "B"
            where = (
                f"; {task.divergence.line()}"
                if task.divergence is not None
                else "; no graded pair to align (errored units)"
            )
            lines.append(
                visible(
                    f"  {task.task_id}: solved by {side} only (Fisher p = {task.p_value:.3g}, "
                    f"Holm {task.p_holm:.3g}){where}",
                    one_line=True,
                )
            )
        return lines

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "errors": self.errors,
            "grader": self.grader,
            "judges": [agreement.record() for agreement in self.judges],
            "difference": self.difference._asdict(),
            "resamples": BOOTSTRAP_RESAMPLES,
            "seed": BOOTSTRAP_SEED,
            "paired_t": self.paired_t._asdict(),
            "se": self.se,
            "shared_tasks": len(self.shared),
            "min_tasks": self.min_tasks,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "test": self.test,
            "p_value": self.p_value,
            "exact": self.exact,
            "split_expected": self.split_expected,
            "flip_rate_a": self.flip_rate_a,
            "flip_rate_b": self.flip_rate_b,
            "side_a": msgspec.to_builtins(self.side_a),
            "side_b": msgspec.to_builtins(self.side_b),
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
            "errored_a",
            "n_b",
            "passes_b",
            "rate_b",
            "errored_b",
            "delta",
            "flipped",
            "p_value",
            "p_holm",
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
            writer.writerow({**record, **{k: divergence.get(k) for k in columns[13:]}})
        return out.getvalue()


def _task_record(task: TaskComparison) -> dict[str, Any]:
    delta = task.delta
    return {
        "task_id": task.task_id,
        "n_a": task.n_a,
        "passes_a": task.passes_a,
        "rate_a": task.rate_a,
        "errored_a": task.errored_a,
        "n_b": task.n_b,
        "passes_b": task.passes_b,
        "rate_b": task.rate_b,
        "errored_b": task.errored_b,
        "delta": None if delta is None else float(delta),
        "flipped": task.flipped,
        "p_value": task.p_value,
        "p_holm": task.p_holm,
        "divergence": None if task.divergence is None else msgspec.to_builtins(task.divergence),
    }


def _rate(passes: int, n: int) -> str:
    return "-" if not n else f"{passes}/{n} {passes / n:.2f}"


def comparison_view(result: Comparison) -> Table:
    """A table of the tasks, recorded text shown literally (the summary: ``score_lines``)."""
    table = Table(
        title=Text(visible(f"A {result.run_a}  vs  B {result.run_b}", one_line=True)),
        header_style="bold",
    )
    for name in ("task", "A passed", "B passed", "B - A", "one run only", "first divergent step"):
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
