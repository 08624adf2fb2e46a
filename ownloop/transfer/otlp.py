"""``ownloop export --format otlp``: sessions as OpenTelemetry traces, in OTLP/JSON or protobuf.

One trace per session (its id derived from the session id, so exporting twice gives the same
ids): an ``invoke_agent`` span for the session, a span per step under it, and under each step a
``chat`` span per model call and a span per browser operation. Model calls carry the GenAI
semantic conventions' attributes (``gen_ai.request.model``, ``gen_ai.usage.input_tokens``,
``gen_ai.response.finish_reasons`` ...), the request and the response as
``gen_ai.input.messages`` / ``gen_ai.output.messages``. Backends cap attribute sizes (a trace with
screenshots inlined as base64 breaks them), so nothing big is inlined: each image is a ``uri`` part
naming ``blobs/<sha256>.png``, each text longer than ``TEXT_INLINE`` characters a ``uri`` part
naming ``blobs/<sha256>.txt``, and an attribute still longer than ``ATTRIBUTE_LIMIT`` bytes is
written as a blob too, its key ending in ``_ref``. Every file under ``blobs/`` is named by the
sha256 of its bytes.

The traces are written as ``traces.jsonl`` (one ``ExportTraceServiceRequest`` per line, a
session each, as the OpenTelemetry Collector's file exporter writes them), or posted to an
OTLP/HTTP collector's ``/v1/traces`` with ``endpoint``, a few sessions a request: as protobuf
(``application/x-protobuf``, the official ``opentelemetry-proto`` messages, the encoding every
collector takes) unless ``encoding`` is ``json``.

Span bounds: a model call's ``at`` is when its request was sent, so its ``chat`` span is
``[at, at + latency]``; a browser operation's ``at`` is when it returned, so its span is
``[at - duration, at]``; a step spans its screenshot, calls and operations.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from ownloop.errors import OwnloopError
from ownloop.replay.fold import Session, Step
from ownloop.replay.progress import StepProgress
from ownloop.replay.render import actions_text
from ownloop.store import Store
from ownloop.store.events import BrowserActed, ImagePart, Message, ModelCalled, TextPart
from ownloop.store.queries import Selection
from ownloop.transfer.batches import BlobFiles, each_session, empty_folder, picked
from ownloop.transfer.collector import Endpoint, parse_endpoint, post
from ownloop.version import __version__

__all__ = ["ATTRIBUTE_LIMIT", "ENCODINGS", "TEXT_INLINE", "export_otlp", "session_trace"]

ENCODINGS = ("protobuf", "json")
_CONTENT_TYPES = {"protobuf": "application/x-protobuf", "json": "application/json"}

TEXT_INLINE = 2048  # characters of a message part kept inline
ATTRIBUTE_LIMIT = 32 * 1024  # bytes of an attribute value kept inline (backends cap at 64 KiB+)
_SESSIONS_PER_POST = 16
_INTERNAL, _CLIENT = 1, 3  # SpanKind
_UNSET, _ERROR = 0, 2  # StatusCode
_FAILED = frozenset({"error", "crashed", "endpoint_error", "parse_error", "timeout"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _nanos(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 is a string in OTLP/JSON
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


class _Builder:
    """The spans of one session; big values go to ``files``."""

    def __init__(self, session: Session, files: BlobFiles) -> None:
        self.session = session
        self.files = files
        self.trace_id = hashlib.sha256(f"ownloop:{session.session_id}".encode()).hexdigest()[:32]
        self.spans: list[dict[str, Any]] = []

    def span_id(self, key: str) -> str:
        name = f"{self.session.session_id}:{key}"
        return hashlib.sha256(name.encode()).hexdigest()[:16]

    def attributes(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for key, value in values.items():
            if value is None or value == "":
                continue
            if isinstance(value, str) and len(value.encode()) > ATTRIBUTE_LIMIT:
                _sha, path = self.files.text(value)
                key, value = f"{key}_ref", path
            out.append({"key": key, "value": _value(value)})
        return out

    def add(
        self,
        key: str,
        parent: str | None,
        name: str,
        kind: int,
        start: datetime,
        end: datetime,
        values: dict[str, Any],
        error: str | None = None,
    ) -> str:
        span_id = self.span_id(key)
        span: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": span_id,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": str(_nanos(min(start, end))),
            "endTimeUnixNano": str(_nanos(end)),
            "attributes": self.attributes(values),
        }
        if parent is not None:
            span["parentSpanId"] = parent
        if error is not None:
            span["status"] = {"code": _ERROR, "message": error[:1000]}
        self.spans.append(span)
        return span_id

    def part(self, part: TextPart | ImagePart) -> dict[str, Any]:
        if isinstance(part, ImagePart):
            path = self.files.path_of(part.sha256, part.media_type)
            return {
                "type": "uri",
                "modality": "image",
                "mime_type": part.media_type,
                "uri": path or f"blobs/{part.sha256}",
            }
        return self.text_part(part.text)

    def text_part(self, text: str) -> dict[str, Any]:
        if len(text) <= TEXT_INLINE:
            return {"type": "text", "content": text}
        _sha, path = self.files.text(text)
        return {"type": "uri", "modality": "text", "mime_type": "text/plain", "uri": path}

    def messages(self, messages: tuple[Message, ...]) -> str:
        return json.dumps(
            [{"role": m.role, "parts": [self.part(p) for p in m.parts]} for m in messages],
            ensure_ascii=False,
        )


def _end_of(session: Session) -> datetime:
    if session.outcome is not None:
        return session.outcome.at
    moments = [e.at for s in session.steps for e in (*s.calls, *s.effects)]
    moments += [s.screenshot.at for s in session.steps if s.screenshot is not None]
    return max(moments, default=session.started_at or _EPOCH)


def _step_bounds(step: Step, fallback: datetime) -> tuple[datetime, datetime]:
    starts, ends = [], []
    if step.screenshot is not None:
        starts.append(step.screenshot.at)
        ends.append(step.screenshot.at)
    for call in step.calls:
        starts.append(call.at)
        ends.append(_after(call.at, call.latency_ms))
    for effect in step.effects:
        starts.append(_before(effect.at, effect.duration_ms))
        ends.append(effect.at)
    return min(starts, default=fallback), max(ends, default=fallback)


def _before(moment: datetime, milliseconds: float) -> datetime:
    return moment - timedelta(milliseconds=max(milliseconds, 0.0))


def _after(moment: datetime, milliseconds: float) -> datetime:
    return moment + timedelta(milliseconds=max(milliseconds, 0.0))


def session_trace(session: Session, files: BlobFiles) -> dict[str, Any]:
    """One session as an ``ExportTraceServiceRequest`` (OTLP/JSON), its blobs under ``files``."""
    builder = _Builder(session, files)
    started = session.started_at or _EPOCH
    outcome = session.outcome
    grade = session.latest_grade
    status = outcome.status if outcome is not None else "unfinished"
    root = builder.add(
        "session",
        None,
        f"invoke_agent {session.agent or 'agent'}",
        _INTERNAL,
        started,
        _end_of(session),
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": session.agent,
            "gen_ai.request.model": session.model,
            "gen_ai.conversation.id": session.session_id,
            "ownloop.session_id": session.session_id,
            "ownloop.run_id": session.run_id,
            "ownloop.task_id": session.task_id,
            "ownloop.status": status,
            "ownloop.answer": outcome.answer if outcome is not None else None,
            "ownloop.steps": len(session.steps),
            "ownloop.passed": grade.passed if grade is not None else None,
            "ownloop.score": grade.score if grade is not None else None,
        },
        error=(outcome.error or status) if status in _FAILED and outcome else None,
    )
    for step in session.steps:
        _step_spans(builder, root, step, started)
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": builder.attributes(
                        {"service.name": "ownloop", "service.version": __version__}
                    )
                },
                "scopeSpans": [
                    {"scope": {"name": "ownloop", "version": __version__}, "spans": builder.spans}
                ],
            }
        ]
    }


def _step_spans(builder: _Builder, root: str, step: Step, fallback: datetime) -> None:
    start, end = _step_bounds(step, fallback)
    shot = step.screenshot
    screenshot = (
        builder.part(ImagePart(sha256=shot.sha256, media_type=shot.media_type))["uri"]
        if shot is not None
        else None
    )
    parent = builder.add(
        f"step:{step.step}",
        root,
        f"step {step.step}",
        _INTERNAL,
        start,
        end,
        {
            "ownloop.step": step.step,
            "ownloop.url": shot.url if shot else None,
            "ownloop.screenshot": screenshot,
            "ownloop.screenshot.sha256": shot.sha256 if shot else None,
            "ownloop.actions": actions_text(step.actions) if step.parsed else None,
            "ownloop.thought": step.thought or None,
        },
    )
    parses = {p.call_id: p for p in step.parses}
    for call in step.calls:
        _call_span(builder, parent, step, call, parses.get(call.call_id))
    for effect in step.effects:
        _op_span(builder, parent, step, effect)


def _call_span(builder: _Builder, parent: str, step: Step, call: ModelCalled, parse: Any) -> None:
    sampling = call.sampling
    output = None
    if call.response is not None:
        output = json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [builder.text_part(call.response)],
                    "finish_reason": call.finish_reason or "",
                }
            ],
            ensure_ascii=False,
        )
    builder.add(
        f"call:{call.call_id}",
        parent,
        f"chat {call.model or 'model'}",
        _CLIENT,
        call.at,
        _after(call.at, call.latency_ms),
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": call.model,
            "gen_ai.response.model": call.model if call.response is not None else None,
            "gen_ai.request.temperature": sampling.temperature,
            "gen_ai.request.top_p": sampling.top_p,
            "gen_ai.request.max_tokens": sampling.max_tokens,
            "gen_ai.request.frequency_penalty": sampling.frequency_penalty,
            "gen_ai.usage.input_tokens": call.prompt_tokens,
            "gen_ai.usage.output_tokens": call.completion_tokens,
            "gen_ai.response.finish_reasons": [call.finish_reason] if call.finish_reason else None,
            "gen_ai.input.messages": builder.messages(call.messages) if call.messages else None,
            "gen_ai.output.messages": output,
            "ownloop.step": step.step,
            "ownloop.call_id": call.call_id,
            "ownloop.purpose": call.purpose,
            "ownloop.attempt": call.attempt,
            "ownloop.latency_ms": call.latency_ms,
            "ownloop.served_by": call.served_by,
            "ownloop.parse_error": parse.error if parse is not None else None,
            "error.type": "model_call" if call.error else None,
        },
        error=call.error,
    )


def _op_span(builder: _Builder, parent: str, step: Step, effect: BrowserActed) -> None:
    op = msgspec.to_builtins(effect.op)
    name = str(op.pop("op"))
    element = effect.element
    builder.add(
        f"op:{step.step}:{effect.idx}",
        parent,
        f"browser {name}",
        _INTERNAL,
        _before(effect.at, effect.duration_ms),
        effect.at,
        {
            "ownloop.op": name,
            "ownloop.op.arguments": json.dumps(op, ensure_ascii=False),
            "ownloop.step": step.step,
            "ownloop.action_idx": effect.action_idx,
            "ownloop.ok": effect.ok,
            "ownloop.duration_ms": effect.duration_ms,
            "ownloop.url_before": effect.url_before,
            "ownloop.url_after": effect.url_after,
            "ownloop.element.css_path": element.css_path if element else None,
            "ownloop.element.role": element.role if element else None,
            "ownloop.element.name": element.name if element else None,
            "error.type": "browser_operation" if not effect.ok else None,
        },
        error=None if effect.ok else (effect.error or "failed"),
    )


def export_otlp(
    store: Store,
    selection: Selection,
    out: str | Path,
    endpoint: str | None = None,
    encoding: str = "protobuf",
) -> list[str]:
    """Write the selected sessions as OTLP/JSON traces under ``out`` (or post them to
    ``endpoint`` in ``encoding``: ``protobuf`` or ``json``); the lines to print.

    Raises:
        OwnloopError: no session selected, ``out`` is not an empty folder, or the collector
            refused a request or could not be reached.
    """
    if encoding not in ENCODINGS:
        raise OwnloopError(f"unknown OTLP encoding {encoding!r}. Choose protobuf or json")
    url = parse_endpoint(endpoint) if endpoint else None  # parsed once, before any work
    ids = picked(store, selection)
    root = empty_folder(out)
    files = BlobFiles(store, root, "blobs")
    spans = 0
    pending: list[dict[str, Any]] = []
    with StepProgress("export otlp", "session", len(ids)) as progress:
        sink = (root / "traces.jsonl").open("w", encoding="utf-8") if url is None else None
        try:
            for done, session in enumerate(each_session(store, ids), start=1):
                trace = session_trace(session, files)
                spans += len(trace["resourceSpans"][0]["scopeSpans"][0]["spans"])
                if sink is not None:
                    sink.write(json.dumps(trace, ensure_ascii=False) + "\n")
                else:
                    pending.append(trace)
                    if len(pending) >= _SESSIONS_PER_POST:
                        _post(url, pending, encoding)
                        pending = []
                progress.advance(done)
            if pending:
                _post(url, pending, encoding)
        finally:
            if sink is not None:
                sink.close()
    where = f"sent to {url.shown}" if url else f"{root / 'traces.jsonl'}"
    shape = "OTLP/protobuf" if url and encoding == "protobuf" else "OTLP/JSON"
    return [f"{where}: {len(ids)} traces, {spans} spans ({shape})", *files.lines("blobs")]


def _encoded(payload: dict[str, Any], encoding: str) -> bytes:
    """The request body: OTLP/JSON as is, or the same request as the official protobuf message
    (OTLP/JSON's hex trace and span ids become their bytes)."""
    if encoding == "json":
        return json.dumps(payload, ensure_ascii=False).encode()
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    def ids_as_base64(span: dict[str, Any]) -> dict[str, Any]:
        # The proto's JSON mapping reads bytes as base64; OTLP/JSON writes ids as hex.
        fixed = dict(span)
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in fixed:
                fixed[key] = base64.b64encode(bytes.fromhex(fixed[key])).decode()
        return fixed

    resources = [
        {
            **resource,
            "scopeSpans": [
                {**scope, "spans": [ids_as_base64(span) for span in scope["spans"]]}
                for scope in resource["scopeSpans"]
            ],
        }
        for resource in payload["resourceSpans"]
    ]
    message = json_format.ParseDict({"resourceSpans": resources}, ExportTraceServiceRequest())
    return bytes(message.SerializeToString())


def _post(url: Endpoint | None, traces: list[dict[str, Any]], encoding: str = "protobuf") -> None:
    assert url is not None  # (posting: no traces.jsonl is written)
    payload = {"resourceSpans": [r for t in traces for r in t["resourceSpans"]]}
    other = "--otlp-encoding json" if encoding == "protobuf" else "the default protobuf"

    def fix(code: int) -> str:
        if code == 415:
            return f"Send the other encoding: {other}"
        return "Check --endpoint (the OTLP/HTTP base URL, e.g. http://127.0.0.1:4318)"

    post(url, _encoded(payload, encoding), _CONTENT_TYPES[encoding], fix)
