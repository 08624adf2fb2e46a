"""``ownloop export --format sft``: recorded steps as fine-tuning records in the model's own form.

One record per step (or per session with ``per_session``): the request ownloop sent for the
step's accepted model call (``ModelCalled.messages``: the agent's own system prompt, history and
image window, as its ``build_messages`` rendered them) and that call's response as the target.
Only steps whose response parsed when recorded are written (a step that did not parse taught the
model nothing it should learn); how many were left out is counted.

Two forms of the request (``agent_format``):

- ``chat``: ``{"messages": [...], "images": [...]}``, the conversational form SFT trainers read:
  content parts ``{"type": "text", "text": ...}`` and ``{"type": "image"}`` (the n-th image part
  is ``images[n]``), the target appended as the last assistant message.
- ``native``: ``{"request": {...}, "target": ...}``, the chat-completion body exactly as sent
  (``model``, ``messages`` with ``image_url`` parts, sampling), each image's URL the relative path
  of its file instead of the base64 data URL that went over the wire.

Images are written once each as ``images/<sha256>.<ext>`` (so a file's name is its check); with
``parquet`` they are embedded instead, as ``{"bytes", "path"}`` structs with the ``datasets``
library's feature metadata (``images`` is a list of ``Image``). Every target is parsed again with
today's agent (made with its run's recorded settings) and compared with the recorded actions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import msgspec

from ownloop.agents import Agent
from ownloop.agents.chat_format import wire_messages
from ownloop.agents.recorded import agent_for
from ownloop.errors import OwnloopError
from ownloop.replay.fold import Session, Step
from ownloop.replay.progress import StepProgress
from ownloop.replay.reparse import reparse_session
from ownloop.replay.runs import recorded_settings
from ownloop.store import Store
from ownloop.store.blobs import BlobStore, MissingBlob
from ownloop.store.events import ImagePart, Message, ModelCalled, Sampling, TextPart
from ownloop.store.images import PIXEL_BUDGET, over_budget
from ownloop.store.queries import Selection
from ownloop.transfer.batches import BlobFiles, each_session, empty_folder, picked

__all__ = [
    "AGENT_FORMATS",
    "SftCounts",
    "chat_record",
    "export_sft",
    "native_record",
    "sft_records",
]

AgentFormat = Literal["native", "chat"]
AGENT_FORMATS: tuple[str, ...] = ("native", "chat")
_ROW_GROUP = 256  # Parquet rows buffered before a row group is written ...
_ROW_GROUP_BYTES = 32 << 20  # ... or image bytes: screenshots repeat in each step's window
_SESSION_KEYS = ("session_id", "run_id", "task_id", "agent", "model")


class SftCounts(msgspec.Struct, kw_only=True):
    """What an SFT export counted."""

    sessions: int = 0
    records: int = 0
    steps: int = 0  # exported steps
    unparsed: int = 0  # steps left out: their response did not parse when recorded
    no_request: int = 0  # steps left out: no request was recorded (e.g. an imported run)
    too_large: int = 0  # steps left out: an image over the pixel budget
    first_too_large: str = ""
    checked: int = 0  # exported targets parsed again
    differ: int = 0  # of them, those whose actions differ today (or that fail to parse)
    first_differ: str = ""
    unchecked: list[str] = msgspec.field(default_factory=list)  # agents that could not be made

    def lines(self) -> list[str]:
        lines = [f"{self.steps} steps from {self.sessions} sessions"]
        if self.unparsed:
            lines.append(
                f"{self.unparsed} steps left out: their response did not parse when recorded"
            )
        if self.no_request:
            lines.append(
                f"{self.no_request} steps left out: no request was recorded for them "
                "(imported runs keep responses only)"
            )
        if self.too_large:
            lines.append(
                f"{self.too_large} steps left out: an image of theirs is over the "
                f"{PIXEL_BUDGET // 1_000_000} M pixel budget (first: {self.first_too_large})"
            )
        if self.checked:
            if self.differ:
                lines.append(
                    f"re-parse: {self.differ} of {self.checked} targets do not give "
                    f"back the recorded actions today (first: {self.first_differ}). "
                    "See them with: ownloop replay --reparse"
                )
            else:
                lines.append(f"re-parse: all {self.checked} targets give back the recorded actions")
        for agent in self.unchecked:
            lines.append(f"re-parse: skipped for {agent}")
        return lines


def _accepted_call(step: Step) -> ModelCalled | None:
    parsed = step.parsed
    if parsed is None or parsed.error is not None:
        return None
    return next((c for c in step.calls if c.call_id == parsed.call_id), None)


def chat_record(messages: tuple[Message, ...], target: str, image_path: Any) -> dict[str, Any]:
    """The conversational form: messages with image placeholders, the target appended.

    Args:
        messages: the request as recorded.
        target: the response.
        image_path: called with each ``ImagePart``; returns its relative path (or bytes struct).
    """
    out: list[dict[str, Any]] = []
    images: list[Any] = []
    for message in messages:
        content: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            else:
                content.append({"type": "image"})
                images.append(image_path(part))
        out.append({"role": message.role, "content": content})
    out.append({"role": "assistant", "content": [{"type": "text", "text": target}]})
    return {"messages": out, "images": images}


def native_record(
    model: str, messages: tuple[Message, ...], sampling: Sampling, target: str, image_path: Any
) -> dict[str, Any]:
    """The chat-completion body as sent (images by relative path), and the target."""
    images: list[Any] = []

    def path_of(part: ImagePart) -> str:
        path = image_path(part)
        images.append(path)
        return str(path)

    wire = wire_messages(messages, path_of)
    request: dict[str, Any] = {"model": model, "messages": wire}
    request.update(msgspec.to_builtins(sampling))
    return {"request": request, "target": target, "images": images}


def sft_records(
    session: Session,
    agent_format: AgentFormat,
    image_path: Any,
    counts: SftCounts,
    blobs: BlobStore | None = None,
) -> Iterator[dict[str, Any]]:
    """One record per exported step of ``session`` (steps left out are counted); with
    ``blobs``, a step with an image over the pixel budget is left out too."""
    for step in session.steps:
        if step.parsed is None and not step.calls:
            continue
        call = _accepted_call(step)
        if call is None:
            counts.unparsed += 1
            continue
        if not call.messages or call.response is None:
            counts.no_request += 1
            continue
        if blobs is not None and _too_large(blobs, call.messages):
            counts.too_large += 1
            counts.first_too_large = counts.first_too_large or (
                f"{session.session_id} step {step.step}"
            )
            continue
        if agent_format == "chat":
            body = chat_record(call.messages, call.response, image_path)
        else:
            body = native_record(
                call.model or session.model, call.messages, call.sampling, call.response, image_path
            )
        counts.steps += 1
        yield {
            "id": f"{session.session_id}:{step.step}",
            "session_id": session.session_id,
            "run_id": session.run_id,
            "task_id": session.task_id,
            "agent": session.agent,
            "model": call.model or session.model,
            "step": step.step,
            "call_id": call.call_id,
            **body,
        }


class _Checker:
    """Parses every exported target again with the agent its run recorded."""

    def __init__(self, store: Store, counts: SftCounts) -> None:
        self.store = store
        self.counts = counts
        self._agents: dict[str, Agent | None] = {}

    def check(self, session: Session, exported: dict[int, str]) -> None:
        agent = self._agent(session)
        if agent is None or not exported:
            return
        changes, _count = reparse_session(session, agent)
        self.counts.checked += len(exported)
        for change in changes:
            if exported.get(change.step) == change.call_id and change.change != "ops":
                self.counts.differ += 1
                if not self.counts.first_differ:
                    self.counts.first_differ = f"{session.session_id} step {change.step}"

    def _agent(self, session: Session) -> Agent | None:
        key = f"{session.run_id}\0{session.agent}"
        if key not in self._agents:
            try:
                settings = recorded_settings(self.store, [session]).get(session.session_id, {})
                self._agents[key] = agent_for(session.agent, settings, {})
            except (OwnloopError, ImportError) as error:
                self._agents[key] = None
                self.counts.unchecked.append(f"{session.agent or '(no agent)'} ({error})")
        return self._agents[key]


def export_sft(
    store: Store,
    selection: Selection,
    out: str | Path,
    *,
    agent_format: str = "chat",
    per_session: bool = False,
    parquet: bool = False,
) -> list[str]:
    """Write the selected sessions' steps as SFT records under ``out``; the lines to print.

    Args:
        store: the store (read only).
        selection: the sessions (see ``batches.PASSED_AND_COUNTED`` for the CLI's default).
        out: a new or empty folder: ``sft.jsonl`` and ``images/``, or ``sft.parquet``.
        agent_format: ``chat`` or ``native`` (see the module's docstring).
        per_session: one record per session, its steps' records in ``steps``.
        parquet: write ``sft.parquet`` with the images embedded.

    Raises:
        OwnloopError: an unknown form, no session selected, or an ``out`` that is not an empty
            folder.
    """
    if agent_format not in AGENT_FORMATS:
        raise OwnloopError(
            f"unknown --agent-format {agent_format!r}. Choose one of: {', '.join(AGENT_FORMATS)}"
        )
    ids = picked(store, selection)
    root = empty_folder(out)
    counts = SftCounts()
    files = BlobFiles(store, root, "images")
    checker = _Checker(store, counts)
    form: AgentFormat = "chat" if agent_format == "chat" else "native"
    if parquet:
        target = root / "sft.parquet"
        _write_parquet(store, ids, target, form, files, counts, checker, per_session)
    else:
        target = root / "sft.jsonl"
        with (
            target.open("w", encoding="utf-8") as sink,
            StepProgress("export sft", "session", len(ids)) as progress,
        ):
            for done, session in enumerate(each_session(store, ids), start=1):
                records = list(sft_records(session, form, _path_of(files), counts, store.blobs))
                checker.check(session, {r["step"]: r["call_id"] for r in records})
                counts.sessions += 1
                if per_session and records:
                    records = [_per_session(session, records)]
                for record in records:
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                    counts.records += 1
                progress.advance(done)
    what = "sessions" if per_session else "steps"
    return [
        f"{target}: {counts.records} records ({what}, {form} form)",
        *counts.lines(),
        *files.lines("images"),
    ]


def _per_session(session: Session, records: list[dict[str, Any]]) -> dict[str, Any]:
    head = {key: records[0][key] for key in _SESSION_KEYS}
    return {**head, "id": session.session_id, "steps": records}


def _too_large(blobs: BlobStore, messages: tuple[Message, ...]) -> bool:
    """Whether an image of ``messages`` is over the pixel budget (measured from its header)."""
    for message in messages:
        for part in message.parts:
            if isinstance(part, ImagePart):
                try:
                    if over_budget(blobs.get_stored(part.sha256)):
                        return True
                except MissingBlob:
                    continue  # (BlobFiles names what is missing)
    return False


def _path_of(files: BlobFiles) -> Any:
    def path(part: ImagePart) -> str:
        return files.path_of(part.sha256, part.media_type)

    return path


def _write_parquet(
    store: Store,
    ids: list[str],
    target: Path,
    form: AgentFormat,
    files: BlobFiles,
    counts: SftCounts,
    checker: _Checker,
    per_session: bool,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def name(part: ImagePart) -> str:
        return f"{part.sha256}.{part.media_type.rpartition('/')[2] or 'png'}"

    buffered = 0  # image bytes in ``rows``

    def embedded(part: ImagePart) -> dict[str, Any]:
        nonlocal buffered
        data = files.bytes_of(part.sha256)
        buffered += len(data or b"")
        return {"bytes": data, "path": name(part)}

    schema = _parquet_schema(pa, form, per_session)
    rows: list[dict[str, Any]] = []
    with (
        pq.ParquetWriter(str(target), schema) as writer,
        StepProgress("export sft", "session", len(ids)) as progress,
    ):
        for done, session in enumerate(each_session(store, ids), start=1):
            records = list(sft_records(session, "chat", embedded, counts, store.blobs))
            checker.check(session, {r["step"]: r["call_id"] for r in records})
            counts.sessions += 1
            steps = {s.step: s for s in session.steps}
            for record in records:
                call = _accepted_call(steps[record["step"]])
                assert call is not None  # sft_records wrote only steps with one
                record["target"] = call.response
                if form == "native":
                    native = native_record(
                        record["model"], call.messages, call.sampling, call.response or "", name
                    )
                    record["request"] = json.dumps(native["request"], ensure_ascii=False)
            if per_session and records:
                records = [_per_session(session, records)]
            rows.extend(records)
            counts.records += len(records)
            if len(rows) >= _ROW_GROUP or buffered >= _ROW_GROUP_BYTES:
                writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                rows, buffered = [], 0
            progress.advance(done)
        if rows:
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))


def _parquet_schema(pa: Any, form: AgentFormat, per_session: bool) -> Any:
    """The rows' Arrow schema, with the ``datasets`` library's features in its ``huggingface``
    metadata (``images``: a list of ``Image``, each a ``{bytes, path}`` struct)."""
    part = pa.struct([("type", pa.string()), ("text", pa.string())])
    message = pa.struct([("role", pa.string()), ("content", pa.list_(part))])
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    fields = [
        ("id", pa.string()),
        ("session_id", pa.string()),
        ("run_id", pa.string()),
        ("task_id", pa.string()),
        ("agent", pa.string()),
        ("model", pa.string()),
        ("step", pa.int64()),
        ("call_id", pa.string()),
        ("messages", pa.list_(message)),
        ("images", pa.list_(image)),
        ("target", pa.string()),
    ]
    text = {"dtype": "string", "_type": "Value"}
    features: dict[str, Any] = {name: text for name, _ in fields}
    features["step"] = {"dtype": "int64", "_type": "Value"}
    features["messages"] = [{"role": text, "content": [{"type": text, "text": text}]}]
    features["images"] = {"feature": {"_type": "Image"}, "_type": "Sequence"}
    if form == "native":
        fields.append(("request", pa.string()))
        features["request"] = text
    if per_session:
        head = ("id", *_SESSION_KEYS)
        steps = features
        fields = [*((key, pa.string()) for key in head), ("steps", pa.list_(pa.struct(fields)))]
        features = {key: text for key in head}
        features["steps"] = [steps]
    metadata = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    return pa.schema(fields, metadata=metadata)
