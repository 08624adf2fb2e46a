"""``ownloop.json``: what a harness folder cannot hold, kept beside it so import gives it back.

A plain harness folder has no place for the task as ownloop ran it (prompt, grader spec, URLs),
for grades or for end-state evidence, so a run exported and imported again used to come back
ungraded (``passed`` NULL, and regrade found no grader). Export writes, in each attempt's folder
(the task folder and each ``error_attempt_N/``)::

    ownloop.json                {"ownloop_sidecar": 1, "task": {...}, "grades": [...],
                                 "evidence": [...]}
    ownloop-evidence/<sha256>   the bytes of each piece of evidence kept as a blob

Harness graders read ``session.json`` and ``steps.jsonl`` and never look at these. Grades an
import made from a summary's ``score``/``success`` and the evidence an import keeps to write the
folder back (``import:*``, ``imported_*``) are left out: the folder itself holds them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import msgspec

from ownloop.replay.fold import Session
from ownloop.store.events import EvidenceCaptured, GradeSource, SessionGraded, Task

__all__ = [
    "EVIDENCE_FOLDER",
    "SIDECAR",
    "KeptEvidence",
    "KeptGrade",
    "Sidecar",
    "SidecarError",
    "captured",
    "graded",
    "kept_grade",
    "read_sidecar",
    "sidecar_of",
]

SIDECAR = "ownloop.json"
EVIDENCE_FOLDER = "ownloop-evidence"


class SidecarError(ValueError):
    """An ``ownloop.json`` that does not decode; the folder is imported without it."""


class KeptGrade(msgspec.Struct, frozen=True, kw_only=True):
    """A grade as recorded, without its session and time: each field is ``SessionGraded``'s of
    the same name (``kept_grade`` and ``graded`` copy them by name)."""

    grader: str
    grader_version: str = ""
    score: float = 0.0
    passed: bool = False
    details: str = ""
    source: GradeSource = "record"
    against_seal: str = ""


class KeptEvidence(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of evidence; ``file`` names its bytes under ``ownloop-evidence/`` when it was a
    blob."""

    name: str
    value_json: str | None = None
    file: str | None = None
    media_type: str = "application/json"
    source: str = ""


class Sidecar(msgspec.Struct, frozen=True, kw_only=True):
    """The contents of ``ownloop.json``."""

    ownloop_sidecar: int = 1
    task: Task | None = None
    grades: tuple[KeptGrade, ...] = ()
    evidence: tuple[KeptEvidence, ...] = ()


def _imported(name: str) -> bool:
    return name.startswith("import:") or name.startswith("imported_")


def kept_grade(grade: SessionGraded) -> KeptGrade:
    """A ``SessionGraded`` as kept in ``ownloop.json`` (and an ATIF file's extra): without its
    session, time and checks."""
    return KeptGrade(**{name: getattr(grade, name) for name in KeptGrade.__struct_fields__})


def sidecar_of(session: Session, copy_blob: Callable[[str, str], None]) -> bytes | None:
    """``ownloop.json`` for one session, or None when it has nothing the folder lacks.

    Args:
        session: the folded session.
        copy_blob: called with (sha256, relative path) for each evidence blob to write beside.
    """
    grades = tuple(kept_grade(g) for g in session.grades if g.source != "import")
    evidence = []
    for item in session.evidence:
        if _imported(item.name):
            continue
        file = None
        if item.sha256:
            file = f"{EVIDENCE_FOLDER}/{item.sha256}"
            copy_blob(item.sha256, file)
        evidence.append(
            KeptEvidence(
                name=item.name,
                value_json=item.value_json,
                file=file,
                media_type=item.media_type,
                source=item.source,
            )
        )
    task = session.task
    from_import = task is None or task.suite.startswith("import:")
    if from_import and not grades and not evidence:
        return None
    sidecar = Sidecar(task=None if from_import else task, grades=grades, evidence=tuple(evidence))
    return msgspec.json.format(msgspec.json.encode(sidecar), indent=2) + b"\n"


def read_sidecar(data: bytes) -> Sidecar:
    """Decode ``ownloop.json``.

    Raises:
        SidecarError: not JSON, or a field of the wrong type (the message names its path).
    """
    try:
        return msgspec.json.decode(data, type=Sidecar)
    except msgspec.DecodeError as error:
        raise SidecarError(str(error)) from None


def graded(run_id: str, session_id: str, kept: KeptGrade, at: datetime) -> SessionGraded:
    """The ``SessionGraded`` event of a kept grade."""
    return SessionGraded(
        at=at, run_id=run_id, session_id=session_id, **msgspec.structs.asdict(kept)
    )


def captured(
    run_id: str, session_id: str, kept: KeptEvidence, sha256: str | None, at: datetime
) -> EvidenceCaptured:
    """The ``EvidenceCaptured`` event of kept evidence (its blob already stored as ``sha256``)."""
    return EvidenceCaptured(
        at=at,
        run_id=run_id,
        session_id=session_id,
        name=kept.name,
        value_json=kept.value_json,
        sha256=sha256,
        media_type=kept.media_type,
        source=kept.source,
    )
