"""A session's verdict and its ``SessionGraded`` event, the same for recording and regrade.

``verdict_of`` hands a grader the blobs it reads (the recorded HAR, an OSWorld getter's office
file) and drops a verdict it cannot give; ``graded_event`` is the one builder of the event of a
grader's grade (``source`` says who graded: ``record`` or ``regrade``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from ownloop.grading.grade import Grade, Grader
from ownloop.grading.network import wants_network, with_network
from ownloop.grading.osworld import is_unsupported, wants_getter_blobs, with_getter_blobs
from ownloop.grading.version import grader_version
from ownloop.store.events import EvidenceCaptured, GradeSource, SessionGraded
from ownloop.store.ids import SessionIds

__all__ = ["graded_event", "verdict_of"]


def verdict_of(
    grader: Grader,
    answer: str | None,
    evidence: Sequence[EvidenceCaptured],
    get_blob: Callable[[str], bytes],
) -> Grade | None:
    """``grader``'s verdict on a session's answer and evidence, the blobs it reads (the HAR, an
    OSWorld getter's office file) read back with ``get_blob``; None when it has no verdict (an
    OSWorld metric ownloop lacks)."""
    if wants_network(grader):
        evidence = with_network(evidence, get_blob)
    if wants_getter_blobs(grader):
        evidence = with_getter_blobs(evidence, get_blob)
    grade = grader.grade(answer, evidence)
    return None if is_unsupported(grade) else grade


def graded_event(
    grader: Grader,
    grade: Grade,
    ids: SessionIds,
    *,
    at: datetime,
    source: GradeSource,
    against_seal: str = "",
) -> SessionGraded:
    """The ``SessionGraded`` event of ``grader``'s ``grade`` of a session."""
    return SessionGraded(
        at=at,
        **ids,
        grader=grader.name,
        grader_version=grader_version(grader),
        score=grade.score,
        passed=grade.passed,
        details=grade.details,
        source=source,
        against_seal=against_seal,
        checks=grade.checks,
    )
