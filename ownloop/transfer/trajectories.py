"""``ownloop export --format atif``: sessions as ATIF files (import: :mod:`.atif_import`).

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

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from ownloop.replay.fold import Session, Step
from ownloop.replay.progress import StepProgress
from ownloop.replay.render import op_text
from ownloop.store import Store
from ownloop.store.events import (
    Action,
    BrowserActed,
    ModelCalled,
)
from ownloop.store.queries import Selection
from ownloop.transfer.atif import (
    SCHEMA_VERSION,
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
)
from ownloop.transfer.atif import Step as AtifStep
from ownloop.transfer.batches import BlobFiles, each_session, empty_folder, picked
from ownloop.transfer.sidecar import kept_grade

__all__ = ["KEPT_STEP", "ORIGIN", "export_atif", "trajectory_of"]

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")
ORIGIN = "imported_atif"  # evidence: the trajectory's own session id and the file's sha256
KEPT_STEP = "imported_atif_step"  # evidence: a foreign step's tool calls and observation text
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
        if item.name == ORIGIN and item.value_json:
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
        if item.name == KEPT_STEP and item.value_json:
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
    grades = [msgspec.to_builtins(kept_grade(g)) | {"at": g.at} for g in session.grades]
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
