"""A re-execution's summary: steps identical out of compared, both grades, where it diverged."""

from __future__ import annotations

from typing import NamedTuple

from ownloop.replay.execute import Replayed
from ownloop.replay.fidelity import RUNGS
from ownloop.replay.fold import Session
from ownloop.store.queries import sql_command

__all__ = ["Identical", "steps_identical", "summary_text"]


def _grade_text(session: Session) -> str:
    grade = session.latest_grade
    verdict = (
        "ungraded"
        if grade is None
        else f"{'pass' if grade.passed else 'fail'} {grade.score:.2f} ({grade.grader})"
    )
    return f"{session.status}, {verdict}"


def _served_text(child: Session) -> str:
    counts: dict[str, int] = {}
    for step in child.steps:
        for call in step.calls:
            how = call.served_by or "live"
            counts[how] = counts.get(how, 0) + 1
    return ", ".join(f"{n} {how}" for how, n in sorted(counts.items()))


def _rungs_text(replayed: Replayed) -> str:
    """A guarded replay's operations by rung, and where it stopped, forked or re-targeted."""
    measured = [step.fidelity for step in replayed.child.steps if step.fidelity is not None]
    counts = {rung: sum(getattr(m, f"{rung}_ops") for m in measured) for rung in RUNGS}
    if not any(m.rung for m in measured) and not replayed.checks:
        return ""
    text = "operations: " + ", ".join(f"{n} {rung}" for rung, n in counts.items())
    failed = [
        c
        for c in replayed.checks
        if c.check == "element" and c.rung != "exact" and c.rung != "same_target"
    ]
    acted = {
        "stop": "stopped",
        "fork": "forked to the live model",
        "retarget": "re-targeted",
        "ignore": "acted at the recorded point",
    }
    for check in failed[:10]:
        how = acted.get(check.on_diverge, check.on_diverge)
        if check.on_diverge == "retarget":
            how = (
                f"re-targeted ({check.match})"
                if check.match != "none"
                else "not found again, acted at the recorded point"
            )
        text += f"\n  step {check.step} op {check.idx}: {check.reason}; {how}"
    return text


class Identical(NamedTuple):
    """How many of a re-execution's steps were the same as its parent's, out of compared."""

    same: int
    compared: int
    first_divergent: int | None  # the first step that was not, if any


def steps_identical(parent: Session, child: Session) -> Identical:
    """The child's steps the same as the parent's, out of those compared: the measured ones, and
    for a replay that is no fork every parent step (one the child never reached diverged)."""
    measured = [step.fidelity for step in child.steps if step.fidelity is not None]
    compared = len(measured)
    if child.fork_step is None:
        compared = max(compared, len(parent.steps))
    same = sum(1 for fidelity in measured if not fidelity.diverged)
    first = child.first_divergence
    if first is None and same < compared:
        first = len(measured) + 1
    return Identical(same, compared, first)


def summary_text(replayed: Replayed) -> str:
    """One screen: steps identical out of compared, the first divergent step, both grades, the
    child's id, a line per divergent step (at most 10) and the query that shows them all."""
    parent, child = replayed.parent, replayed.child
    same, compared, first = steps_identical(parent, child)
    measured = [step.fidelity for step in child.steps if step.fidelity is not None]
    exact = sum(1 for fidelity in measured if fidelity.screenshot_identical)
    mode = child.replay_mode or "?"
    lines = [
        f"replay {mode} of {parent.session_id} ({parent.task_id}) -> {child.session_id}",
        f"steps identical: {same}/{compared} ({exact} byte-identical screenshots)   "
        f"first divergent step: {first if first is not None else 'none'}",
        f"parent: {_grade_text(parent)}",
        f"child:  {_grade_text(child)}",
    ]
    if child.fork_step is not None:
        lines.append(
            f"forked at step {child.fork_step}: steps before it from the cassette, "
            f"the rest live ({len(child.steps)} steps)"
        )
    rungs = _rungs_text(replayed)
    if rungs:
        lines.append(rungs)
    served = _served_text(child)
    if served:
        lines.append(f"model calls: {served}")
    if child.outcome is not None and child.outcome.error:
        lines.append(f"error: {child.outcome.error}")
    shown = 0
    for step in child.steps:
        fidelity = step.fidelity
        if fidelity is None or not fidelity.diverged or shown >= 10:
            continue
        shown += 1
        picture = (
            "identical"
            if fidelity.screenshot_identical
            else (
                "other size"
                if fidelity.pixel_diff is None
                else f"{fidelity.pixel_diff:.2%} differs"
            )
        )
        element = {None: "-", True: "same", False: "other"}[fidelity.element_equal]
        lines.append(
            f"  step {step.step}: screenshot {picture}, url "
            f"{'same' if fidelity.url_equal else 'other'}, element {element}"
        )
    lines.append(
        "query: "
        + sql_command("select * from fidelity where session_id = $id", id=child.session_id)
    )
    return "\n".join(lines)
