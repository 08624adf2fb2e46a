"""A session's network as a HAR 1.2 log: every request its pages made, with text bodies, scrubbed.

The browser session notes one :class:`Exchange` per finished or failed request of its pages (not
the suite's own reads of capture URLs); :func:`build_har` turns them into the HAR stored as the
session's ``network`` evidence blob. What is kept, and the caps:

- every request and response header as sent and received (the browser's own ``Accept``,
  ``Sec-Fetch-*``, ``Cookie`` and ``Set-Cookie`` too), the request's ``queryString`` and
  ``cookies``, the response's ``cookies`` (parsed from ``Set-Cookie``), ``content.size`` where
  the length is known (the body kept, or a ``Content-Length``), the request body, and the
  response bodies of API calls and documents (resource type
  fetch, xhr or document) of text types (JSON, ``text/*``, XML, form, JavaScript) up to
  ``MAX_BODY_BYTES`` (1 MiB) each; other bodies (scripts, styles, images: the same files in
  every session) are left out with a note in the entry's ``content.comment``;
- the whole HAR at most ``MAX_HAR_BYTES`` (5 MiB): over it, response bodies are dropped, the
  largest first, each with a note, then the oldest entries, with a note in ``log.comment``;
- secrets scrubbed (``ownloop.store.scrub``): the values of Authorization, Proxy-Authorization,
  Cookie and Set-Cookie headers become ``***``, and so do the values of request cookies and of
  response cookies that look secret (a session, token or auth name, or a long random value);
  the queryString is read from the scrubbed URL; URLs lose their userinfo and secret query values;
  other header values and the bodies have every credential form masked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlsplit

from ownloop.store.scrub import REDACTED, scrub_text, scrub_url

__all__ = ["MAX_BODY_BYTES", "MAX_HAR_BYTES", "Exchange", "build_har", "keeps_body"]

MAX_BODY_BYTES = 1024 * 1024
MAX_HAR_BYTES = 5 * 1024 * 1024
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_TEXT_TYPES = ("json", "text/", "xml", "x-www-form-urlencoded", "javascript")
_BODY_RESOURCES = frozenset({"fetch", "xhr", "document"})
_DROPPED = "body dropped: the HAR is capped at 5 MiB"
# A cookie whose value is masked: a name that says it is a credential, or a long random value.
_SECRET_COOKIE = re.compile(r"(?i)sess|sid|token|auth|secret|key|pass|csrf|xsrf|jwt|login|remember")
_RANDOM_VALUE = re.compile(r"^(?=.*[A-Za-z])(?=.*[0-9])[A-Za-z0-9+/=_%.\-]{16,}$")
_COOKIE_ATTRIBUTES = {"path": "path", "domain": "domain", "expires": "expires"}


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
    length = _header(exchange.response_headers, "content-length").strip()
    content: dict[str, Any] = {"size": int(length) if length.isdigit() else -1}
    content["mimeType"] = response_type
    if exchange.body is not None:
        content["text"] = scrub_text(exchange.body)
        content["size"] = len(exchange.body.encode())
    elif exchange.body_note:
        content["comment"] = exchange.body_note
    url = scrub_url(exchange.url)
    request: dict[str, Any] = {
        "method": exchange.method,
        "url": url,
        "httpVersion": "HTTP/1.1",
        "headers": _headers(exchange.request_headers),
        "queryString": _query(url),
        "cookies": _request_cookies(_header(exchange.request_headers, "cookie")),
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
            "cookies": _response_cookies(_header(exchange.response_headers, "set-cookie")),
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


def _query(url: str) -> list[dict[str, str]]:
    query = urlsplit(url).query
    return [{"name": k, "value": v} for k, v in parse_qsl(query, keep_blank_values=True)]


def _request_cookies(header: str) -> list[dict[str, str]]:
    """The cookies a request sent, by name; their values are masked like the Cookie header."""
    names = (part.split("=", 1)[0].strip() for part in header.split(";"))
    return [{"name": name, "value": REDACTED} for name in names if name]


def _response_cookies(header: str) -> list[dict[str, Any]]:
    """The cookies of the Set-Cookie headers (one a line, as the browser joins them)."""
    cookies: list[dict[str, Any]] = []
    for line in header.split("\n"):
        pair, *attributes = line.split(";")
        name, equals, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name:
            continue
        cookie: dict[str, Any] = {"name": name, "value": _cookie_value(name, value)}
        for attribute in attributes:
            key, _, setting = attribute.partition("=")
            key = key.strip().lower()
            if key in _COOKIE_ATTRIBUTES:
                cookie[_COOKIE_ATTRIBUTES[key]] = setting.strip()
            elif key == "httponly":
                cookie["httpOnly"] = True
            elif key == "secure":
                cookie["secure"] = True
            elif key == "samesite":
                cookie["sameSite"] = setting.strip()
        cookies.append(cookie)
    return cookies


def _cookie_value(name: str, value: str) -> str:
    if _SECRET_COOKIE.search(name) or _RANDOM_VALUE.match(value):
        return REDACTED
    return scrub_text(value)
