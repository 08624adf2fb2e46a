"""``ownloop import --format atif``: ATIF trajectories (v1.0 to v1.8) as sessions.

A trajectory ownloop wrote comes back as the session it was (``extra["ownloop"]``); one another
tool wrote becomes a session of its own: a tool call named like an ownloop action becomes that
action, any other is a parse error of its step, and its tool calls and observations' text are kept
in full (evidence ``imported_atif_step``) so export writes them back. See :mod:`.trajectories`.
"""

from __future__ import annotations

import hashlib
import io
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

import msgspec

from ownloop.errors import OwnloopError
from ownloop.store import Store
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
from ownloop.store.ids import SessionIds, new_id
from ownloop.store.images import over_budget
from ownloop.store.queries import imported_files
from ownloop.store.seal import refuse_if_sealed
from ownloop.transfer.atif import (
    AtifError,
    Metrics,
    Trajectory,
    TrajectoryAgent,
    read_trajectory,
)
from ownloop.transfer.atif import Step as AtifStep
from ownloop.transfer.files import inside, is_file, read_regular, unreadable
from ownloop.transfer.sidecar import KeptGrade, graded
from ownloop.transfer.trajectories import KEPT_STEP, ORIGIN
from ownloop.version import __version__

__all__ = ["AtifImport", "import_atif"]

_STATUSES = get_args(Status)  # a tuple: a hostile file's unhashable status is not an error


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
    seen = imported_files(store, run, ORIGIN)
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
        self.ids = SessionIds(run_id=run_id, session_id=new_id())
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
            **self.ids,
            task=task,
            agent=agent.name,
            model=agent.model_name or "",
            viewport=(int(size[0]), int(size[1])),
            attempt=int(kept.get("attempt", 1)),
        )
        origin = EvidenceCaptured(
            at=start.at,
            **self.ids,
            name=ORIGIN,
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
            **self.ids,
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
            **self.ids,
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
            name=KEPT_STEP,
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
                    **self.ids,
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
            **self.ids,
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
