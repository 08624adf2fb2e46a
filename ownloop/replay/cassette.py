"""The cassette: recorded model responses served in place of a model, in-process or over HTTP.

A cassette holds the successful model calls of one or more recorded sessions. A request is
matched, in this order:

1. ``cassette:exact`` — the same conversation: the sha256 of the request's messages (roles, texts,
   and each image as the sha256 of its decoded bytes) equals a recorded call's. Sampling, the model
   name and other request options are left out of the key on purpose: a harness that changes the
   temperature or the model's name still gets the recorded answer to the same conversation.
   In-process, a replay whose task moved to another origin (its recorded port was taken, or
   ``--base``) keys its texts with the task's recorded origin in place of the new one
   (``CassetteClient.moved``): the prompt names the start URL, and the conversation is otherwise
   the same.
   Re-samples of one step send the same messages, so the calls recorded with one key are served in
   the order they were recorded (then the last one again: a client's retry gets the same answer).
2. ``cassette:step`` — the same session and step with a changed screenshot: the request's text
   with its images left out equals a recorded call's (over HTTP, the only way); in-process, where
   the client replays one session, also the same step number of that session (so a replay whose
   start URL moved to another port still gets its step's response).
3. otherwise a miss, handled by the ``on_miss`` policy: ``stop`` (an error: in-process the
   session ends with ``endpoint_error`` and a message saying so; over HTTP a 409), ``forward``
   (the live model answers: in-process the live client, over HTTP the ``--forward`` URL) or
   ``force`` (``cassette:force``d: the next recorded response by position in the current session).

Every served response says how it matched: ``ModelCalled.served_by`` in-process, and over HTTP the
``x-ownloop-match`` header and the body's ``system_fingerprint`` (which ``ModelClient`` records as
``served_by``). Responses that came from a live model keep ``served_by = ""``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, get_args
from urllib.parse import urlsplit

import msgspec

from ownloop.errors import OwnloopError
from ownloop.modelserver.chat import HttpFault, Reply, Responder, steps_taken
from ownloop.modelserver.faults import FaultyResponder, parse_faults
from ownloop.modelserver.server import ModelServer
from ownloop.recorder.call import CallOutcome, CallRequest, ModelCaller
from ownloop.replay.fold import Session, fold
from ownloop.store import MissingBlob, Store
from ownloop.store.events import Message, TextPart
from ownloop.store.queries import has_session, latest_session_of_task, run_sessions

__all__ = [
    "ON_MISS",
    "OnMiss",
    "Cassette",
    "CassetteClient",
    "CassetteError",
    "CassetteResponder",
    "Keys",
    "Recording",
    "Served",
    "load_cassette",
    "make_cassette_server",
    "message_keys",
    "request_keys",
    "wire_digest",
]

OnMiss = Literal["stop", "forward", "force"]
ON_MISS: tuple[OnMiss, ...] = get_args(OnMiss)


class CassetteError(OwnloopError):
    pass


class Keys(NamedTuple):
    """A request's match keys: the whole conversation, and its text with images left out."""

    exact: str
    text: str


class Recording(NamedTuple):
    """One recorded, answered model call."""

    position: int  # within its session, in recording order
    session_id: str
    step: int
    attempt: int
    response: str
    finish_reason: str | None
    model: str
    keys: Keys


class Served(NamedTuple):
    recording: Recording
    how: str  # "cassette:exact", "cassette:step" or "cassette:force"


# ---------------------------------------------------------------- keys


def _digest(canonical: list[Any]) -> str:
    text = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _keys(messages: Sequence[tuple[str, Sequence[tuple[str, str]]]]) -> Keys:
    exact = [[role, [list(part) for part in parts]] for role, parts in messages]
    text = [
        [role, [[kind, value if kind == "t" else ""] for kind, value in parts]]
        for role, parts in messages
    ]
    return Keys(_digest(exact), _digest(text))


def message_keys(
    messages: Sequence[Message], image_digest: Callable[[str], str] | None = None
) -> Keys:
    """The match keys of a request the agent loop built (images are blob references; with
    ``image_digest``, each as the digest of the bytes a client sends for it, see
    ``wire_digest``)."""
    canonical = []
    for message in messages:
        parts = [
            ("t", part.text)
            if isinstance(part, TextPart)
            else ("i", image_digest(part.sha256) if image_digest else part.sha256)
            for part in message.parts
        ]
        canonical.append((message.role, parts))
    return _keys(canonical)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def _moved_back(messages: Sequence[Message], pattern: re.Pattern[str], old: str) -> list[Message]:
    """``messages`` with every text's ``pattern`` (the task's origin now) read as ``old``."""
    return [
        msgspec.structs.replace(
            message,
            parts=tuple(
                msgspec.structs.replace(part, text=pattern.sub(lambda _: old, part.text))
                if isinstance(part, TextPart)
                else part
                for part in message.parts
            ),
        )
        for message in messages
    ]


def _image_digest(url: str) -> str:
    if url.startswith("data:") and "," in url:
        try:
            return hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest()
        except (binascii.Error, ValueError):
            pass
    return "url:" + url  # a remote image or a broken data URL: the URL itself


def request_keys(request: dict[str, Any]) -> Keys:
    """The match keys of an OpenAI chat-completions body (images as data URLs).

    A message whose content is one string and one whose content is a list with one text part
    give the same key, as ``ModelClient`` sends a lone text part as a plain string.
    """
    canonical = []
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        parts: list[tuple[str, str]] = []
        if isinstance(content, str):
            parts.append(("t", content))
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    parts.append(("t", str(part.get("text", ""))))
                elif part.get("type") == "image_url":
                    image = part.get("image_url")
                    url = image.get("url") if isinstance(image, dict) else image
                    parts.append(("i", _image_digest(str(url))))
        canonical.append((str(message.get("role", "")), parts))
    return _keys(canonical)


# ---------------------------------------------------------------- the cassette


class Cassette:
    """The answered model calls of ``sessions``, served by match (see the module docstring).

    Thread-safe: one cassette may serve several HTTP requests at once.
    """

    def __init__(
        self, sessions: Sequence[Session], image_digest: Callable[[str], str] | None = None
    ) -> None:
        self.sessions = [session.session_id for session in sessions]
        self.recordings: dict[str, list[Recording]] = {}
        self._exact: dict[str, list[Recording]] = {}
        self._text: dict[str, list[Recording]] = {}
        self._steps: dict[tuple[str, int], list[Recording]] = {}
        for session in sessions:
            mine: list[Recording] = []
            for step in session.steps:
                for call in step.calls:
                    if call.response is None:  # a failed try: nothing to serve
                        continue
                    recording = Recording(
                        len(mine),
                        session.session_id,
                        step.step,
                        call.attempt,
                        call.response,
                        call.finish_reason,
                        call.model,
                        message_keys(call.messages, image_digest),
                    )
                    mine.append(recording)
                    self._exact.setdefault(recording.keys.exact, []).append(recording)
                    self._text.setdefault(recording.keys.text, []).append(recording)
                    self._steps.setdefault((session.session_id, step.step), []).append(recording)
            self.recordings[session.session_id] = mine
        self._served: set[tuple[str, int]] = set()
        self._current: str | None = self.sessions[0] if len(self.sessions) == 1 else None
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(len(recordings) for recordings in self.recordings.values())

    def serve(self, keys: Keys, step: int, *, by_number: bool = True) -> Served | None:
        """The recorded response for a request with ``keys`` at ``step``; None on a miss.

        ``by_number``: a step may also match by its number in the current session (the caller
        knows it replays that session); else only by its text with the images left out.
        """
        with self._lock:
            found = self._pick(self._exact.get(keys.exact))
            how = "cassette:exact"
            if found is None:
                found = self._pick(self._text.get(keys.text))
                if found is None and by_number and self._current is not None:
                    found = self._pick(self._steps.get((self._current, step)))
                how = "cassette:step"
            return self._take(found, how) if found is not None else None

    def force(self) -> Served | None:
        """The next recorded response by position in the current session; None when none is
        left (or no session was served yet in a cassette of several)."""
        with self._lock:
            if self._current is None:
                return None
            position = self._next.get(self._current, 0)
            recordings = self.recordings[self._current]
            if position >= len(recordings):
                return None
            return self._take(recordings[position], "cassette:force")

    def _pick(self, candidates: list[Recording] | None) -> Recording | None:
        if not candidates:
            return None
        # The current session's recordings first, the first one not served yet; when all were
        # served, the current session's last one again (a client retrying the same request).
        ranked = sorted(candidates, key=lambda r: r.session_id != self._current)
        for recording in ranked:
            if (recording.session_id, recording.position) not in self._served:
                return recording
        mine = [r for r in ranked if r.session_id == self._current or self._current is None]
        return mine[-1] if mine else None

    def _take(self, recording: Recording, how: str) -> Served:
        self._served.add((recording.session_id, recording.position))
        self._current = recording.session_id
        self._next[recording.session_id] = max(
            self._next.get(recording.session_id, 0), recording.position + 1
        )
        return Served(recording, how)


def wire_digest(store: Store) -> Callable[[str], str]:
    """The sha256 of the bytes a client replaying from ``store`` sends for a blob: its name,
    unless the blob was compacted, whose PNG is written again from its pixels (other bytes, the
    same image), so an HTTP request replayed from a compacted store still matches exactly."""
    seen: dict[str, str] = {}

    def digest(sha256: str) -> str:
        if sha256 not in seen:
            exact = store.blobs.has_exact(sha256)
            seen[sha256] = sha256 if exact else _wire_sha256(store, sha256)
        return seen[sha256]

    return digest


def _wire_sha256(store: Store, sha256: str) -> str:
    try:
        return hashlib.sha256(store.get_blob(sha256)).hexdigest()
    except MissingBlob:
        return sha256  # not there: nothing sends it either


def load_cassette(store: Store, target: str) -> Cassette:
    """The cassette of ``target``: a session id, a run id (its recorded sessions, replays left
    out) or a task id (its latest recorded session).

    Raises:
        CassetteError: nothing in the store is called ``target``, or it has no model responses.
    """
    if has_session(store, target):
        ids = [target]
    else:
        ids = [s.session_id for s in run_sessions(store, target)]
        if not ids:
            latest = latest_session_of_task(store, target)
            ids = [latest] if latest else []
    if not ids:
        raise CassetteError(
            f"no session, run or task {target!r} in {store.root}. List them with: ownloop sessions"
        )
    sessions = [fold(store.session_events(session_id)) for session_id in ids]
    cassette = Cassette(sessions, wire_digest(store))
    if not len(cassette):
        raise CassetteError(f"{target!r} has no recorded model responses to serve")
    return cassette


def _miss_message(step: int, on_miss: str) -> str:
    hint = (
        "the cassette has nothing left to force"
        if on_miss == "force"
        else "replay with --on-miss force (next recorded response) or forward (live model)"
    )
    return f"cassette miss at step {step}: no recorded response matches this request; {hint}"


# ---------------------------------------------------------------- in-process


class CassetteClient:
    """A model client serving a cassette, with ``ModelClient.call``'s signature.

    Args:
        cassette: the recorded responses.
        on_miss: ``stop``, ``forward`` (to ``live``) or ``force``.
        live: the live model for ``forward`` and for steps from ``live_from_step`` on.
        live_from_step: a fork's first live step; steps before it come from the cassette only.

    Raises:
        CassetteError: ``forward`` or ``live_from_step`` without a live client.
    """

    def __init__(
        self,
        cassette: Cassette,
        *,
        on_miss: OnMiss = "stop",
        live: ModelCaller | None = None,
        live_from_step: int | None = None,
    ) -> None:
        if on_miss not in ON_MISS:
            raise CassetteError(f"unknown --on-miss {on_miss!r}. Use one of: {', '.join(ON_MISS)}")
        if live is None and (on_miss == "forward" or live_from_step is not None):
            raise CassetteError("a live model is needed: pass --endpoint URL and --model NAME")
        self.cassette, self.on_miss = cassette, on_miss
        self.live, self.live_from_step = live, live_from_step
        self._moved: tuple[re.Pattern[str], str] | None = None

    def moved(self, recorded_url: str, url: str) -> CassetteClient:
        """This client for a replay whose task is now at ``url`` (recorded at ``recorded_url``):
        requests are keyed with the recorded origin in place of the new one, so a task served
        on another port (or ``--base``) still matches its recorded calls exactly. The same
        client when the origin did not move."""
        old, new = _origin(recorded_url), _origin(url)
        if not old or not new or old == new:
            return self
        client = CassetteClient(
            self.cassette, on_miss=self.on_miss, live=self.live, live_from_step=self.live_from_step
        )
        # The origin as a whole: not a prefix of a longer host or port (…:4521 in …:45210).
        client._moved = (re.compile(re.escape(new) + r"(?![\w.:-])"), old)
        return client

    def _keys(self, messages: Sequence[Message]) -> Keys:
        if self._moved is None:
            return message_keys(messages)
        return message_keys(_moved_back(messages, *self._moved))

    def call(self, request: CallRequest) -> CallOutcome:
        """One call of the agent loop, answered from the cassette (or the live model)."""
        step = request.context.step
        if (
            self.live is not None
            and self.live_from_step is not None
            and step >= self.live_from_step
        ):
            return self.live.call(request)
        started = time.perf_counter()
        served = self.cassette.serve(self._keys(request.messages), step)
        if served is None and self.on_miss == "forward" and self.live is not None:
            return self.live.call(request)
        if served is None and self.on_miss == "force":
            served = self.cassette.force()
        called = request.context.called(request.messages, request.sampling)
        if served is None:
            error = _miss_message(step, self.on_miss)
            event = msgspec.structs.replace(
                called, error=error, served_by="cassette:miss", latency_ms=_ms(started)
            )
            return CallOutcome([event], None, None, error)
        recording = served.recording
        event = msgspec.structs.replace(
            called,
            model=recording.model,
            response=recording.response,
            finish_reason=recording.finish_reason,
            served_by=served.how,
            latency_ms=_ms(started),
        )
        return CallOutcome([event], recording.response, recording.finish_reason, None)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


# ---------------------------------------------------------------- over HTTP


class CassetteResponder:
    """A ``ModelServer`` responder serving a cassette (``ownloop serve-model --cassette``).

    Args:
        cassette: the recorded responses.
        on_miss: ``stop`` (HTTP 409), ``forward`` (to ``forward``) or ``force``.
        forward: an OpenAI-compatible base URL (…/v1) that answers misses with ``forward``.
        timeout_s: how long a forwarded request may take.

    Raises:
        CassetteError: an unknown policy, or ``forward`` without a URL.
    """

    def __init__(
        self,
        cassette: Cassette,
        on_miss: OnMiss = "stop",
        forward: str | None = None,
        *,
        timeout_s: float = 120.0,
    ) -> None:
        if on_miss not in ON_MISS:
            raise CassetteError(f"unknown --on-miss {on_miss!r}. Use one of: {', '.join(ON_MISS)}")
        if on_miss == "forward" and not forward:
            raise CassetteError("--on-miss forward needs --forward URL (an OpenAI-compatible /v1)")
        self.cassette, self.on_miss, self.forward = cassette, on_miss, forward
        self.timeout_s = timeout_s

    def __call__(self, request: dict[str, Any]) -> Reply:
        # The step asked for, counted the way each agent shows its history (molmoweb's has no
        # assistant messages, opencua merges older steps into one): only a miss names it.
        step = steps_taken(request) + 1
        served = self.cassette.serve(request_keys(request), step, by_number=False)
        if served is None and self.on_miss == "forward":
            return self._forward(request)
        if served is None and self.on_miss == "force":
            served = self.cassette.force()
        if served is None:
            raise HttpFault(
                409, _miss_message(step, self.on_miss), error_type="invalid_request_error"
            )
        recording = served.recording
        return Reply(recording.response, recording.finish_reason or "stop", match=served.how)

    def _forward(self, request: dict[str, Any]) -> Reply:
        url = f"{str(self.forward).rstrip('/')}/chat/completions"
        body = json.dumps({**request, "stream": False}).encode()
        asked = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(asked, timeout=self.timeout_s) as answer:
                choice = json.loads(answer.read())["choices"][0]
            text = choice["message"]["content"] or ""
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise HttpFault(
                502,
                f"forwarding the cassette miss to {url} failed: {type(exc).__name__}: {exc}"[:500],
            ) from None
        return Reply(str(text), choice.get("finish_reason") or "stop", match="forward")


def make_cassette_server(
    store: Store,
    target: str,
    on_miss: OnMiss = "stop",
    forward: str | None = None,
    *,
    faults: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    log: Callable[[str], None] | None = None,
) -> ModelServer:
    """A not-yet-started ModelServer serving ``target``'s recorded responses
    (``ownloop serve-model --cassette TARGET``).

    Raises:
        CassetteError: no such target, an unknown policy, or ``forward`` without a URL.
        FaultSpecError: the fault plan does not parse.
    """
    responder: Responder = CassetteResponder(load_cassette(store, target), on_miss, forward)
    if faults:
        responder = FaultyResponder(responder, parse_faults(faults))
    return ModelServer(responder, host, port, models=(f"ownloop-cassette-{target}",), log=log)
