"""``ownloop export``: a run written back as a plain harness's result folders, or as Parquet.

``session-dir`` writes one folder per task: the latest attempt as ``session.json`` (or
``session_failed.json`` when it ended crashed, endpoint_error or interrupted), its
``steps.jsonl`` in the agent's form (see ``forms.py``) and ``screens/step_NN.png`` byte for byte;
earlier attempts as ``error_attempt_N/`` with ``attempt.json``. Fields an import kept are written
back as they came. Each attempt's task, grades and evidence go in an ``ownloop.json`` sidecar
(``sidecar.py``) that harness graders ignore and import reads back. A session's network
evidence (the HAR the recorder kept) is also written as ``network.har``, the name and extension
HAR readers and WebArena-Verified's evaluator expect. ``parquet`` writes every view as
``<view>.parquet``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from ownloop.errors import OwnloopError
from ownloop.grading.evidence import read_value
from ownloop.replay.fold import Session, fold
from ownloop.store import Store
from ownloop.transfer.batches import ExportResult, blob_or_skip, run_to_export
from ownloop.transfer.forms import form_of, step_line
from ownloop.transfer.sidecar import SIDECAR, sidecar_of
from ownloop.transfer.statuses import FAILED_FOLDER_STATUSES, harness_status

__all__ = ["FORMATS", "OtlpSink", "export_run", "export_session_dirs"]

FORMATS = ("session-dir", "parquet", "sft", "sft-parquet", "atif", "otlp", "osworld", "inspect")
_ATTEMPT_KEYS = ("answer", "status", "rounds", "error", "seconds", "parse_fails", "action_errors")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")
# In a file name from the store: NUL (no OS takes it), other controls, backslashes, surrogates.
_UNSAFE_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\\\ud800-\udfff]")


class OtlpSink(NamedTuple):
    """Where ``otlp`` traces go: written under ``out`` (no endpoint), or posted to an OTLP/HTTP
    collector's ``endpoint`` in ``encoding`` (``protobuf`` or ``json``)."""

    endpoint: str | None = None
    encoding: str = "protobuf"


_WRITE_OTLP = OtlpSink()


def export_run(
    store: Store,
    run_id: str | None,
    fmt: str,
    out: str | Path,
    *,
    where: str | None = None,
    agent_format: str = "chat",
    per_session: bool = False,
    otlp: OtlpSink = _WRITE_OTLP,
) -> ExportResult:
    """Export ``run_id`` as ``fmt`` (one of ``FORMATS``) into ``out``.

    ``sft``, ``sft-parquet``, ``atif`` and ``otlp`` export a selection: ``run_id`` and the SQL
    condition ``where`` over the ``sessions`` view (sft's default: passed, counted sessions); see
    ``sft.py``, ``atif.py`` and ``otlp.py``. ``otlp`` says where otlp's traces go (see
    :class:`OtlpSink`).

    Raises:
        OwnloopError: an unknown format, no run given for session-dir, an unknown run, or an
            ``out`` folder that is not empty (session-dir).
    """
    if fmt in ("sft", "sft-parquet", "atif", "otlp", "inspect"):
        return _export_selection(store, run_id, fmt, out, where, agent_format, per_session, otlp)
    if fmt == "parquet":
        from ownloop.store.export import export_views

        files = export_views(store, out, run_id)
        return ExportResult(Path(out), [f"{f.path} ({f.rows} rows)" for f in files], [])
    if fmt == "osworld":
        from ownloop.transfer.osworld_export import export_osworld

        if not run_id:
            raise OwnloopError("osworld needs a run: pass --run R")
        return export_osworld(store, run_id, out)
    if fmt != "session-dir":
        raise OwnloopError(f"unknown format {fmt!r}. Choose one of: {', '.join(FORMATS)}")
    if not run_id:
        raise OwnloopError("session-dir needs a run: pass --run R")
    return export_session_dirs(store, run_id, out)


def _export_selection(
    store: Store,
    run_id: str | None,
    fmt: str,
    out: str | Path,
    where: str | None,
    agent_format: str,
    per_session: bool,
    otlp: OtlpSink,
) -> ExportResult:
    from ownloop.store.queries import Selection

    if fmt in ("sft", "sft-parquet"):
        from ownloop.transfer.batches import PASSED_AND_COUNTED
        from ownloop.transfer.sft import export_sft

        selection = Selection(run_id=run_id, where=where or PASSED_AND_COUNTED)
        return ExportResult(
            Path(out),
            export_sft(
                store,
                selection,
                out,
                agent_format=agent_format,
                per_session=per_session,
                parquet=fmt == "sft-parquet",
            ),
            [],
        )
    selection = Selection(run_id=run_id, where=where)
    if fmt == "atif":
        from ownloop.transfer.trajectories import export_atif

        return ExportResult(Path(out), export_atif(store, selection, out), [])
    if fmt == "inspect":
        from ownloop.transfer.inspect_log import export_inspect

        return ExportResult(Path(out), export_inspect(store, selection, out), [])
    from ownloop.transfer.otlp import export_otlp

    lines = export_otlp(store, selection, out, otlp.endpoint, otlp.encoding)
    return ExportResult(Path(out), lines, [])


def export_session_dirs(store: Store, run_id: str, out: str | Path) -> ExportResult:
    """Write every task of ``run_id`` as a harness result folder under ``out``.

    Folders are named by the task id when it is a plain name (letters, digits, ``.``, ``_``,
    ``-``), else by the latest session's id. Replays (sessions with a parent) are left out.
    """
    rows, root = run_to_export(store, run_id, out)
    tasks: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        tasks.setdefault(row.task_id or row.session_id, []).append(
            (row.session_id, row.agent or "")
        )
    writer = _Writer(store)
    used: set[str] = set()
    for task_id, sessions in tasks.items():
        latest = sessions[-1][0]
        name = task_id if _SAFE_NAME.fullmatch(task_id) and task_id.lower() not in used else latest
        used.add(name.lower())
        writer.task(root / name, [(fold(store.session_events(s), s), a) for s, a in sessions])
    written = [
        f"{root}: {len(tasks)} task folders, {writer.sessions} sessions, "
        f"{writer.screens} screenshots"
    ]
    return ExportResult(root, written, writer.skipped)


class _Writer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.sessions = 0
        self.screens = 0
        self.skipped: list[str] = []

    def task(self, folder: Path, sessions: list[tuple[Session, str]]) -> None:
        """Write one task's folder: earlier attempts first, then the latest at the top."""
        *earlier, (latest, agent) = sessions
        summaries = []
        for number, (session, attempt_agent) in enumerate(earlier, start=1):
            sub = folder / f"error_attempt_{number}"
            summary = _summary(session)
            keys = _imported_keys(session) or [
                key for key in _ATTEMPT_KEYS if key != "answer" or summary["answer"] is not None
            ]
            summary = {key: summary.get(key) for key in keys}
            self._attempt(sub, session, attempt_agent or agent)
            _write_json(sub / "attempt.json", summary)
            summaries.append(summary)
        self._attempt(folder, latest, agent)
        summary = _summary(latest)
        latest_keys = _imported_keys(latest)
        if form_of(agent) == "fara7b" or "error_attempts" in (latest_keys or ()):
            summary.setdefault("error_attempts", summaries)
        if latest_keys is not None:  # an imported session: the fields its file had, in order
            summary = {key: summary.get(key) for key in latest_keys}
        failed = latest.outcome is None or latest.outcome.status in FAILED_FOLDER_STATUSES
        _write_json(folder / ("session_failed.json" if failed else "session.json"), summary)

    def _attempt(self, folder: Path, session: Session, agent: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.sessions += 1
        originals: dict[int, dict[str, Any]] = {}
        for item in session.evidence:
            if item.name == "imported_step":
                value = _value(item)
                if isinstance(value, dict) and isinstance(value.get("step"), int):
                    originals[value["step"]] = value
        lines = []
        for step in session.steps:
            line = step_line(agent or session.agent, step, originals.get(step.step))
            if line is not None:
                lines.append(json.dumps(line, ensure_ascii=False))
            shot = step.screenshot
            if shot is not None:
                self._copy_blob(shot.sha256, folder / "screens" / f"step_{step.step:02d}.png")
        (folder / "steps.jsonl").write_text("".join(f"{line}\n" for line in lines))
        sidecar = sidecar_of(session, lambda sha256, name: self._copy_blob(sha256, folder / name))
        if sidecar is not None:
            (folder / SIDECAR).write_bytes(sidecar)
        har = next(
            (e for e in reversed(session.evidence) if e.name == "network" and e.sha256), None
        )
        if har is not None and har.sha256:
            self._copy_blob(har.sha256, folder / "network.har")
        for item in session.evidence:
            if item.name == "import:file" and item.sha256:
                if _safe_relative(item.source):
                    self._copy_blob(item.sha256, folder / item.source)
                else:  # e.g. a NUL byte, a control character, "..": never a path to write
                    self.skipped.append(
                        f"skipped {folder}/{item.source!r} (not a plain relative file name)"
                    )

    def _copy_blob(self, sha256: str, target: Path) -> None:
        data = blob_or_skip(self.store, sha256, target, self.skipped)
        if data is None:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.screens += target.suffix == ".png"


def _summary(session: Session) -> dict[str, Any]:
    """session.json's fields, filled from the session's events and what an import kept."""
    outcome = session.outcome
    status = outcome.status if outcome is not None else "crashed"
    start = session.task.start_url if session.task is not None else ""
    imported = session.task is not None and session.task.suite.startswith("import:")
    summary: dict[str, Any] = {
        "task_id": session.task_id,
        "base": start if imported else _origin(start),
        "answer": outcome.answer if outcome is not None else None,
        "status": harness_status(status, outcome.agent_status if outcome is not None else ""),
        "rounds": outcome.steps if outcome is not None else len(session.steps),
        "error": outcome.error if outcome is not None else "no end recorded",
        "record": _captured(session, "record"),
        "log": _captured(session, "log"),
        "seconds": outcome.seconds if outcome is not None else 0.0,
        "parse_fails": outcome.parse_failures if outcome is not None else 0,
        "action_errors": outcome.action_errors if outcome is not None else 0,
    }
    for grade in session.grades:
        if grade.source == "import":
            details = _loads(grade.details)
            if isinstance(details, dict):
                summary.update(details)
    for item in session.evidence:
        if item.name.startswith("import:") and item.name != "import:file":
            summary[item.name.removeprefix("import:")] = _value(item)
    return summary


def _imported_keys(session: Session) -> list[str] | None:
    """The fields of the summary file an import read the session from, in order (else None)."""
    for item in session.evidence:
        if item.name == "imported_folder":
            value = _value(item)
            keys = value.get("keys") if isinstance(value, dict) else None
            if isinstance(keys, list) and keys:
                return [k for k in keys if isinstance(k, str)]
    return None


def _captured(session: Session, kind: str) -> Any:
    """A capture URL's JSON whose path ends with ``/<kind>`` (e.g. /_admin/record), else []."""
    for item in reversed(session.evidence):
        if item.name == "capture" and urlsplit(item.source).path.rstrip("/").endswith(f"/{kind}"):
            value = _value(item)
            if value is not None:
                return value
    return []


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else url


def _value(item: Any) -> Any:
    try:
        return read_value(item)
    except ValueError:
        return None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _safe_relative(path: str) -> bool:
    """Whether a recorded file name can be written under the task folder as it is."""
    if _UNSAFE_CHARACTERS.search(path):
        return False
    parts = PurePosixPath(path).parts
    return (
        bool(parts)
        and not PurePosixPath(path).is_absolute()
        and ".." not in parts
        and all(part not in ("", ".") and len(part.encode()) <= 255 for part in parts)
    )


def _write_json(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
