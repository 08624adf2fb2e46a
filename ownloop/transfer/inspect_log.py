"""``ownloop export --format inspect``: runs as Inspect ``.eval`` logs, for ``inspect view``.

One log per run, ``<run id>.eval``, written by inspect_ai's own log types and writer (the
optional ``inspect`` extra): one sample per session (id the session id), holding

- ``messages``: the task's prompt, then per step the screenshot (an image) and the response;
- ``events``: per model call a ``ModelEvent`` (the request as sent, images included, its
  sampling, the response with its token usage, the call's time and latency), and per browser
  operation a ``ToolEvent`` (the operation's name and arguments, what it did or its error);
- ``scores``: the session's latest grade as the ``ownloop`` score (1 or 0 by ``passed``, the
  grade's score, grader and details kept in its metadata);
- ``metadata``: task, agent, status and the answer.

The log's results give the share of sessions passed as ``accuracy``. Images go in as data URIs,
which the writer stores once each by hash.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ownloop.errors import OwnloopError
from ownloop.replay.fold import Session
from ownloop.replay.progress import StepProgress
from ownloop.replay.render import op_text
from ownloop.store import MissingBlob, Store
from ownloop.store.events import ImagePart, Message, ModelCalled
from ownloop.store.queries import Selection
from ownloop.transfer.batches import each_session, empty_folder, picked

if TYPE_CHECKING:
    from inspect_ai.model import StopReason

__all__ = ["export_inspect"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_STOPS: dict[str, StopReason] = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls"}


def export_inspect(store: Store, selection: Selection, out: str | Path) -> list[str]:
    """Write the selected sessions as one Inspect ``.eval`` log per run under ``out``.

    Raises:
        OwnloopError: inspect_ai is not installed, no session selected, or ``out`` is not an
            empty folder.
    """
    try:
        from inspect_ai.log import write_eval_log
    except ImportError:
        raise OwnloopError(
            "--format inspect needs inspect_ai: pip install 'ownloop[inspect]'"
        ) from None
    ids = picked(store, selection)
    root = empty_folder(out)
    runs: dict[str, list[Any]] = {}
    with StepProgress("export inspect", "session", len(ids)) as progress:
        for done, session in enumerate(each_session(store, ids), start=1):
            runs.setdefault(session.run_id, []).append(_Sample(store, session).build())
            progress.advance(done)
    lines = []
    for run_id, samples in runs.items():
        path = root / f"{_UNSAFE.sub('-', run_id).strip('-') or 'run'}.eval"
        write_eval_log(_log(run_id, samples), str(path))
        lines.append(f"{path}: {len(samples)} samples (Inspect .eval; open with: inspect view)")
    return lines


def _log(run_id: str, samples: list[Any]) -> Any:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
    )

    first = samples[0]
    scored = [s for s in samples if s.scores]
    passed = sum(float(s.scores["ownloop"].value) for s in scored)
    spec = EvalSpec(
        created=first.metadata["started_at"],
        run_id=run_id,
        task=first.metadata["suite"] or run_id,
        dataset=EvalDataset(name=first.metadata["suite"] or run_id, samples=len(samples)),
        model=first.metadata["model"] or "unknown",
        config=EvalConfig(),
    )
    results = EvalResults(
        total_samples=len(samples),
        completed_samples=len(samples),
        scores=[
            EvalScore(
                name="ownloop",
                scorer="ownloop",
                scored_samples=len(scored),
                unscored_samples=len(samples) - len(scored),
                metrics={
                    "accuracy": EvalMetric(
                        name="accuracy", value=passed / len(scored) if scored else 0.0
                    )
                },
            )
        ],
    )
    return EvalLog(eval=spec, status="success", samples=samples, results=results)


class _Sample:
    """One session as an ``EvalSample``; images read from the store as data URIs."""

    def __init__(self, store: Store, session: Session) -> None:
        self.store = store
        self.session = session
        self._uris: dict[str, str] = {}

    def uri(self, sha256: str, media_type: str) -> str:
        if sha256 not in self._uris:
            try:
                data = self.store.get_blob(sha256)
            except MissingBlob:
                data = b""
            self._uris[sha256] = f"data:{media_type};base64,{base64.b64encode(data).decode()}"
        return self._uris[sha256]

    def messages(self, messages: tuple[Message, ...]) -> list[Any]:
        from inspect_ai.model import (
            ChatMessageAssistant,
            ChatMessageSystem,
            ChatMessageUser,
            ContentImage,
            ContentText,
        )

        kinds = {"system": ChatMessageSystem, "assistant": ChatMessageAssistant}
        out = []
        for message in messages:
            content = [
                ContentImage(image=self.uri(p.sha256, p.media_type))
                if isinstance(p, ImagePart)
                else ContentText(text=p.text)
                for p in message.parts
            ]
            out.append(kinds.get(message.role, ChatMessageUser)(content=content))
        return out

    def model_event(self, call: ModelCalled) -> Any:
        from inspect_ai.event import ModelEvent
        from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage

        model = call.model or self.session.model or "unknown"
        stop = _STOPS.get(call.finish_reason or "", "unknown")
        output = ModelOutput.from_content(
            model, call.response or "", stop_reason=stop, error=call.error
        )
        if call.prompt_tokens is not None or call.completion_tokens is not None:
            used_in, used_out = call.prompt_tokens or 0, call.completion_tokens or 0
            output.usage = ModelUsage(
                input_tokens=used_in, output_tokens=used_out, total_tokens=used_in + used_out
            )
        sampling = call.sampling
        return ModelEvent(
            model=model,
            input=self.messages(call.messages),
            tools=[],
            tool_choice="none",
            config=GenerateConfig(
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
            ),
            output=output,
            error=call.error,
            timestamp=call.at,
            working_time=call.latency_ms / 1000,
        )

    def build(self) -> Any:
        from inspect_ai.event import ToolEvent
        from inspect_ai.log import EvalSample
        from inspect_ai.model import (
            ChatMessageAssistant,
            ChatMessageUser,
            ContentImage,
            ModelOutput,
        )
        from inspect_ai.scorer import Score
        from inspect_ai.tool import ToolCallError

        session = self.session
        prompt = session.task.prompt if session.task is not None else ""
        conversation: list[Any] = [ChatMessageUser(content=prompt)]
        events: list[Any] = []
        last = ""
        for step in session.steps:
            shot = step.screenshot
            if shot is not None:
                image = ContentImage(image=self.uri(shot.sha256, shot.media_type))
                conversation.append(ChatMessageUser(content=[image]))
            for call in step.calls:
                events.append(self.model_event(call))
            accepted = next((c for c in reversed(step.calls) if c.response is not None), None)
            if accepted is not None and accepted.response is not None:
                last = accepted.response
                conversation.append(ChatMessageAssistant(content=accepted.response))
            for effect in step.effects:
                op = msgspec.to_builtins(effect.op)
                name = str(op.pop("op"))
                events.append(
                    ToolEvent(
                        id=f"{step.step}.{effect.idx}",
                        function=name,
                        arguments=op,
                        result=op_text(effect.op) if effect.ok else "",
                        error=None
                        if effect.ok
                        else ToolCallError(type="unknown", message=effect.error or "failed"),
                        timestamp=effect.at,
                        working_time=effect.duration_ms / 1000,
                    )
                )
        grade = session.latest_grade
        scores = {}
        answer = session.outcome.answer if session.outcome is not None else None
        if grade is not None:
            scores["ownloop"] = Score(
                value=1.0 if grade.passed else 0.0,
                answer=answer,
                explanation=grade.details,
                metadata={"score": grade.score, "grader": grade.grader, "passed": grade.passed},
            )
        model = session.model or "unknown"
        return EvalSample(
            id=session.session_id,
            epoch=1,
            input=prompt,
            target="",
            messages=conversation,
            output=ModelOutput.from_content(model, last),
            events=events,
            scores=scores or None,
            metadata={
                "run_id": session.run_id,
                "task_id": session.task_id,
                "suite": session.task.suite if session.task is not None else "",
                "agent": session.agent,
                "model": session.model,
                "status": session.status,
                "answer": answer,
                "started_at": (session.started_at.isoformat() if session.started_at else ""),
            },
        )
