"""The model client: one OpenAI-compatible endpoint, every attempt recorded as a ModelCalled event.

Images travel as blob references inside events and are inlined as base64 data URLs only on the
wire, so rebuilding a request from the journal gives back exactly the bytes that were sent. The
API key is handed to the ``openai`` client and nowhere else: it never reaches an event.
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import openai

from ownloop.store.events import ImagePart, Message, ModelCalled, Sampling, TextPart, now
from ownloop.store.ids import new_id

__all__ = ["CallOutcome", "ModelClient", "public_endpoint", "wire_messages"]

_TRANSIENT = (
    openai.APIConnectionError,  # refused, reset, DNS, and APITimeoutError (a subclass)
    openai.InternalServerError,
    openai.RateLimitError,
)


def public_endpoint(url: str) -> str:
    """The endpoint URL with any user:password removed, fit to record."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class _DataUrls:
    """base64 data URLs of recent blobs: history images are resent at every step."""

    def __init__(self, load: Callable[[str], bytes], size: int = 16) -> None:
        self._load = load
        self._size = size
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, part: ImagePart) -> str:
        with self._lock:
            url = self._cache.get(part.sha256)
            if url is not None:
                self._cache.move_to_end(part.sha256)
                return url
        url = f"data:{part.media_type};base64," + base64.b64encode(self._load(part.sha256)).decode()
        with self._lock:
            self._cache[part.sha256] = url
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return url


def wire_messages(
    messages: Sequence[Message], data_url: Callable[[ImagePart], str]
) -> list[dict[str, Any]]:
    """Messages in the OpenAI chat format; a message of one text part becomes a plain string."""
    wire = []
    for message in messages:
        if len(message.parts) == 1 and isinstance(message.parts[0], TextPart):
            wire.append({"role": message.role, "content": message.parts[0].text})
            continue
        content: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            else:
                content.append({"type": "image_url", "image_url": {"url": data_url(part)}})
        wire.append({"role": message.role, "content": content})
    return wire


class CallOutcome(NamedTuple):
    """The result of one logical call: the events of every attempt and the final answer."""

    events: list[ModelCalled]
    text: str | None  # None when every attempt failed
    finish_reason: str | None
    error: str | None


class ModelClient:
    """Calls the endpoint, retrying transport failures ``retries`` times, ``retry_wait_s`` apart."""

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        load_blob: Callable[[str], bytes],
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        retry_wait_s: float = 5.0,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.endpoint = public_endpoint(endpoint)
        self.model = model
        self.retries = retries
        self.retry_wait_s = retry_wait_s
        self._extra_body = extra_body
        self._data_url = _DataUrls(load_blob)
        self._secrets = tuple(x for x in (api_key,) if x and len(x) >= 4)
        self._client = openai.OpenAI(
            base_url=endpoint, api_key=api_key or "EMPTY", timeout=timeout_s, max_retries=0
        )

    def call(
        self,
        messages: tuple[Message, ...],
        sampling: Sampling,
        *,
        run_id: str,
        session_id: str,
        step: int,
        attempt: int,
        purpose: str,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> CallOutcome:
        """One call of the agent loop; transport failures are retried and each try recorded."""
        wire = wire_messages(messages, self._data_url)
        kwargs: dict[str, Any] = {"model": self.model, "messages": wire}
        if sampling.temperature is not None:
            kwargs["temperature"] = sampling.temperature
        if sampling.top_p is not None:
            kwargs["top_p"] = sampling.top_p
        if sampling.max_tokens is not None:
            kwargs["max_tokens"] = sampling.max_tokens
        if sampling.frequency_penalty is not None:
            kwargs["frequency_penalty"] = sampling.frequency_penalty
        if self._extra_body:
            kwargs["extra_body"] = self._extra_body
        events: list[ModelCalled] = []
        error: str | None = None
        for transport_try in range(self.retries + 1):
            if transport_try:
                _sleep_unless(should_stop, self.retry_wait_s)
                if should_stop():
                    break
            started = time.perf_counter()
            base = dict(
                at=now(), run_id=run_id, session_id=session_id, step=step, call_id=new_id(),
                attempt=attempt, purpose=purpose if not transport_try else "retry",
                model=self.model, messages=messages, sampling=sampling,
            )
            try:
                reply = self._client.chat.completions.create(**kwargs)
            except _TRANSIENT as exc:
                error = self._scrub(_one_line(exc))
                events.append(ModelCalled(
                    **base, error=error, latency_ms=_ms(started)))  # type: ignore[arg-type]
                continue
            except openai.APIError as exc:  # 4xx: retrying will not help
                error = self._scrub(_one_line(exc))
                events.append(ModelCalled(
                    **base, error=error, latency_ms=_ms(started)))  # type: ignore[arg-type]
                break
            choice = reply.choices[0] if reply.choices else None
            text = (choice.message.content or "") if choice else ""
            finish = choice.finish_reason if choice else None
            usage = reply.usage
            # A cassette endpoint (serve-model --cassette) says how it matched the request.
            fingerprint = getattr(reply, "system_fingerprint", None)
            served_by = fingerprint if isinstance(fingerprint, str) \
                and fingerprint.startswith("cassette:") else ""
            events.append(ModelCalled(
                **base,  # type: ignore[arg-type]
                response=text,
                finish_reason=finish,
                prompt_tokens=usage.prompt_tokens if usage else None,
                completion_tokens=usage.completion_tokens if usage else None,
                latency_ms=_ms(started),
                served_by=served_by,
            ))
            return CallOutcome(events, text, finish, None)
        return CallOutcome(events, None, None, error or "stopped")

    def _scrub(self, text: str) -> str:
        """Error texts can echo the key back (e.g. an auth error): never let it reach an event."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return re.sub(r"(?i)(bearer\s+)\S+", r"\1***", text)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _one_line(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:500]


def _sleep_unless(should_stop: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not should_stop():
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
