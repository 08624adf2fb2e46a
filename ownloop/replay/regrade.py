"""Regrade: run graders again over rebuilt sessions, offline, and append the new grades.

The selected sessions are rebuilt in bulk from the events graders read (starts, evidence, ends and
grades; see ``selection.fold_selected``), graded with one spec for all, a spec per task from a
tasks file, or each session's own task grader, and every new ``SessionGraded`` (source
``regrade``) goes to ONE new journal stream written with a single fsync. Old grades are never
touched: ``grades`` keeps them all and ``sessions`` shows the latest, so regrading twice with the
same grader leaves ``sessions`` as it was after the first time.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from ownloop.errors import OwnloopError
from ownloop.grading import UNGRADED, make_grader
from ownloop.grading.grade import Grade, Grader
from ownloop.grading.spec import NoGrader
from ownloop.grading.verdict import graded_event, verdict_of
from ownloop.replay.fold import Session
from ownloop.replay.selection import Selection, fold_selected
from ownloop.store import Store
from ownloop.store.events import Check, SessionGraded, now
from ownloop.store.ids import SessionIds
from ownloop.store.seal import run_seals
from ownloop.world.suites.tasks_file import read_tasks

__all__ = ["Flip", "RegradeResult", "changed_checks", "graders_from_tasks_file", "regrade"]

"""Statuses that are never graded (DESIGN §5): the agent did not get to finish its work."""

_KINDS = ("session_started", "evidence_captured", "session_ended", "session_graded")


class Flip(msgspec.Struct, frozen=True):
    """A session whose verdict changed; ``before`` is None when it had no grade."""

    session_id: str
    task_id: str
    before: bool | None
    after: bool
    score_before: float | None
    score_after: float
    grader: str
    changed: tuple[str, ...] = ()  # one line per check that differs from the previous grade's


class RegradeResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a regrade did."""

    selected: int
    graded: int
    skipped: int  # not graded: an ungraded status, no end yet, or no grader for the task
    passed_before: int  # among the graded sessions, by their previous latest grade
    passed_after: int
    flips: tuple[Flip, ...] = ()
    stream: str | None = None  # the journal stream the new grades went to
    seconds: float = 0.0
    dry_run: bool = False  # the grades were computed and not appended

    def lines(self) -> list[str]:
        """The report: counts, then one line per flipped session."""
        verb = "would regrade" if self.dry_run else "regraded"
        lines = [
            f"{verb} {self.graded} of {self.selected} sessions in {self.seconds:.2f}s "
            f"({self.skipped} skipped: ungraded status, unfinished or no grader)",
            f"passed before: {self.passed_before}   passed after: {self.passed_after}   "
            f"{'would flip' if self.dry_run else 'flipped'}: {len(self.flips)}",
        ]
        for flip in self.flips:
            was = "ungraded" if flip.before is None else ("pass" if flip.before else "fail")
            now_ = "pass" if flip.after else "fail"
            score = "-" if flip.score_before is None else f"{flip.score_before:.2f}"
            lines.append(
                f"  {flip.session_id}  {flip.task_id}  {was} {score} -> {now_} "
                f"{flip.score_after:.2f}  ({flip.grader})"
            )
            lines.extend(f"    {change}" for change in flip.changed)
        if self.stream:
            lines.append(
                f"new grades in journal stream {self.stream}; earlier grades are kept "
                "in the grades view"
            )
        if self.dry_run:
            lines.append("dry run: no grade was appended")
        return lines


def changed_checks(before: tuple[Check, ...], after: tuple[Check, ...]) -> tuple[str, ...]:
    """One line per check (by name) that is new, gone, or differs in verdict, expected or actual
    value: e.g. ``status: fail, expected 201 (was 200), actual 200``."""
    old = {check.name: check for check in before}
    lines = []
    for check in after:
        was = old.pop(check.name, None)
        verdict = "pass" if check.passed else "fail"
        if was is None:
            lines.append(
                f"{check.name}: {verdict}, expected {check.expected}, actual "
                f"{check.actual} (new check)"
            )
        elif (was.passed, was.expected, was.actual_normalized or was.actual) != (
            check.passed,
            check.expected,
            check.actual_normalized or check.actual,
        ):
            expected = (
                check.expected
                if was.expected == check.expected
                else f"{check.expected} (was {was.expected})"
            )
            actual = (
                check.actual if was.actual == check.actual else f"{check.actual} (was {was.actual})"
            )
            lines.append(
                f"{check.name}: {'pass' if was.passed else 'fail'} -> {verdict}, "
                f"expected {expected}, actual {actual}"
            )
    lines.extend(
        f"{name}: gone (was {'pass' if was.passed else 'fail'}, expected {was.expected})"
        for name, was in old.items()
    )
    return tuple(lines)


def graders_from_tasks_file(path: str | Path) -> dict[str, str | None]:
    """Task id → grader spec, from a ``--tasks`` file (its ``{BASE}`` URLs are left as written).

    Raises:
        OwnloopError: the file cannot be read or is not a valid tasks file.
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise OwnloopError(f"cannot read tasks file {file}: {exc.strerror}") from None
    # Only the graders matter here: "{BASE}" as the base keeps every URL as written.
    tasks, _ = read_tasks(raw, file.name, "{BASE}", f"tasks:{file.name}")
    return {task.task_id: task.grader for task in tasks}


def _spec_for(
    session: Session, grader: str | None, tasks: dict[str, str | None] | None
) -> str | None:
    if grader is not None:
        return grader
    if tasks is not None:
        return tasks.get(session.task_id)
    return session.task.grader if session.task is not None else None


def _grade(
    store: Store, session: Session, grader: str | None, tasks: dict[str, str | None] | None
) -> tuple[Grader, Grade] | None:
    """The session's grader and its verdict; None for a session that is not graded (an
    ungraded status, no end yet, no grader for its task, or a metric ownloop lacks)."""
    end = session.outcome
    if end is None or end.status in UNGRADED:
        return None
    spec = _spec_for(session, grader, tasks)
    if spec is None:
        return None
    judge = make_grader(spec)
    if isinstance(judge, NoGrader):
        return None
    verdict = verdict_of(judge, end.answer, session.evidence, store.get_blob)
    return None if verdict is None else (judge, verdict)


def regrade(
    store: Store,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
    where: str | None = None,
    grader: str | None = None,
    tasks: dict[str, str | None] | None = None,
    dry_run: bool = False,
) -> RegradeResult:
    """Regrade the selected sessions offline and append the new grades to one new stream.

    Args:
        store: the store.
        run_id: only this run's sessions.
        task_id: only this task's sessions.
        where: a SQL condition over the ``sessions`` view.
        grader: a grader spec for every session (see ``ownloop.grading.spec``).
        tasks: task id → grader spec (``graders_from_tasks_file``); sessions of other tasks
            are skipped. Without ``grader`` and ``tasks``, each session's own task grader.
        dry_run: compute the grades and the flips, append nothing.

    Raises:
        GraderSpecError: a spec is not valid.
        QueryError: ``where`` is not valid SQL over the ``sessions`` view.
    """
    if grader is not None and tasks is not None:
        raise OwnloopError("give --grader SPEC or --tasks FILE, not both")
    if grader is not None:
        make_grader(grader)  # a bad spec fails before anything is read
    began = time.perf_counter()
    sessions = fold_selected(store, Selection(run_id, task_id, where), _KINDS)
    # A sealed run's grades stay as sealed: a regrade of it is recorded against the seal.
    seals = run_seals(store)
    at = now()
    new: list[SessionGraded] = []
    flips: list[Flip] = []
    passed_before = passed_after = 0
    for session in sessions.values():
        graded = _grade(store, session, grader, tasks)
        if graded is None:
            continue
        judge, verdict = graded
        previous = session.latest_grade
        before = previous.passed if previous is not None else None
        passed_before += bool(before)
        passed_after += verdict.passed
        if before is not verdict.passed:
            flips.append(
                Flip(
                    session.session_id,
                    session.task_id,
                    before,
                    verdict.passed,
                    previous.score if previous is not None else None,
                    verdict.score,
                    judge.name,
                    changed_checks(previous.checks if previous is not None else (), verdict.checks),
                )
            )
        new.append(
            graded_event(
                judge,
                verdict,
                SessionIds(run_id=session.run_id, session_id=session.session_id),
                at=at,
                source="regrade",
                against_seal=seals.get(session.run_id, ""),
            )
        )
    stream_id = None
    if new and not dry_run:
        with store.stream() as stream:
            stream.append(new)
            stream_id = stream.stream_id
        store.sync()
    return RegradeResult(
        selected=len(sessions),
        graded=len(new),
        skipped=len(sessions) - len(new),
        passed_before=passed_before,
        passed_after=passed_after,
        flips=tuple(flips),
        stream=stream_id,
        seconds=time.perf_counter() - began,
        dry_run=dry_run,
    )
