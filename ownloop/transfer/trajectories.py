"""``ownloop export --format atif`` and ``ownloop import --format atif``: sessions as ATIF files.

Export writes one trajectory per session, ``<session id>.json``, and each screenshot once as
``images/<sha256>.png`` (paths relative to the trajectory). A session becomes:

- step 1, source ``user``: the task's prompt and the first screenshot;
- one ``agent`` step per step with a model call: the response as ``message``, the thought as
  ``reasoning_content``, each parsed action as a tool call (``function_name`` the action's kind,
  ``arguments`` its fields), ``metrics`` (tokens; latency and finish reason in ``extra``), and an
  ``observation``: per tool call the browser operations it ran, then the next screenshot;
- ``final_metrics``: token totals and the step count.

What ATIF has no field for (the task as ownloop ran it, the end status, grades, call ids, the
operations as events, screenshot URLs) goes in ``extra["ownloop"]``, so that import gives the
session back and export → import → export writes the same file. Import also reads trajectories
other tools write (ATIF v1.0 to v1.8): a tool call named like an ownloop action (``click`` with
``x``/``y``, ``type`` with ``text`` ...) becomes that action, any other is a parse error of its
step; images are read from relative paths inside the trajectory's folder only; parts of other
types (v1.8's ``audio``) are skipped with a note. A step another tool wrote keeps its tool calls
and its observations' text in full (evidence ``imported_atif_step``), so export writes them back
as they were. Times come from the steps' timestamps (a step without one takes the one before).
"""

from __future__ import annotations

import hashlib
import io
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

import msgspec

from ownloop.replay.fold import Session, Step
from ownloop.replay.progress import StepProgress
from ownloop.replay.render import op_text
from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.events import (
    Action,
    ActionParsed,
    BrowserActed,
    Event,
    EvidenceCaptured,
    Finish,
    ModelCalled,
    RunEnded,
    RunStarted,
    ScreenshotTaken,
    SessionEnded,
    SessionStarted,
    Status,
    Task,
    Versions,
    now,
)
from ownloop.store.ids import new_id
from ownloop.store.images import over_budget
from ownloop.store.queries import Selection, imported_files
from ownloop.store.seal import refuse_if_sealed
from ownloop.transfer.atif import (
    SCHEMA_VERSION,
    AtifError,
    ContentPart,
    FinalMetrics,
    ImageSource,
    Metrics,
    Observation,
    ObservationResult,
    ToolCall,
    Trajectory,
    TrajectoryAgent,
    encode_trajectory,
    read_trajectory,
)
from ownloop.transfer.atif import Step as AtifStep
from ownloop.transfer.batches import BlobFiles, each_session, empty_folder, picked
from ownloop.transfer.files import inside, is_file, read_regular, unreadable
from ownloop.transfer.sidecar import KeptGrade, graded
from ownloop.version import __version__

__all__ = ["AtifImport", "export_atif", "import_atif", "trajectory_of"]

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")
_ORIGIN = "imported_atif"  # evidence: the trajectory's own session id and the file's sha256
_KEPT_STEP = "imported_atif_step"  # evidence: a foreign step's tool calls and observation text
_STATUSES = get_args(Status)  # a tuple: a hostile file's unhashable status is not an error
_KEPT_END = (
    "status",
    "agent_status",
    "answer",
    "steps",
    "seconds",
    "parse_failures",
    "action_errors",
    "error",
)


# ------------------------------------------------------------------ export


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _origin_id(session: Session) -> str:
    for item in session.evidence:
        if item.name == _ORIGIN and item.value_json:
            value = msgspec.json.decode(item.value_json)
            if isinstance(value, dict) and isinstance(value.get("session_id"), str):
                return str(value["session_id"])
    return session.session_id


def _image(path: str, media_type: str) -> ContentPart:
    return ContentPart(type="image", source=ImageSource(media_type=media_type, path=path))


def _call_of(step: Step) -> ModelCalled | None:
    parsed = step.parsed
    if parsed is not None:
        call = next((c for c in step.calls if c.call_id == parsed.call_id), None)
        if call is not None:
            return call
    return step.calls[-1] if step.calls else None


def _tool_call(step: int, index: int, action: Action) -> ToolCall:
    fields = msgspec.to_builtins(action)
    kind = str(fields.pop("kind"))
    return ToolCall(tool_call_id=f"{step}.{index}", function_name=kind, arguments=fields)


def _op(effect: BrowserActed) -> dict[str, Any]:
    fields = msgspec.to_builtins(effect)
    for name in ("kind", "run_id", "session_id"):
        fields.pop(name, None)
    return dict(fields)


def _results(step: Step, calls: list[ToolCall]) -> list[ObservationResult]:
    results = []
    for index, call in enumerate(calls):
        done = [
            op_text(e.op) + ("" if e.ok else f" failed: {e.error or ''}")
            for e in step.effects
            if e.action_idx == index
        ]
        results.append(
            ObservationResult(
                source_call_id=call.tool_call_id, content="; ".join(done) or "no browser operation"
            )
        )
    return results


def _kept_steps(session: Session) -> dict[int, dict[str, Any]]:
    """The tool calls and observation texts an import kept, by ownloop step number."""
    kept: dict[int, dict[str, Any]] = {}
    for item in session.evidence:
        if item.name == _KEPT_STEP and item.value_json:
            value = msgspec.json.decode(item.value_json)
            if isinstance(value, dict) and isinstance(value.get("step"), int):
                kept[value["step"]] = value
    return kept


def _kept_calls(kept: dict[str, Any]) -> tuple[list[ToolCall], list[ObservationResult]]:
    calls = [msgspec.convert(c, ToolCall) for c in kept.get("tool_calls", ())]
    results = [msgspec.convert(r, ObservationResult) for r in kept.get("results", ())]
    return calls, results


def trajectory_of(session: Session, image_path: Callable[[str, str], str]) -> Trajectory:
    """One session as an ATIF trajectory.

    Args:
        session: the folded session.
        image_path: (sha256, media type) → the image's path relative to the trajectory.
    """
    task = session.task
    started = session.started_at.isoformat() if session.started_at else None
    user = AtifStep(
        step_id=1, source="user", message=task.prompt if task else "", timestamp=started
    )
    steps: list[AtifStep] = [user]
    last: AtifStep | None = None
    version = ""
    totals = [0, 0]
    counted = [False, False]
    foreign = _kept_steps(session)
    for step in session.steps:
        shot = step.screenshot
        if shot is not None:
            image = _image(image_path(shot.sha256, shot.media_type), shot.media_type)
            seen = {"step": step.step, "url": shot.url}
            if last is None:
                user.message = [ContentPart(type="text", text=_text_of(user.message)), image]
                user.extra = {"ownloop": {"screenshot": seen}}
            else:
                assert last.observation is not None and last.extra is not None
                last.observation.results.append(ObservationResult(content=[image]))
                last.extra["ownloop"]["screenshot"] = seen
        call = _call_of(step)
        if call is None:
            continue
        parsed = step.parsed
        version = version or (parsed.parser_version if parsed is not None else "")
        calls = [_tool_call(step.step, i, a) for i, a in enumerate(step.actions)]
        results = _results(step, calls)
        if step.step in foreign:  # another tool's step: its calls and texts as they were
            calls, results = _kept_calls(foreign[step.step])
        kept: dict[str, Any] = {
            "step": step.step,
            "call_id": call.call_id,
            "ops": [_op(e) for e in step.effects],
        }
        if parsed is not None:
            kept["parser"] = parsed.parser
            if parsed.error is not None:
                kept["parse_error"] = parsed.error
            if parsed.model_size is not None:
                kept["model_size"] = list(parsed.model_size)
        extra: dict[str, Any] = {"latency_ms": call.latency_ms}
        if call.finish_reason is not None:
            extra["finish_reason"] = call.finish_reason
        for index, tokens in enumerate((call.prompt_tokens, call.completion_tokens)):
            if tokens is not None:
                totals[index] += tokens
                counted[index] = True
        last = AtifStep(
            step_id=len(steps) + 1,
            source="agent",
            message=call.response or "",
            timestamp=call.at.isoformat(),
            model_name=call.model or session.model or None,
            reasoning_content=step.thought or None,
            tool_calls=calls or None,
            observation=Observation(results=results),
            metrics=Metrics(
                prompt_tokens=call.prompt_tokens,
                completion_tokens=call.completion_tokens,
                extra=extra,
            ),
            extra={"ownloop": kept},
        )
        steps.append(last)
    for atif_step in steps:  # an observation with nothing in it is left out
        if atif_step.observation is not None and not atif_step.observation.results:
            atif_step.observation = None
    return Trajectory(
        schema_version=SCHEMA_VERSION,
        session_id=_origin_id(session),
        agent=TrajectoryAgent(
            name=session.agent or "unknown",
            version=version or "unknown",
            model_name=session.model or None,
        ),
        steps=steps,
        final_metrics=FinalMetrics(
            total_prompt_tokens=totals[0] if counted[0] else None,
            total_completion_tokens=totals[1] if counted[1] else None,
            total_steps=len(steps),
        ),
        extra={"ownloop": _session_extra(session)},
    )


def _session_extra(session: Session) -> dict[str, Any]:
    kept: dict[str, Any] = {"viewport": list(session.viewport), "attempt": session.attempt}
    if session.task is not None:
        kept["task"] = msgspec.to_builtins(session.task)
    if session.outcome is not None:
        end = msgspec.to_builtins(session.outcome)
        kept["end"] = {key: end[key] for key in _KEPT_END if key in end}
        kept["end"]["at"] = end["at"]
    grades = [
        msgspec.to_builtins(
            KeptGrade(
                grader=g.grader,
                grader_version=g.grader_version,
                score=g.score,
                passed=g.passed,
                details=g.details,
                source=g.source,
                against_seal=g.against_seal,
            )
        )
        | {"at": g.at}
        for g in session.grades
    ]
    if grades:
        kept["grades"] = msgspec.to_builtins(grades)
    return kept


def export_atif(store: Store, selection: Selection, out: str | Path) -> list[str]:
    """Write each selected session as ``<session id>.json`` under ``out``; the lines to print.

    Raises:
        OwnloopError: no session selected, or ``out`` is not an empty folder.
    """
    ids = picked(store, selection)
    root = empty_folder(out)
    files = BlobFiles(store, root, "images")
    names: set[str] = set()
    written = 0
    with StepProgress("export atif", "session", len(ids)) as progress:
        for done, session in enumerate(each_session(store, ids), start=1):
            trajectory = trajectory_of(session, files.path_of)
            name = trajectory.session_id or session.session_id
            if not _SAFE_NAME.fullmatch(name) or name.lower() in names:
                name = session.session_id
            names.add(name.lower())
            (root / f"{name}.json").write_bytes(encode_trajectory(trajectory))
            written += 1
            progress.advance(done)
    return [f"{root}: {written} ATIF trajectories ({SCHEMA_VERSION})", *files.lines("images")]


# ------------------------------------------------------------------ import


class AtifImport(NamedTuple):
    """What an ATIF import did."""

    run_id: str
    sessions: int
    skipped: list[str]  # one line per file, or part of a file, that was not imported

    def lines(self) -> list[str]:
        return [
            *self.skipped,
            f"imported {self.sessions} ATIF trajector"
            f"{'y' if self.sessions == 1 else 'ies'} into run {self.run_id}",
        ]


def import_atif(
    store: Store, path: str | Path, run_id: str | None = None, argv: Sequence[str] = ()
) -> AtifImport:
    """Import one ATIF file, or every ``*.json`` file of a folder, as sessions of one run.

    A file the run already has (the same bytes, by sha256) is skipped with a line saying so, so
    importing the same file or folder again adds only what is new.

    Args:
        store: where to write.
        path: a trajectory file, or a folder of them.
        run_id: the run to import into; default ``atif-<name>``.
        argv: the command line, recorded in ``RunStarted``.

    Raises:
        OwnloopError: nothing at ``path``, no trajectory there, or the run is sealed.
    """
    source = Path(path)
    skipped: list[str] = []
    if unreadable(source) is None and source.is_dir():
        paths = []
        for entry in sorted(p for p in source.iterdir() if p.suffix == ".json"):
            reason = unreadable(entry)  # never follow a link or open a FIFO/device/socket
            if reason is not None:
                skipped.append(f"{entry.name}: skipped ({reason})")
            elif is_file(entry):
                paths.append(entry)
    elif unreadable(source) is not None:
        raise OwnloopError(
            f"{source}: {unreadable(source)}: import reads regular files only. Pass the "
            "file itself, or a folder of them"
        )
    elif source.is_file():
        paths = [source]
    else:
        raise OwnloopError(
            f"no file or folder {source}. Pass an ATIF .json file or a folder of them"
        )
    if not paths and not skipped:
        raise OwnloopError(f"no .json files in {source}: expected ATIF trajectories")
    run = run_id or "atif-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", source.stem).strip("-") or "in")
    refuse_if_sealed(store, run, "import into another run with --run NAME")
    seen = imported_files(store, run, _ORIGIN)
    sessions = 0
    stream = None
    try:
        for file in paths:
            try:
                data = read_regular(file)
            except OSError as error:  # (swapped for a link or a FIFO since it was listed)
                skipped.append(f"{file.name}: skipped (not read: {error.strerror or error})")
                continue
            sha256 = hashlib.sha256(data).hexdigest()
            if sha256 in seen:
                skipped.append(f"{file.name}: skipped (already imported into run {run})")
                continue
            reader = _Reader(store, run, file, sha256)
            try:
                trajectory = read_trajectory(data)
                events = reader.events(trajectory)
            except AtifError as error:
                skipped.append(f"{file.name}: skipped (not ATIF: {error})")
                continue
            except RecursionError:  # (JSON nested deeper than Python's stack: hostile)
                skipped.append(f"{file.name}: skipped (not ATIF: nested too deep)")
                continue
            seen.add(sha256)
            if stream is None:
                stream = store.stream()
                stream.append(
                    [
                        RunStarted(
                            at=now(),
                            run_id=run,
                            argv=tuple(argv) or tuple(sys.argv),
                            agent=trajectory.agent.name,
                            agent_settings={"imported": True},
                            model=trajectory.agent.model_name or "",
                            suite=f"import:{source.name}",
                            versions=Versions(ownloop=__version__, python=sys.version.split()[0]),
                        )
                    ]
                )
            stream.append(events)
            sessions += 1
            skipped.extend(f"{file.name}: {note}" for note in reader.notes)
        if stream is not None:
            stream.append([RunEnded(at=now(), run_id=run, counts={"imported": sessions})])
    finally:
        if stream is not None:
            stream.close()
    if stream is not None:
        store.sync()
    if not sessions and not any("already imported" in line for line in skipped):
        raise OwnloopError(
            f"no trajectory imported from {source}: {'; '.join(skipped)[:500]}. "
            "Pass ATIF v1.0-v1.8 files"
        )
    return AtifImport(run, sessions, skipped)


def _when(text: str | None, fallback: datetime | None = None) -> datetime:
    """A step's timestamp; without one (or unreadable), ``fallback``, else the clock."""
    if text:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return fallback or now()
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return fallback or now()


def _ownloop(extra: dict[str, Any] | None) -> dict[str, Any]:
    value = (extra or {}).get("ownloop")
    return value if isinstance(value, dict) else {}


def _message_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    return "\n".join(p.text for p in message if p.type == "text" and p.text is not None)


class _Reader:
    """The events of one trajectory file."""

    def __init__(self, store: Store, run_id: str, file: Path, sha256: str) -> None:
        self.store = store
        self.file = file
        self.sha256 = sha256
        self.run_id = run_id
        self.session_id = new_id()
        self.ids = {"run_id": run_id, "session_id": self.session_id}
        self.notes: list[str] = []
        self.last_at: datetime | None = None  # the latest step timestamp read
        self.started_at: datetime | None = None

    def at(self, timestamp: str | None) -> datetime:
        """The step's time (the one before when it has none); remembered for the next."""
        self.last_at = _when(timestamp, self.last_at)
        return self.last_at

    def events(self, trajectory: Trajectory) -> list[Event]:
        kept = _ownloop(trajectory.extra)
        agent = trajectory.agent
        body: list[Event] = []
        first_user: AtifStep | None = None
        number = 0  # ownloop's step number of the latest agent step
        last_actions: tuple[Action, ...] = ()
        last_text = ""
        ignored = 0
        others = _other_parts(trajectory)
        if others:
            self.notes.append(f"{others} skipped (ownloop keeps text and image parts)")
        for step in trajectory.steps:
            extra = _ownloop(step.extra)
            if step.source != "agent":
                if first_user is None and step.source == "user":
                    first_user = step
                    self.at(step.timestamp)
                    body.extend(self._screens(step.message, extra, 1, step.timestamp))
                else:
                    ignored += 1
                continue
            number = int(extra.get("step", number + 1))
            body.extend(self._agent_step(step, extra, number, agent))
            parsed = next(e for e in reversed(body) if isinstance(e, ActionParsed))
            last_actions, last_text = parsed.actions, _message_text(step.message)
            for result in step.observation.results if step.observation else ():
                if result.content is not None and not isinstance(result.content, str):
                    body.extend(self._screens(result.content, extra, number + 1, step.timestamp))
        if ignored:
            self.notes.append(f"{ignored} user/system messages after the first not kept")
        task = self._task(kept, trajectory, first_user, body)
        shots = [e for e in body if isinstance(e, ScreenshotTaken)]
        viewport = kept.get("viewport")
        size = (
            tuple(viewport)
            if isinstance(viewport, list) and len(viewport) == 2
            else (shots[0].width, shots[0].height)
            if shots
            else (0, 0)
        )
        first = next((s.timestamp for s in trajectory.steps if s.timestamp), None)
        start = SessionStarted(
            at=_when(first_user.timestamp if first_user else None, _when(first)),
            run_id=self.run_id,
            session_id=self.session_id,
            task=task,
            agent=agent.name,
            model=agent.model_name or "",
            viewport=(int(size[0]), int(size[1])),
            attempt=int(kept.get("attempt", 1)),
        )
        origin = EvidenceCaptured(
            at=start.at,
            run_id=self.run_id,
            session_id=self.session_id,
            name=_ORIGIN,
            source=self.file.name,
            value_json=msgspec.json.encode(
                {"session_id": trajectory.session_id, "sha256": self.sha256}
            ).decode(),
        )
        self.started_at = start.at
        parses = [e for e in body if isinstance(e, ActionParsed)]
        failures = (sum(p.error is not None for p in parses), bool(parses and parses[-1].error))
        end = self._end(kept, last_actions, last_text, number, failures)
        return [start, origin, *body, *end]

    def _task(
        self,
        kept: dict[str, Any],
        trajectory: Trajectory,
        first_user: AtifStep | None,
        body: list[Event],
    ) -> Task:
        try:
            return msgspec.convert(kept["task"], Task)
        except (KeyError, msgspec.ValidationError):
            url = next((e.url for e in body if isinstance(e, ScreenshotTaken) and e.url), "")
            prompt = _message_text(first_user.message) if first_user else ""
            return Task(
                task_id=trajectory.session_id or trajectory.trajectory_id or self.file.stem,
                prompt=prompt,
                start_url=url,
                suite="import:atif",
            )

    def _agent_step(
        self, step: AtifStep, extra: dict[str, Any], number: int, agent: TrajectoryAgent
    ) -> list[Event]:
        at = self.at(step.timestamp)
        call_id = str(extra.get("call_id") or new_id())
        metrics = step.metrics or Metrics()
        more = metrics.extra or {}
        latency = more.get("latency_ms")
        finish = more.get("finish_reason")
        call = ModelCalled(
            at=at,
            run_id=self.run_id,
            session_id=self.session_id,
            step=number,
            call_id=call_id,
            model=step.model_name or agent.model_name or "",
            response=_message_text(step.message),
            prompt_tokens=metrics.prompt_tokens,
            completion_tokens=metrics.completion_tokens,
            latency_ms=float(latency) if isinstance(latency, int | float) else 0.0,
            finish_reason=finish if isinstance(finish, str) else None,
            served_by="import",
        )
        actions: list[Action] = []
        error = extra.get("parse_error") if isinstance(extra.get("parse_error"), str) else None
        for tool in step.tool_calls or ():
            try:
                actions.append(
                    msgspec.convert({**tool.arguments, "kind": tool.function_name}, Action)
                )
            except msgspec.ValidationError as problem:
                error = error or (
                    f"tool call {tool.function_name!r} is not an ownloop action ({problem})"
                )
        size = extra.get("model_size")
        parsed = ActionParsed(
            at=at,
            run_id=self.run_id,
            session_id=self.session_id,
            step=number,
            call_id=call_id,
            parser=str(extra.get("parser") or agent.name),
            parser_version=agent.version,
            thought=step.reasoning_content or "",
            actions=() if error else tuple(actions),
            error=error,
            model_size=(int(size[0]), int(size[1]))
            if isinstance(size, list) and len(size) == 2
            else None,
        )
        events: list[Event] = [call, parsed]
        if "ops" not in extra:  # another tool's step: keep its calls and texts in full
            events.append(self._kept(step, number, at))
        for op in extra.get("ops", ()):
            try:
                events.append(msgspec.convert({**op, **self.ids}, BrowserActed))
            except (msgspec.ValidationError, TypeError):
                self.notes.append(f"step {step.step_id}: a browser operation not kept")
        return events

    def _kept(self, step: AtifStep, number: int, at: datetime) -> EvidenceCaptured:
        results = []
        for result in step.observation.results if step.observation else ():
            text = _message_text(result.content) if result.content is not None else ""
            if text or result.source_call_id is not None:
                results.append({"source_call_id": result.source_call_id, "content": text})
        value = {
            "step": number,
            "tool_calls": [msgspec.to_builtins(c) for c in step.tool_calls or ()],
            "results": [{k: v for k, v in r.items() if v is not None} for r in results],
        }
        return EvidenceCaptured(
            at=at,
            **self.ids,
            name=_KEPT_STEP,
            source=f"steps[{step.step_id - 1}]",
            value_json=msgspec.json.encode(value).decode(),
        )

    def _screens(
        self, content: Any, extra: dict[str, Any], number: int, timestamp: str | None
    ) -> list[Event]:
        if isinstance(content, str):
            return []
        seen: dict[str, Any] = extra.get("screenshot") or {}
        if not isinstance(seen, dict):
            seen = {}
        events: list[Event] = []
        for part in content:
            if part.type != "image" or part.source is None:
                continue
            data = self._image(part.source.path)
            if data is None:
                continue
            width, height = _size(data)
            events.append(
                ScreenshotTaken(
                    at=_when(timestamp, self.last_at),
                    run_id=self.run_id,
                    session_id=self.session_id,
                    step=int(seen.get("step", number)),
                    sha256=self.store.put_blob(data),
                    media_type=part.source.media_type,
                    width=width,
                    height=height,
                    url=str(seen.get("url", "")),
                )
            )
        return events

    def _image(self, path: str) -> bytes | None:
        reason = inside(self.file.parent, path)  # never a link, never outside the folder
        if reason is None:
            try:
                data = read_regular(self.file.parent / path)
            except OSError as error:
                reason = f"not read: {error.strerror or error}"
            else:
                reason = over_budget(data)  # measured from its header: never decoded
                if reason is None:
                    return data
        self.notes.append(f"image {path!r} skipped ({reason})")
        return None

    def _ended(
        self, actions: tuple[Action, ...], text: str, steps: int, failures: tuple[int, bool]
    ) -> SessionEnded:
        """The end of a trajectory another tool wrote: finished when it ends on a finish or a
        plain message; a parse error when its last tool calls are not ownloop actions."""
        count, last_failed = failures
        finish = next((a for a in actions if isinstance(a, Finish)), None)
        ended = finish is not None or (not actions and not last_failed)
        status: Literal["finished", "parse_error", "error"] = "finished"
        error = None
        if not ended:
            status = "parse_error" if last_failed else "error"
            error = (
                "the trajectory ends on tool calls ownloop cannot run"
                if last_failed
                else "the trajectory ends after a tool call"
            )
        end = self.last_at or now()
        return SessionEnded(
            at=end,
            run_id=self.run_id,
            session_id=self.session_id,
            status=status,
            agent_status="imported",
            steps=steps,
            answer=(finish.answer if finish is not None else text) if ended else None,
            error=error,
            parse_failures=count,
            seconds=max(0.0, (end - self.started_at).total_seconds()) if self.started_at else 0.0,
        )

    def _end(
        self,
        kept: dict[str, Any],
        actions: tuple[Action, ...],
        text: str,
        steps: int,
        failures: tuple[int, bool] = (0, False),
    ) -> list[Event]:
        end = kept.get("end") if isinstance(kept.get("end"), dict) else None
        events: list[Event] = []
        if end is not None and end.get("status") in _STATUSES:
            try:
                events.append(msgspec.convert({**end, **self.ids}, SessionEnded))
            except msgspec.ValidationError:
                end = None
        if not events:
            events.append(self._ended(actions, text, steps, failures))
        for grade in kept.get("grades", ()):
            try:
                when = _when(grade.get("at"))
                events.append(
                    graded(
                        self.ids["run_id"],
                        self.ids["session_id"],
                        msgspec.convert(grade, KeptGrade),
                        when,
                    )
                )
            except (msgspec.ValidationError, AttributeError):
                self.notes.append("a grade not kept")
        return events


def _other_parts(trajectory: Trajectory) -> str:
    """The parts of types other than text and image, counted by type ("" when none)."""
    counts: dict[str, int] = {}
    for step in trajectory.steps:
        contents: list[Any] = [step.message]
        contents += [r.content for r in step.observation.results] if step.observation else []
        for content in contents:
            for part in content if isinstance(content, list) else ():
                if part.type not in ("text", "image"):
                    counts[part.type] = counts.get(part.type, 0) + 1
    return ", ".join(f"{n} {kind!r} part{'s' * (n != 1)}" for kind, n in sorted(counts.items()))


def _size(data: bytes) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return int(image.width), int(image.height)
    except (UnidentifiedImageError, OSError):
        return 0, 0
