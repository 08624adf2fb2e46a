"""The model client: one OpenAI-compatible endpoint, every attempt recorded as a ModelCalled event.

Images travel as blob references inside events and are inlined as base64 data URLs only on the
wire, so rebuilding a request from the journal gives back exactly the bytes that were sent. The
API key is handed to the ``openai`` client and nowhere else: it never reaches an event.

Nothing from the endpoint enters an event unchecked. The body of every HTTP response is kept as a
blob, as received (credentials masked, see ``ownloop.store.scrub``), and ``read_completion`` takes
from it only what fits the event's types: a field that does not fit is left out and described in
the event's ``error`` (``bad response: finish_reason is int 7``), text is made valid UTF-8 (bad
bytes and lone surrogates become U+FFFD) and capped at ``MAX_RESPONSE_CHARS``.

What the agent gets (docs/recording.md, "A hostile or broken endpoint"):
- a chat completion, however odd its fields: its text ("" when the content is not text), so the
  agent's own rules for a bad response apply (re-sample, then ``parse_error``);
- a body that is not a chat completion at all (not JSON, an HTML page, an object without
  ``choices``): nothing, like a transport failure: it is retried and then the session ends
  ``endpoint_error`` (not graded, re-run on resume), because it is the server's fault, not the
  model's;
- HTTP 429 and 5xx: retried, honouring ``Retry-After`` up to ``MAX_RETRY_AFTER_S`` and the call
  timeout; other 4xx: not retried.
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit, urlunsplit

import msgspec

from ownloop.agents.chat_format import wire_messages
from ownloop.recorder.call import CallOutcome, CallRequest
from ownloop.recorder.probe import check_endpoint
from ownloop.store.events import ImagePart, ModelCalled
from ownloop.store.scrub import mask_secrets, scrub_bytes, scrub_text, url_secrets

__all__ = [
    "MAX_RESPONSE_CHARS",
    "MAX_RETRY_AFTER_S",
    "Completion",
    "ModelClient",
    "public_endpoint",
    "read_completion",
    "wire_messages",
]

MAX_RESPONSE_CHARS = 1_000_000
"""Response text kept beyond this is cut (the blob keeps all); every agent refuses 32,000+."""

MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` wait honoured (it is also at most the call timeout)."""

_MAX_FIELD_CHARS = 200  # finish_reason, system_fingerprint: short words in any real server
_MAX_TOKENS = 2**62
_SURROGATE = re.compile("[\ud800-\udfff]")


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


class Completion(NamedTuple):
    """What ``read_completion`` could take from a response body, each field of its event type."""

    is_completion: bool  # False: not a chat completion at all (not JSON, HTML, no choices)
    text: str  # "" when there is no usable text
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    served_by: str
    problems: tuple[str, ...]  # what did not fit, one phrase each

    @property
    def error(self) -> str | None:
        """The problems as the event's error text, or None."""
        return _cap("bad response: " + "; ".join(self.problems)) if self.problems else None


def read_completion(body: bytes, content_type: str = "") -> Completion:
    """The fields of a chat-completion body that fit ModelCalled, and what did not fit.

    Never raises: any bytes give a Completion (``is_completion`` False when the body is not one).
    """
    problems: list[str] = []
    try:
        decoded = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        decoded = body.decode("utf-8", "replace")
        problems.append(
            f"body is not valid UTF-8 (byte 0x{body[exc.start]:02x} at offset "
            f"{exc.start}; bad bytes replaced with U+FFFD)"
        )
    try:
        data = json.loads(decoded)
    except (ValueError, RecursionError):
        data = None
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list):
        return Completion(
            False,
            "",
            None,
            None,
            None,
            "",
            (*problems, _not_completion(data, decoded, len(body), content_type)),
        )
    assert isinstance(data, dict)  # for mypy: choices came from it
    choice = choices[0] if choices else None
    if not isinstance(choice, dict):
        problems.append("no choices" if not choices else f"choices[0] is {_describe(choice)}")
        choice = {}
    message = choice.get("message")
    if not isinstance(message, dict):
        if "message" in choice:
            problems.append(f"message is {_describe(message)}")
        message = {}
    text = _content_text(message.get("content"), problems)
    finish = _short_text("finish_reason", choice.get("finish_reason"), problems)
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        problems.append(f"usage is {_describe(usage)}")
        usage = None
    prompt_tokens = _count("usage.prompt_tokens", (usage or {}).get("prompt_tokens"), problems)
    completion_tokens = _count(
        "usage.completion_tokens", (usage or {}).get("completion_tokens"), problems
    )
    # A cassette endpoint (serve-model --cassette) says how it matched the request.
    fingerprint = data.get("system_fingerprint")
    served_by = ""
    if isinstance(fingerprint, str) and fingerprint.startswith("cassette:"):
        served_by = _short_text("system_fingerprint", fingerprint, problems) or ""
    return Completion(
        True, text, finish, prompt_tokens, completion_tokens, served_by, tuple(problems)
    )


def _content_text(content: object, problems: list[str]) -> str:
    """message.content as text: a string, the text parts of a list joined, else ""."""
    if content is None:
        return ""  # a tool-call answer: no text, not a fault of the body
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            if (
                isinstance(part, dict)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                texts.append(part["text"])
            else:
                problems.append(f"content[{index}] is {_describe(part)}, not a text part")
        text = "".join(texts)
    elif isinstance(content, str):
        text = content
    else:
        problems.append(f"content is {_describe(content)}")
        return ""
    text, replaced = _valid_text(text)
    if replaced:
        problems.append(f"{replaced} lone surrogate(s) in content replaced with U+FFFD")
    if len(text) > MAX_RESPONSE_CHARS:
        problems.append(
            f"content is {len(text)} characters; the first {MAX_RESPONSE_CHARS} "
            "kept (the blob has the whole body)"
        )
        text = text[:MAX_RESPONSE_CHARS]
    return text


def _short_text(name: str, value: object, problems: list[str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        problems.append(f"{name} is {_describe(value)}")
        return None
    text, replaced = _valid_text(value)
    if replaced or len(text) > _MAX_FIELD_CHARS:
        problems.append(f"{name} is {_describe(value)}")
        return None
    return text


def _count(name: str, value: object, problems: list[str]) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= _MAX_TOKENS:  # bool is an int: refused too
        problems.append(f"{name} is {_describe(value)}")
        return None
    return value


def _not_completion(data: object, decoded: str, size: int, content_type: str) -> str:
    what = content_type.split(";")[0].strip() or "no content type"
    if data is None:
        start, _ = _valid_text(" ".join(decoded[:80].split()))
        return f"body is not JSON ({what}, {size} bytes): {start!r}"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return f"body is an error, not a completion: {_describe(error)}"
        return f"body is a JSON object without a choices list ({size} bytes)"
    return f"body is JSON {_describe(data)}, not a completion object"


def _describe(value: object) -> str:
    """``int 7``, ``str '12'``, ``list of 2 items``: a value's type and a short, clean view."""
    kind = "null" if value is None else type(value).__name__
    if isinstance(value, list | dict):
        return f"{kind} of {len(value)} item{'s' if len(value) != 1 else ''}"
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{kind} {_valid_text(shown)[0]}"


def _valid_text(text: str) -> tuple[str, int]:
    """``text`` with lone surrogates (which no UTF-8 file can hold) replaced by U+FFFD."""
    return _SURROGATE.subn("\ufffd", text)


def _cap(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Try(NamedTuple):
    """One HTTP attempt, each field ready for its ModelCalled."""

    text: str | None  # the text handed to the agent; None: no usable response
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    served_by: str = ""
    error: str | None = None
    http_status: int | None = None
    body: bytes | None = None  # the body as received, credentials masked
    retry: bool = False  # worth another try (transport failure, 429, 5xx, not a completion)
    retry_after_s: float | None = None  # what the server's Retry-After asked for


class ModelClient:
    """Calls the endpoint, retrying transport failures ``retries`` times, ``retry_wait_s`` apart.

    ``user:password@`` in ``endpoint`` is sent as HTTP Basic auth (it takes the Authorization
    header, so the API key is then not sent: use one or the other) and never recorded.

    Args:
        load_blob: the bytes of an image blob (requests carry images as blob references).
        put_blob: stores a response body and returns its sha256 (``Store.put_blob``); without it
            ``response_blob`` stays None.
    """

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        load_blob: Callable[[str], bytes],
        put_blob: Callable[[bytes], str] | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        retry_wait_s: float = 5.0,
    ) -> None:
        import openai  # here, not at the top: ~3 s of CPU a run refused earlier does not pay

        self.endpoint = public_endpoint(endpoint)
        self.model = model
        self.retries = retries
        self.retry_wait_s = retry_wait_s
        self.timeout_s = timeout_s
        self._data_url = _DataUrls(load_blob)
        self._put_blob = put_blob
        self._secrets = tuple(x for x in (api_key, *url_secrets(endpoint)) if x and len(x) >= 4)
        self._has_key = bool(api_key)
        base_url, basic = _split_userinfo(endpoint)
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "EMPTY",
            timeout=timeout_s,
            max_retries=0,
            default_headers={"Authorization": f"Basic {basic}"} if basic else None,
        )

    def close(self) -> None:
        """Close the client's connections to the endpoint (kept alive between calls)."""
        self._client.close()

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self, timeout_s: float = 10.0) -> None:
        """Refuse (``EndpointUnusable``, one line) unless the endpoint answers and serves the
        model; see :mod:`ownloop.recorder.probe`."""
        check_endpoint(
            self._client,
            self.endpoint,
            self.model,
            has_key=self._has_key,
            timeout_s=min(timeout_s, self.timeout_s),
            clean=self._clean,
        )

    def call(self, request: CallRequest) -> CallOutcome:
        """One call of the agent loop; transport failures are retried and each try recorded
        (the first with the context's purpose, the others ``retry``)."""
        messages, sampling, context, should_stop = request
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
        if sampling.chat_template_kwargs:
            kwargs["extra_body"] = {"chat_template_kwargs": dict(sampling.chat_template_kwargs)}
        if context.purpose not in ("resample", "judge"):
            context = context._replace(purpose="step")
        events: list[ModelCalled] = []
        error: str | None = None
        wait_s = self.retry_wait_s
        for transport_try in range(self.retries + 1):
            if transport_try:
                _sleep_unless(should_stop, wait_s)
                if should_stop():
                    break
                context = context._replace(purpose="retry")
            started = time.perf_counter()
            called = context.called(messages, sampling, model=self.model)
            done = self._attempt(kwargs)
            latency_ms = _ms(started)
            error = done.error
            wait_s = self.retry_wait_s
            if done.retry and done.retry_after_s is not None and transport_try < self.retries:
                wait_s = min(done.retry_after_s, MAX_RETRY_AFTER_S, self.timeout_s)
                error = f"{error}; Retry-After {done.retry_after_s:g} s: retrying in {wait_s:g} s"
            events.append(
                msgspec.structs.replace(
                    called,
                    response=done.text,
                    finish_reason=done.finish_reason,
                    prompt_tokens=done.prompt_tokens,
                    completion_tokens=done.completion_tokens,
                    latency_ms=latency_ms,
                    error=error,
                    served_by=done.served_by,
                    http_status=done.http_status,
                    response_blob=(
                        self._put_blob(done.body)
                        if self._put_blob is not None and done.body is not None
                        else None
                    ),
                )
            )
            if done.text is not None:
                return CallOutcome(events, done.text, done.finish_reason, None)
            if not done.retry:
                break
        return CallOutcome(events, None, None, error or "stopped")

    def _attempt(self, kwargs: dict[str, Any]) -> _Try:
        """One HTTP request; never raises for anything the endpoint sends."""
        import openai

        try:
            raw = self._client.chat.completions.with_raw_response.create(**kwargs)
        except openai.APIStatusError as exc:  # 4xx, 5xx: the body is kept like any other
            transient = isinstance(exc, openai.InternalServerError | openai.RateLimitError)
            return _Try(
                None,
                error=self._clean(_one_line(exc)),
                http_status=exc.status_code,
                body=self._body(exc.response),
                retry=transient,
                retry_after_s=_retry_after(exc.response.headers) if transient else None,
            )
        except openai.APIConnectionError as exc:  # refused, reset, DNS, timeout: no response
            return _Try(None, error=self._clean(_one_line(exc)), retry=True)
        except openai.APIError as exc:
            return _Try(None, error=self._clean(_one_line(exc)))
        response = raw.http_response
        received = bytes(response.content)
        read = read_completion(received, response.headers.get("content-type", ""))
        body = scrub_bytes(received, self._secrets)  # the blob: every credential form masked
        error = self._clean(read.error) if read.error else None
        if not read.is_completion:
            return _Try(None, error=error, http_status=response.status_code, body=body, retry=True)
        # The model's own text is its data (a URL, a token= it types): only our secrets are
        # masked in it, so the agent acts on exactly what the journal keeps.
        return _Try(
            mask_secrets(read.text, self._secrets),
            read.finish_reason,
            read.prompt_tokens,
            read.completion_tokens,
            read.served_by,
            error,
            response.status_code,
            body,
        )

    def _body(self, response: Any) -> bytes:
        """The response's bytes as received, with credentials masked."""
        return scrub_bytes(bytes(response.content), self._secrets)

    def _clean(self, text: str) -> str:
        """Error texts can echo a key, a password or a header back: none reaches an event."""
        return scrub_text(_valid_text(text)[0], self._secrets)


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """(the URL without user:password@, the Basic auth token of them or None)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    netloc = parts.netloc.rpartition("@")[2]
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    token = base64.b64encode(pair.encode()).decode()
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), token


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a 429/5xx asks to wait: ``retry-after-ms``, or ``Retry-After`` (seconds or a
    date); None when absent or unreadable."""
    value = headers.get("retry-after-ms")
    scale = 0.001
    if value is None:
        value, scale = headers.get("retry-after"), 1.0
    if value is None:
        return None
    try:
        seconds = float(value) * scale
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _one_line(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:500]


def _sleep_unless(should_stop: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not should_stop():
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
