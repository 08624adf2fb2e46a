"""The replay commands' results as rows and documents, for ``--format csv`` and ``--format json``.

Each command prints a table for people by default; a script gets the same facts as CSV (one row
per step or per flipped session, a header line first) or as one JSON document (the summary with
its rows inside). Text stays as recorded: CSV and JSON quote it, nothing is cut.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ownloop.replay.diff import SessionDiff, step_url
from ownloop.replay.fold import Session
from ownloop.replay.regrade import RegradeResult
from ownloop.replay.render import actions_text
from ownloop.store.query import QueryResult

__all__ = [
    "diff_document",
    "diff_rows",
    "regrade_document",
    "regrade_rows",
    "replay_document",
    "replay_rows",
    "session_rows",
]

_TEXT, _INT, _BOOL, _FLOAT = "VARCHAR", "INTEGER", "BOOLEAN", "DOUBLE"


def session_rows(session: Session) -> QueryResult:
    """A session's steps: one row each (``ownloop show --format csv``)."""
    rows = [
        (
            session.session_id,
            step.step,
            step_url(step),
            step.screenshot.sha256 if step.screenshot is not None else None,
            step.thought,
            actions_text(step.actions),
            step.response,
        )
        for step in session.steps
    ]
    return QueryResult(
        ["session_id", "step", "url", "screenshot", "thought", "actions", "response"],
        [_TEXT, _INT, _TEXT, _TEXT, _TEXT, _TEXT, _TEXT],
        rows,
    )


def diff_rows(diff: SessionDiff) -> QueryResult:
    """Both sessions' steps side by side, a row per step number (``ownloop diff --format csv``)."""
    names = [
        "step",
        "actions_a",
        "actions_b",
        "url_a",
        "url_b",
        "screenshot_a",
        "screenshot_b",
        "same_actions",
        "same_url",
        "same_screenshot",
    ]
    rows = [tuple(getattr(step, name) for name in names) for step in diff.steps]
    return QueryResult(names, [_INT, *[_TEXT] * 6, _BOOL, _BOOL, _BOOL], rows)


def diff_document(diff: SessionDiff) -> str:
    """The comparison as one JSON document: verdict, outcomes and every step."""
    return msgspec.json.encode(
        {
            "a": diff.a,
            "b": diff.b,
            "identical": diff.identical,
            "first_difference": diff.first_difference,
            "same_outcome": diff.same_outcome,
            "outcome_a": diff.outcome_a,
            "outcome_b": diff.outcome_b,
            "summary": diff.summary(),
            "steps": diff.steps,
        }
    ).decode()


def regrade_rows(result: RegradeResult) -> QueryResult:
    """The sessions whose verdict flipped, one row each (``ownloop regrade --format csv``)."""
    rows = [
        (
            f.session_id,
            f.task_id,
            f.before,
            f.score_before,
            f.after,
            f.score_after,
            f.grader,
            "; ".join(f.changed),
        )
        for f in result.flips
    ]
    return QueryResult(
        [
            "session_id",
            "task_id",
            "passed_before",
            "score_before",
            "passed_after",
            "score_after",
            "grader",
            "changed_checks",
        ],
        [_TEXT, _TEXT, _BOOL, _FLOAT, _BOOL, _FLOAT, _TEXT, _TEXT],
        rows,
    )


def regrade_document(result: RegradeResult) -> str:
    """The regrade as one JSON document: counts, flips, the stream written (null on a dry run)."""
    return msgspec.json.encode(result).decode()


def _grade(session: Session) -> dict[str, Any]:
    grade = session.latest_grade
    return {
        "session_id": session.session_id,
        "status": session.status,
        "passed": None if grade is None else grade.passed,
        "score": None if grade is None else grade.score,
        "grader": None if grade is None else grade.grader,
    }


def replay_rows(parent: Session, child: Session) -> QueryResult:
    """How each re-executed step compares with its parent's (``replay --execute --format csv``)."""
    rows = []
    for step in child.steps:
        fidelity = step.fidelity
        rows.append(
            (
                child.session_id,
                step.step,
                None if fidelity is None else fidelity.diverged,
                None if fidelity is None else fidelity.screenshot_identical,
                None if fidelity is None else fidelity.pixel_diff,
                None if fidelity is None else fidelity.url_equal,
                None if fidelity is None else fidelity.element_equal,
                actions_text(step.actions),
            )
        )
    return QueryResult(
        [
            "session_id",
            "step",
            "diverged",
            "screenshot_identical",
            "pixel_diff",
            "url_equal",
            "element_equal",
            "actions",
        ],
        [_TEXT, _INT, _BOOL, _BOOL, _FLOAT, _BOOL, _BOOL, _TEXT],
        rows,
    )


def replay_document(parent: Session, child: Session) -> str:
    """A re-execution as one JSON document: both sessions' outcomes and each step's fidelity."""
    steps = replay_rows(parent, child)
    return msgspec.json.encode(
        {
            "mode": child.replay_mode,
            "fork_step": child.fork_step,
            "task_id": parent.task_id,
            "parent": _grade(parent),
            "child": _grade(child),
            "first_divergent_step": child.first_divergence,
            "error": child.outcome.error if child.outcome is not None else None,
            "steps": [dict(zip(steps.columns, row, strict=True)) for row in steps.rows],
        }
    ).decode()
