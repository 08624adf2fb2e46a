"""``ownloop import``: result folders written by a plain harness, turned into events.

One import writes one new stream: a ``RunStarted`` marked as imported (suite ``import:<dir>``,
agent setting ``imported``), then per folder and attempt (error attempts first) a
``SessionStarted``, a ``ScreenshotTaken`` per screen, a ``ModelCalled`` per response of each
steps.jsonl line (``served_by`` "import", no messages: they were not kept), an ``ActionParsed``
(today's parser of the agent when it is available, else the reason), evidence for every field it
does not map, a ``SessionEnded`` with the status mapped and the harness's word kept, and a
``SessionGraded`` (source "import") when the folder has a score or success field.

Re-importing is idempotent: each session carries evidence ``imported_folder`` with a hash of its
folder's files, and a folder whose hash is already in the run is skipped.
"""

from __future__ import annotations

import json
import mimetypes
import re
import sys
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ownloop.agents import AGENTS, make_agent
from ownloop.agents.base import Agent, PastStep
from ownloop.agents.recorded import parsed_event
from ownloop.errors import OwnloopError
from ownloop.store import Store
from ownloop.store.events import (
    ActionParsed,
    Event,
    EvidenceCaptured,
    ModelCalled,
    RunEnded,
    RunStarted,
    ScreenshotTaken,
    SessionEnded,
    SessionGraded,
    SessionStarted,
    Task,
    Versions,
    now,
)
from ownloop.store.extras import missing_extra
from ownloop.store.ids import SessionIds, new_id
from ownloop.store.queries import imported_folders, task_attempts
from ownloop.store.seal import refuse_if_sealed
from ownloop.transfer.forms import FORMS, form_of, infer_form
from ownloop.transfer.harness import (
    Attempt,
    ResultFolder,
    is_result_folder,
    read_folder,
    steps_fields,
    unreadable,
)
from ownloop.transfer.sidecar import Sidecar, SidecarError, captured, graded, read_sidecar
from ownloop.transfer.statuses import ownloop_status
from ownloop.version import __version__

__all__ = ["DEFAULT_VIEWPORTS", "ImportResult", "ResponseParser", "import_dir"]

DEFAULT_VIEWPORTS = {
    "uitars": (1280, 800),
    "opencua": (1920, 1080),
    "fara7b": (1440, 900),
    "molmoweb": (1280, 720),
}
"""Each agent's viewport, used when a folder has no screenshot to read the size from."""

# Summary fields mapped onto events, with the type each must have to be mapped.
_SUMMARY_TYPES: dict[str, tuple[type, ...]] = {
    "task_id": (str,),
    "base": (str,),
    "answer": (str, type(None)),
    "status": (str,),
    "rounds": (int,),
    "error": (str, type(None)),
    "seconds": (int, float),
    "parse_fails": (int,),
    "action_errors": (int,),
    "score": (int, float),
    "success": (bool,),
}


class ImportResult(NamedTuple):
    """What one import did."""

    run_id: str
    folders: int  # folders imported now
    already: int  # folders skipped because the run already has them
    counts: dict[str, int]  # imported sessions by status
    skipped: list[str]  # one line per folder that had something skipped
    warnings: list[str] = []  # e.g. most responses did not parse as the agent's

    def lines(self) -> list[str]:
        """The skip lines, then a summary line."""
        sessions = sum(self.counts.values())
        statuses = ", ".join(f"{n} {status}" for status, n in sorted(self.counts.items()))
        line = (
            f"imported {sessions} session{'s' if sessions != 1 else ''} from {self.folders} "
            f"folder{'s' if self.folders != 1 else ''} into run {self.run_id}"
        )
        if statuses:
            line += f": {statuses}"
        if self.already:
            line += f"; {self.already} folder{'s' if self.already != 1 else ''} already imported"
        return [*self.skipped, line]


def import_dir(
    store: Store,
    directory: str | Path,
    agent: str | None = None,
    run_id: str | None = None,
    argv: Sequence[str] = (),
) -> ImportResult:
    """Import every result folder under ``directory`` (or ``directory`` itself when it is one).

    Args:
        store: where to write.
        directory: a folder of result folders, one per task.
        agent: whose steps.jsonl form the folders use: uitars, molmoweb, fara7b or opencua;
            None: told from the fields of the steps.jsonl lines.
        run_id: the run to import into; default ``import-<directory name>``.
        argv: the command line, recorded in ``RunStarted``.

    Raises:
        OwnloopError: the folder does not exist, holds no result folder, the agent is unknown,
            or no agent was given and the lines do not say which wrote them.
    """
    root = Path(directory)
    if not root.is_dir():
        raise OwnloopError(f"no folder {root}. Pass a folder of result folders (one per task)")
    names = sorted(set(FORMS) | set(AGENTS))
    if agent is not None and agent not in names:
        raise OwnloopError(f"unknown agent {agent!r}. Choose one of: {', '.join(names)}")
    skipped: list[str] = []
    if is_result_folder(root):
        folders = [root]
    else:
        folders = []
        for sub in sorted(root.iterdir()):
            reason = unreadable(sub)  # never follow a symlink or open a FIFO/device/socket
            if reason is not None:
                skipped.append(f"{sub.name}: skipped ({reason})")
            elif not sub.is_dir():
                continue
            elif is_result_folder(sub):
                folders.append(sub)
            else:
                skipped.append(
                    f"{sub.name}: skipped (no session.json, session_failed.json, "
                    "steps.jsonl or screens/)"
                )
    if not folders:
        raise OwnloopError(
            f"no result folders in {root}: expected one folder per task with "
            "session.json or steps.jsonl"
        )
    shapes = infer_form(fields for path in folders for fields in steps_fields(path))
    if agent is None:
        agent = _inferred(root, shapes)
    run = run_id or "import-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", root.name).strip("-") or "dir")
    refuse_if_sealed(store, run, "import into another run with --run NAME")
    seen, attempts = _already_imported(store, run)
    writer = _Writer(store, run, agent, f"import:{root.name}")
    counts: Counter[str] = Counter()
    imported = already = 0
    stream = None
    try:
        for path in folders:
            folder = read_folder(path)
            if folder.sha256 in seen:
                already += 1
                continue
            seen.add(folder.sha256)
            if stream is None:
                stream = store.stream()
                stream.append([writer.run_started(tuple(argv) or tuple(sys.argv))])
            events = writer.folder_events(folder, attempts)
            stream.append(events)
            counts.update(e.status for e in events if isinstance(e, SessionEnded))
            imported += 1
            if folder.skipped:
                skipped.append(f"{folder.name}: skipped {', '.join(folder.skipped)}")
        if stream is not None:
            stream.append([RunEnded(at=now(), run_id=run, counts=dict(counts))])
    finally:
        if stream is not None:
            stream.close()
    if stream is not None:
        store.sync()
    return ImportResult(
        run, imported, already, dict(counts), skipped, _mismatch(agent, shapes, writer.parser)
    )


def _inferred(root: Path, shapes: list[str]) -> str:
    """The one agent whose form the lines have, or an error asking for ``--agent``."""
    forms = ", ".join(FORMS)
    if len(shapes) == 1:
        return shapes[0]
    if not shapes:
        raise OwnloopError(
            f"cannot tell which agent wrote the steps.jsonl lines in {root}: pass --agent ({forms})"
        )
    raise OwnloopError(
        f"the steps.jsonl lines in {root} have the fields of {' and '.join(shapes)}"
        f": pass --agent ({forms})"
    )


def _mismatch(agent: str, shapes: list[str], parser: ResponseParser) -> list[str]:
    """A warning when the lines look like another agent's, or most responses did not parse."""
    other = [shape for shape in shapes if shape != form_of(agent)]
    low = parser.responses > 0 and parser.parsed_ok * 2 < parser.responses
    if not low and not (other and form_of(agent) not in shapes):
        return []
    rate = f"{parser.parsed_ok} of {parser.responses} responses parsed as {agent}" + (
        f" ({parser.parsed_ok / parser.responses:.0%})" if parser.responses else ""
    )
    if other:
        return [
            f"warning: {rate}; the steps.jsonl lines have {other[0]}'s fields: import again "
            f"with --agent {other[0]} (and another --run), or without --agent"
        ]
    return [f"warning: {rate}; check --agent"]


def _already_imported(store: Store, run: str) -> tuple[set[str], dict[str, int]]:
    """Folder hashes already imported into ``run``, and each task's highest attempt there."""
    return imported_folders(store, run), task_attempts(store, run)


class ResponseParser:
    """Today's parser of the agent, or the reason it cannot parse here (imports of the harness
    folders and of OSWorld's results parse their responses with it)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.agent: Agent | None = None
        self.unavailable = ""
        self.responses = 0  # responses parsed here
        self.parsed_ok = 0  # of them, those that parsed
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e.g. "built-in prompt": irrelevant to parsing
                self.agent = make_agent(name)
        except Exception as exc:  # noqa: BLE001 - an agent that cannot load must not stop an import
            missing = isinstance(exc, ImportError) and missing_extra(exc, f"parsing {name}")
            self.unavailable = "not parsed: " + str(
                missing or f"agent {name!r} is not available here ({exc})"
            )

    @property
    def viewport(self) -> tuple[int, int]:
        if self.agent is not None:
            return self.agent.settings.viewport
        return DEFAULT_VIEWPORTS.get(self.name, (1280, 800))

    def rate_line(self) -> str:
        if self.agent is None:
            return f"responses not parsed: {self.unavailable}"
        rate = f" ({self.parsed_ok / self.responses:.0%})" if self.responses else ""
        return f"parsed {self.parsed_ok} of {self.responses} responses as {self.name}{rate}"

    def parse(
        self,
        ids: SessionIds,
        step: int,
        call_id: str,
        text: str,
        size: tuple[int, int],
        history: Sequence[PastStep] = (),
    ) -> ActionParsed:
        """A response parsed by today's parser: its actions, or why not (kept, never raised)."""
        agent = self.agent
        if agent is None:
            return ActionParsed(
                at=now(),
                **ids,
                step=step,
                call_id=call_id,
                parser=self.name,
                error=self.unavailable[:1000],
            )
        self.responses += 1
        try:
            result = agent.parse(text, size, history)
        except Exception as exc:  # noqa: BLE001 - AgentParseError, or any bug: kept, not fatal
            error = (str(exc) or type(exc).__name__)[:1000]
            return parsed_event(ids, step, call_id, agent, None, error)
        self.parsed_ok += 1
        return parsed_event(ids, step, call_id, agent, result)


class _Writer:
    """Builds the events of one import."""

    def __init__(self, store: Store, run_id: str, agent: str, suite: str) -> None:
        self.store = store
        self.run_id = run_id
        self.agent = agent
        self.suite = suite
        self.parser = ResponseParser(agent)

    def run_started(self, argv: tuple[str, ...]) -> RunStarted:
        return RunStarted(
            at=now(),
            run_id=self.run_id,
            argv=argv,
            agent=self.agent,
            agent_settings={"imported": True},
            viewport=self.parser.viewport,
            suite=self.suite,
            versions=Versions(ownloop=__version__, python=sys.version.split()[0]),
        )

    def folder_events(self, folder: ResultFolder, attempts: dict[str, int]) -> list[Event]:
        """Every event of one folder: its error attempts in order, then its own session."""
        summary = folder.final.summary or {}
        task_id = summary.get("task_id")
        task_id = task_id if isinstance(task_id, str) and task_id else folder.name
        base = summary.get("base")
        task = Task(
            task_id=task_id,
            prompt="",
            start_url=base if isinstance(base, str) else "",
            suite=self.suite,
        )
        first = attempts.get(task_id, 0) + 1
        events: list[Event] = []
        for number, attempt in enumerate([*folder.error_attempts, folder.final], start=first):
            events.extend(self._session(folder, attempt, task, number))
        attempts[task_id] = first + len(folder.error_attempts)
        return events

    def _session(
        self, folder: ResultFolder, attempt: Attempt, task: Task, number: int
    ) -> list[Event]:
        ids = SessionIds(run_id=self.run_id, session_id=new_id())
        screens = attempt.screens
        sized = [s for s in screens.values() if s.width and s.height]
        viewport = (sized[0].width, sized[0].height) if sized else self.parser.viewport
        where = f"{folder.name}/{attempt.label}" if attempt.label else folder.name
        sidecar = _sidecar(attempt, folder)
        if sidecar.task is not None and sidecar.task.task_id == task.task_id:
            task = sidecar.task  # as ownloop ran it: prompt, grader spec, URLs
        events: list[Event] = [
            SessionStarted(
                at=now(), **ids, task=task, agent=self.agent, attempt=number, viewport=viewport
            ),
            _evidence(
                ids,
                "imported_folder",
                {
                    "folder": where,
                    "sha256": folder.sha256,
                    "summary": attempt.summary_file,
                    "keys": attempt.summary_keys,
                },
            ),
        ]
        by_step: dict[int, list[Any]] = {}
        for line in attempt.steps:
            by_step.setdefault(line.step, []).append(line)
        prefix = f"{attempt.label}/" if attempt.label else ""
        for step in sorted(set(by_step) | set(screens)):
            lines = by_step.get(step, [])
            screen = screens.get(step)
            url = next(
                (ln.fields["url"] for ln in lines if isinstance(ln.fields.get("url"), str)), ""
            )
            if screen is not None:
                events.append(
                    ScreenshotTaken(
                        at=now(),
                        **ids,
                        step=step,
                        sha256=self.store.put_blob(screen.data),
                        width=screen.width,
                        height=screen.height,
                        url=url,
                    )
                )
            size = (screen.width, screen.height) if screen and screen.width else viewport
            for line in lines:
                events.extend(self._line(ids, line, size, screen is not None, prefix))
        summary = dict(attempt.summary or {})
        events.extend(
            _evidence(ids, f"import:{key}", value)
            for key, value in summary.items()
            if not _fits(key, value)
        )
        for name, data in attempt.extra_files.items():
            media = mimetypes.guess_type(name)[0] or "application/octet-stream"
            events.append(
                EvidenceCaptured(
                    at=now(),
                    **ids,
                    name="import:file",
                    sha256=self.store.put_blob(data),
                    media_type=media,
                    source=name,
                )
            )
        for kept in sidecar.evidence:
            kept_bytes = attempt.sidecar_files.get(kept.file) if kept.file else None
            if kept.file and kept_bytes is None:
                folder.skipped.append(
                    f"{prefix}{kept.file} (missing: evidence {kept.name!r} kept without its bytes)"
                )
            sha256 = self.store.put_blob(kept_bytes) if kept_bytes is not None else None
            events.append(captured(ids["run_id"], ids["session_id"], kept, sha256, now()))
        events.append(self._ended(ids, attempt, summary, max(by_step, default=0)))
        grade = _grade(ids, summary)
        if grade is not None:
            events.append(grade)
        events.extend(
            graded(ids["run_id"], ids["session_id"], kept, now()) for kept in sidecar.grades
        )
        return events

    def _line(
        self, ids: SessionIds, line: Any, size: tuple[int, int], has_screen: bool, prefix: str
    ) -> list[Event]:
        fields: dict[str, Any] = line.fields
        kept: dict[str, Any] = {}
        texts: list[str] = []
        for key, value in fields.items():
            if key == "step" and value == line.step:
                continue
            if key == "url" and isinstance(value, str) and has_screen:
                continue
            if (
                key == "fails"
                and self.agent == "uitars"
                and isinstance(value, list)
                and all(isinstance(v, str) for v in value)
            ):
                texts[:0] = value  # the failed responses came before the line's raw
                continue
            if key == "raw" and isinstance(value, str):
                texts.append(value)
                continue
            kept[key] = value
        events: list[Event] = []
        error = fields.get("error") if isinstance(fields.get("error"), str) else None
        for i, text in enumerate(texts or [None]):
            call_id = new_id()
            events.append(
                ModelCalled(
                    at=now(),
                    **ids,
                    step=line.step,
                    call_id=call_id,
                    attempt=i + 1,
                    purpose="step" if i == 0 else "resample",
                    response=text,
                    served_by="import",
                    error=None if text is not None else (error or "the harness kept no response"),
                )
            )
            if text is not None:
                events.append(self.parser.parse(ids, line.step, call_id, text, size))
        # The line's fields in order and those not mapped: export writes the line back as it was.
        original = {"step": line.step, "keys": list(fields), "kept": kept}
        events.append(
            _evidence(
                ids, "imported_step", original, source=f"{prefix}steps.jsonl line {line.line}"
            )
        )
        return events

    def _ended(
        self, ids: SessionIds, attempt: Attempt, summary: dict[str, Any], steps: int
    ) -> SessionEnded:
        def field(key: str, default: Any) -> Any:
            value = summary.get(key, default)
            return value if _fits(key, value) else default

        word = field("status", "")
        if attempt.summary is None:
            return SessionEnded(
                at=now(),
                **ids,
                status="crashed",
                steps=steps,
                error="imported without a readable summary (session.json or attempt.json)",
            )
        failed_file = attempt.summary_file == "session_failed.json"
        status = ownloop_status(word, default="crashed" if failed_file else "error")
        return SessionEnded(
            at=now(),
            **ids,
            status=status,
            agent_status=word,
            answer=field("answer", None),
            steps=field("rounds", steps),
            seconds=float(field("seconds", 0.0)),
            parse_failures=field("parse_fails", 0),
            action_errors=field("action_errors", 0),
            error=field("error", None),
        )


def _sidecar(attempt: Attempt, folder: ResultFolder) -> Sidecar:
    """The attempt's ``ownloop.json`` (an empty one when there is none or it does not decode)."""
    if attempt.sidecar is None:
        return Sidecar()
    try:
        return read_sidecar(attempt.sidecar)
    except SidecarError as error:
        prefix = f"{attempt.label}/" if attempt.label else ""
        folder.skipped.append(f"{prefix}ownloop.json (not read: {error})")
        return Sidecar()


def _fits(key: str, value: Any) -> bool:
    """Whether a summary field is mapped onto an event (it has the type the event needs)."""
    types = _SUMMARY_TYPES.get(key, ())
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _evidence(ids: SessionIds, name: str, value: Any, source: str = "") -> EvidenceCaptured:
    return EvidenceCaptured(
        at=now(), **ids, name=name, source=source, value_json=json.dumps(value, ensure_ascii=False)
    )


def _grade(ids: SessionIds, summary: dict[str, Any]) -> SessionGraded | None:
    score = summary.get("score")
    success = summary.get("success")
    has_score = isinstance(score, int | float) and not isinstance(score, bool)
    has_success = isinstance(success, bool)
    if not (has_score or has_success):
        return None
    value = float(score) if has_score else (1.0 if success else 0.0)  # type: ignore[arg-type]
    passed = success if has_success else value > 0
    details = {k: summary[k] for k in ("score", "success") if k in summary}
    return SessionGraded(
        at=now(),
        **ids,
        grader="import",
        score=value,
        passed=bool(passed),
        details=json.dumps(details),
        source="import",
    )
