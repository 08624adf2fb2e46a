"""A session's network as a HAR 1.2 log: every request its pages made, with text bodies, scrubbed.

The browser session notes one :class:`Exchange` per finished or failed request of its pages (not
the suite's own reads of capture URLs); :func:`build_har` turns them into the HAR stored as the
session's ``network`` evidence blob. What is kept, and the caps:

- request and response headers (as Playwright reports them: without the browser's own cookie
  headers), the request body, and the response bodies of API calls and documents (resource type
  fetch, xhr or document) of text types (JSON, ``text/*``, XML, form, JavaScript) up to
  ``MAX_BODY_BYTES`` (1 MiB) each; other bodies (scripts, styles, images: the same files in
  every session) are left out with a note in the entry's ``content.comment``;
- the whole HAR at most ``MAX_HAR_BYTES`` (5 MiB): over it, response bodies are dropped, the
  largest first, each with a note, then the oldest entries, with a note in ``log.comment``;
- secrets scrubbed (``ownloop.store.scrub``): the values of Authorization, Proxy-Authorization,
  Cookie and Set-Cookie headers become ``***``; URLs lose their userinfo and secret query values;
  other header values and the bodies have every credential form masked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from ownloop.store.scrub import REDACTED, scrub_text, scrub_url

__all__ = ["MAX_BODY_BYTES", "MAX_HAR_BYTES", "Exchange", "build_har", "keeps_body"]

MAX_BODY_BYTES = 1024 * 1024
MAX_HAR_BYTES = 5 * 1024 * 1024
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_TEXT_TYPES = ("json", "text/", "xml", "x-www-form-urlencoded", "javascript")
_BODY_RESOURCES = frozenset({"fetch", "xhr", "document"})
_DROPPED = "body dropped: the HAR is capped at 5 MiB"


class Exchange(NamedTuple):
    """One request of a session's pages and what came back (``status`` 0: no response)."""

    started: float  # wall-clock seconds since the epoch
    method: str
    url: str
    request_headers: dict[str, str]
    post_data: str | None
    status: int
    status_text: str
    response_headers: dict[str, str]
    body: str | None  # a text body, when kept
    body_note: str  # why the body is not kept ("" when it is, or there is none)
    resource_type: str
    elapsed_ms: float
    failure: str | None = None


def keeps_body(resource_type: str, content_type: str) -> bool:
    """Whether a response has its body recorded: an API call's or a document's, of a text type."""
    kind = content_type.lower()
    return resource_type in _BODY_RESOURCES and any(part in kind for part in _TEXT_TYPES)


def build_har(
    exchanges: Sequence[Exchange], *, creator_version: str = "", max_bytes: int = MAX_HAR_BYTES
) -> bytes:
    """The HAR of ``exchanges`` as UTF-8 JSON bytes, scrubbed and at most ``max_bytes``."""
    entries = [_entry(exchange) for exchange in sorted(exchanges, key=lambda e: e.started)]
    log: dict[str, Any] = {
        "version": "1.2",
        "creator": {"name": "ownloop", "version": creator_version},
        "pages": [],
        "entries": entries,
    }
    data = _encode(log)
    if len(data) <= max_bytes:
        return data
    # Drop response bodies, the largest first, until the log fits.
    over = len(data) - max_bytes
    bodies = sorted(
        (e for e in entries if "text" in e["response"]["content"]),
        key=lambda e: len(e["response"]["content"]["text"]),
        reverse=True,
    )
    for entry in bodies:
        if over <= 0:
            break
        content = entry["response"]["content"]
        over -= len(content.pop("text").encode()) - len(_DROPPED)
        content["comment"] = _DROPPED
    data = _encode(log)
    dropped = 0
    while len(data) > max_bytes and entries:
        # Still too big (a great many requests, or large request bodies): the oldest go.
        cut = max(1, len(entries) // 10)
        del entries[:cut]
        dropped += cut
        log["comment"] = f"{dropped} oldest entries dropped: the HAR is capped at 5 MiB"
        data = _encode(log)
    return data


def _encode(log: dict[str, Any]) -> bytes:
    return json.dumps({"log": log}, ensure_ascii=False, separators=(",", ":")).encode()


def _entry(exchange: Exchange) -> dict[str, Any]:
    response_type = _header(exchange.response_headers, "content-type")
    content: dict[str, Any] = {"size": -1, "mimeType": response_type}
    if exchange.body is not None:
        content["text"] = scrub_text(exchange.body)
        content["size"] = len(exchange.body.encode())
    elif exchange.body_note:
        content["comment"] = exchange.body_note
    request: dict[str, Any] = {
        "method": exchange.method,
        "url": scrub_url(exchange.url),
        "httpVersion": "HTTP/1.1",
        "headers": _headers(exchange.request_headers),
        "queryString": [],
        "cookies": [],
        "headersSize": -1,
        "bodySize": -1 if exchange.post_data is None else len(exchange.post_data.encode()),
    }
    if exchange.post_data is not None:
        request["postData"] = {
            "mimeType": _header(exchange.request_headers, "content-type"),
            "text": scrub_text(exchange.post_data),
        }
    entry: dict[str, Any] = {
        "startedDateTime": datetime.fromtimestamp(exchange.started, UTC).isoformat(),
        "time": round(exchange.elapsed_ms, 3),
        "request": request,
        "response": {
            "status": exchange.status,
            "statusText": exchange.status_text,
            "httpVersion": "HTTP/1.1",
            "headers": _headers(exchange.response_headers),
            "cookies": [],
            "content": content,
            "redirectURL": scrub_url(_header(exchange.response_headers, "location")),
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": {"send": 0, "wait": round(exchange.elapsed_ms, 3), "receive": 0},
        "_resourceType": exchange.resource_type,
    }
    if exchange.failure is not None:
        entry["_failure"] = exchange.failure
    return entry


def _header(headers: dict[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


def _headers(headers: dict[str, str]) -> list[dict[str, str]]:
    return [
        {"name": name, "value": _header_value(name, value)}
        for name, value in _sorted(headers.items())
    ]


def _sorted(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(items, key=lambda item: item[0].lower())


def _header_value(name: str, value: str) -> str:
    if name.lower() in _SECRET_HEADERS:
        return REDACTED
    return scrub_text(value)
