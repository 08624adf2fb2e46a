"""The network grader: a request of the session's recorded traffic (its HAR) matched by method,
URL glob, status and values at JSON paths of its request and response bodies.

    {"type":"network","method":"POST","url":"/api/cart","status":200,
     "request":{"product":"blue-mug"},"response":{"cart.0.qty":1}}

passes when some recorded request is a POST to a URL whose path is ``/api/cart``, got status 200,
sent a body whose ``product`` is "blue-mug" (a JSON body, or form fields) and got back a JSON body
whose ``cart[0].qty`` is 1. The HAR is the session's ``network`` evidence: a blob, so whoever
grades reads it first (:func:`with_network`); the grader itself does no I/O.

The grade's checks are those of the closest request (the one passing the most checks, the latest
of equals): ``request`` (method and URL), ``status``, then one per body path, so a flip says
which of them changed.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec

from ownloop.grading.capture import MISSING, Segment, format_path, resolve_path, same_json
from ownloop.grading.evidence import latest_evidence, read_value
from ownloop.grading.grade import Check, Grade, Grader
from ownloop.store.events import EvidenceCaptured

__all__ = [
    "NETWORK_EVIDENCE",
    "BodyCheck",
    "NetworkGrader",
    "read_har",
    "wants_network",
    "with_network",
]

NETWORK_EVIDENCE = "network"
_MISSING_TEXT = "(missing)"
_SHOWN = 200  # characters of an actual value kept in a check


@dataclass(frozen=True, slots=True)
class BodyCheck:
    """A value expected at ``path`` of a request (``side`` "request") or response body."""

    side: str
    path: tuple[Segment, ...]
    expected: object

    @property
    def name(self) -> str:
        return f"{self.side} {format_path(self.path)}"


@dataclass(frozen=True, slots=True)
class NetworkGrader:
    """Passes when a recorded request matches ``method`` (None: any), the ``url`` glob, the
    ``status`` (None: any) and every body check.

    A glob starting with ``/`` (or ``{BASE}/``) is matched against the URL's path, and against
    its path and query (``/api/cart`` matches ``/api/cart?x=1``; ``/api/cart?x=*`` matches it
    too, ``/api/cart?x=2`` does not); any other glob against the whole URL. Globs are
    case-sensitive; methods are not.
    """

    name: str
    url: str
    method: str | None = None
    status: int | None = None
    bodies: tuple[BodyCheck, ...] = ()
    version: str = "1"
    _regex: re.Pattern[str] | None = None

    @classmethod
    def build(
        cls,
        name: str,
        url: str,
        method: str | None = None,
        status: int | None = None,
        bodies: tuple[BodyCheck, ...] = (),
    ) -> NetworkGrader:
        """A grader with its glob compiled once."""
        glob = url.removeprefix("{BASE}")
        return cls(
            name,
            glob,
            method.upper() if method else None,
            status,
            bodies,
            "1",
            re.compile(fnmatch.translate(glob)),
        )

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """Grade from the ``network`` evidence's HAR (loaded by :func:`with_network`)."""
        read = read_har(evidence)
        if isinstance(read, Grade):
            return read
        entries = _entries(read[1])
        wanted = f"{self.method or '*'} {self.url}"
        matching = [entry for entry in entries if self._matches(entry)]
        if not matching:
            check = Check(
                name="request",
                passed=False,
                expected=wanted,
                actual=f"no such request among {len(entries)}",
            )
            return Grade(
                0.0, False, f"no {wanted} among {len(entries)} recorded requests", (check,)
            )
        best: tuple[Check, ...] = ()
        for entry in matching:  # the latest of the closest wins the ties
            checks = self._checks(entry, wanted)
            if sum(c.passed for c in checks) >= sum(c.passed for c in best):
                best = checks
        passed = all(check.passed for check in best)
        failed = [f"{c.name} expected {c.expected}, got {c.actual}" for c in best if not c.passed]
        details = f"{best[0].actual} " + ("matches" if passed else "; ".join(failed))
        if len(matching) > 1:
            details += f" (closest of {len(matching)} {wanted})"
        return Grade(1.0 if passed else 0.0, passed, details, best)

    def _target(self, url: str) -> str:
        """The part of ``url`` the glob is matched against (the one that matched, if any)."""
        if not self.url.startswith("/"):
            return url
        try:
            parts = urlsplit(url)
        except ValueError:
            return url
        assert self._regex is not None
        if parts.query and not self._regex.match(parts.path):
            return f"{parts.path}?{parts.query}"
        return parts.path

    def _matches(self, entry: _Entry) -> bool:
        if self.method is not None and entry.method.upper() != self.method:
            return False
        assert self._regex is not None
        return self._regex.match(self._target(entry.url)) is not None

    def _checks(self, entry: _Entry, wanted: str) -> tuple[Check, ...]:
        checks = [
            Check(
                name="request",
                passed=True,
                expected=wanted,
                actual=f"{entry.method} {entry.url}",
                actual_normalized=f"{entry.method.upper()} {self._target(entry.url)}",
            )
        ]
        if self.status is not None:
            checks.append(
                Check(
                    name="status",
                    passed=entry.status == self.status,
                    expected=str(self.status),
                    actual=str(entry.status),
                    actual_normalized=str(entry.status),
                )
            )
        for body in self.bodies:
            value = entry.request_body() if body.side == "request" else entry.response_body()
            found = resolve_path(value, body.path)
            expected = _json_text(body.expected)
            if found is MISSING:
                checks.append(Check(name=body.name, expected=expected, actual=_MISSING_TEXT))
                continue
            checks.append(
                Check(
                    name=body.name,
                    passed=same_json(found, body.expected),
                    expected=expected,
                    actual=_json_text(found)[:_SHOWN],
                    actual_normalized=_canonical(found)[:_SHOWN],
                )
            )
        return tuple(checks)


def wants_network(grader: Grader) -> bool:
    """Whether ``grader`` reads the HAR, so its caller must load it with :func:`with_network`."""
    return isinstance(grader, NetworkGrader) or getattr(grader, "reads_network", False) is True


def with_network(
    evidence: Sequence[EvidenceCaptured], read_blob: Callable[[str], bytes]
) -> list[EvidenceCaptured]:
    """``evidence`` with the HAR of its ``network`` pieces read into ``value_json`` by
    ``read_blob(sha256)``; a HAR that cannot be read is left as a blob (the grade says so)."""
    loaded = []
    for item in evidence:
        if item.name == NETWORK_EVIDENCE and item.value_json is None and item.sha256:
            try:
                text = read_blob(item.sha256).decode("utf-8", "replace")
            except Exception:  # noqa: BLE001 - a missing blob fails the grade, not the regrade
                text = None
            if text is not None:
                item = msgspec.structs.replace(item, value_json=text)
        loaded.append(item)
    return loaded


@dataclass(frozen=True, slots=True)
class _Entry:
    """One HAR entry, as the grader reads it."""

    method: str
    url: str
    status: int
    request_text: str | None
    request_type: str
    response_text: str | None

    def request_body(self) -> object:
        if self.request_text is None:
            return MISSING
        parsed = _json(self.request_text)
        if parsed is not MISSING:
            return parsed
        # A form body (or a query-like text): its fields, the first value of each.
        fields = parse_qs(self.request_text, keep_blank_values=True)
        return {key: values[0] for key, values in fields.items()} if fields else MISSING

    def response_body(self) -> object:
        return MISSING if self.response_text is None else _json(self.response_text)


def _entries(har: object) -> list[_Entry]:
    log = har.get("log") if isinstance(har, Mapping) else None
    raw = log.get("entries") if isinstance(log, Mapping) else None
    entries = []
    for entry in raw if isinstance(raw, list) else ():
        if not isinstance(entry, Mapping):
            continue
        request: Mapping[str, Any] = _mapping(entry.get("request"))
        response: Mapping[str, Any] = _mapping(entry.get("response"))
        post = _mapping(request.get("postData"))
        content = _mapping(response.get("content"))
        status = response.get("status")
        entries.append(
            _Entry(
                method=str(request.get("method", "")),
                url=str(request.get("url", "")),
                status=status if isinstance(status, int) and not isinstance(status, bool) else 0,
                request_text=_text_or_none(post.get("text")),
                request_type=str(post.get("mimeType", "")),
                response_text=None
                if content.get("encoding")
                else _text_or_none(content.get("text")),
            )
        )
    return entries


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _json(text: str) -> object:
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return MISSING


def _json_text(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return "<unprintable>"


def _canonical(value: object) -> str:
    """The value as compared: JSON with sorted keys and no spaces."""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError):
        return "<unprintable>"


def read_har(evidence: Sequence[EvidenceCaptured]) -> tuple[EvidenceCaptured, Any] | Grade:
    """The session's latest ``network`` evidence and its HAR, or the failed grade saying why
    there is none to read."""
    item = latest_evidence(evidence, NETWORK_EVIDENCE)
    if item is None:
        return Grade(0.0, False, "no network evidence (a HAR) was recorded")
    try:
        return item, read_value(item)
    except ValueError as error:
        return Grade(0.0, False, f"network evidence: {error}")
