"""The captured-JSON grader: a value at a path in a captured JSON body equals or contains one given.

Paths are either JSONPath-like (``$.items[0].name``, ``$["odd.key"][-1]``) or dotted
(``items.0.name``); a number segment indexes a list and names a key of an object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

from ownloop.grading.evidence import read_value
from ownloop.grading.grade import Check, Grade, quoted
from ownloop.store.events import EvidenceCaptured

__all__ = [
    "JSON_OPS",
    "MISSING",
    "JsonGrader",
    "ParsedPath",
    "format_path",
    "parse_path",
    "resolve_path",
    "same_json",
]

JSON_OPS = ("eq", "contains", "exists")
Segment = str | int
_MISSING = MISSING = object()  # what resolve_path returns for a path with no value
_STOP = ".[:"
_string_decoder = json.JSONDecoder()
_INDEX = re.compile(r"-?[0-9]+")


class ParsedPath(NamedTuple):
    """A path's segments and the position in the text just after it."""

    segments: tuple[Segment, ...]
    end: int


def parse_path(text: str, start: int = 0, *, stop_at_colon: bool = False) -> ParsedPath:
    """Read a path from ``text[start:]``: its segments and where it ended.

    Without ``stop_at_colon`` the whole rest of ``text`` must be the path.

    Raises:
        ValueError: the path is malformed; the message says where.
    """
    if not text.startswith("$", start):
        if stop_at_colon:
            raise ValueError("a path must start with $")
        dotted = text[start:]
        if not dotted or any(part == "" for part in dotted.split(".")):
            raise ValueError(f"path {dotted!r} has an empty segment")
        return ParsedPath(tuple(_dotted(part) for part in dotted.split(".")), len(text))
    segments: list[Segment] = []
    i = start + 1
    while i < len(text):
        char = text[i]
        if char == ".":
            end = i + 1
            while end < len(text) and text[end] not in _STOP:
                end += 1
            if end == i + 1:
                raise ValueError(f"empty key after '.' at position {i - start}")
            segments.append(text[i + 1 : end])
            i = end
        elif char == "[":
            segment, i = _bracket(text, i + 1, start)
            segments.append(segment)
        elif char == ":" and stop_at_colon:
            break
        else:
            raise ValueError(f"unexpected {char!r} at position {i - start}; use .key or [index]")
    return ParsedPath(tuple(segments), i)


def _dotted(part: str) -> Segment:
    return int(part) if _INDEX.fullmatch(part) else part


def _bracket(text: str, i: int, start: int) -> tuple[Segment, int]:
    if text.startswith('"', i):
        try:
            key, end = _string_decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            raise ValueError(f"bad quoted key at position {i - start}") from None
    else:
        end = text.find("]", i)
        literal = text[i:end] if end >= 0 else ""
        if not _INDEX.fullmatch(literal):
            raise ValueError(f'bad index at position {i - start}; use [0], [-1] or ["key"]')
        key = int(literal)
    if not text.startswith("]", end):
        raise ValueError(f"missing ']' at position {end - start}")
    return key, end + 1


def format_path(segments: Sequence[Segment]) -> str:
    """The path in ``$`` form, e.g. ``$.items[0].name``."""
    parts = ["$"]
    for segment in segments:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif segment and all(char not in _STOP + '[]"' for char in segment):
            parts.append(f".{segment}")
        else:
            parts.append(f"[{json.dumps(segment)}]")
    return "".join(parts)


def resolve_path(value: object, segments: Sequence[Segment]) -> object:
    """The value at ``segments`` inside ``value``, or ``_MISSING`` (compare with ``is``)."""
    for segment in segments:
        if isinstance(value, dict):
            key = segment if isinstance(segment, str) else str(segment)
            if key not in value:
                return _MISSING
            value = value[key]
        elif isinstance(value, list):
            if isinstance(segment, str):
                if not _INDEX.fullmatch(segment):
                    return _MISSING
                segment = int(segment)
            if not -len(value) <= segment < len(value):
                return _MISSING
            value = value[segment]
        else:
            return _MISSING
    return value


def _same(a: object, b: object) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1 and keys and lengths must agree."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


same_json = _same


def _contains(actual: object, wanted: object) -> bool:
    """Substring of a string, element of a list, key (or sub-object) of an object."""
    if isinstance(actual, str):
        return isinstance(wanted, str) and wanted in actual
    if isinstance(actual, list):
        return any(_same(item, wanted) for item in actual)
    if isinstance(actual, dict):
        if isinstance(wanted, str):
            return wanted in actual
        if isinstance(wanted, dict):
            return all(key in actual and _same(actual[key], val) for key, val in wanted.items())
    return False


def _json_text(value: object, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):
        text = "<unprintable>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _capture_matches(source: str, capture: str) -> bool:
    if source == capture:
        return True
    if not capture.startswith("/"):
        return False
    try:
        parts = urlsplit(source)
    except ValueError:
        return False
    if "?" in capture:
        return f"{parts.path}?{parts.query}" == capture
    return parts.path == capture


@dataclass(frozen=True, slots=True)
class JsonGrader:
    """Passes when the value at ``path`` in the last capture of ``capture`` satisfies ``op``.

    ``capture`` is the capture URL as the task file gave it: a full URL, or a path
    (``/_admin/record`` or ``{BASE}/_admin/record``) that matches any capture URL with that path
    (and query, if given).
    """

    name: str
    capture: str
    path: tuple[Segment, ...]
    op: str
    value: object = None
    version: str = "1"

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """Grade from the last matching ``capture`` evidence; the answer is not used."""
        capture = self.capture.removeprefix("{BASE}")
        item = next(
            (
                item
                for item in reversed(evidence)
                if item.name == "capture" and _capture_matches(item.source, capture)
            ),
            None,
        )
        if item is None:
            return Grade(0.0, False, f"no capture of {quoted(self.capture)}")
        try:
            body = read_value(item)
        except ValueError as error:
            return Grade(0.0, False, f"capture {quoted(item.source)}: {error}")
        where = format_path(self.path)
        found = resolve_path(body, self.path)
        if found is _MISSING:
            return Grade(0.0, False, f"{where} not found in capture {quoted(item.source)}")
        shown = _json_text(found)
        canonical = json.dumps(found, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        if self.op == "exists":
            check = Check(
                name=where,
                passed=True,
                expected="exists",
                actual=shown,
                actual_normalized=canonical[:200],
            )
            return Grade(1.0, True, f"{where} exists ({shown})", (check,))
        compare = _same if self.op == "eq" else _contains
        passed = compare(found, self.value)
        verb = {"eq": ("equals", "does not equal"), "contains": ("contains", "does not contain")}
        wanted = _json_text(self.value)
        details = f"{where} = {shown} {verb[self.op][0 if passed else 1]} {wanted}"
        check = Check(
            name=where,
            passed=passed,
            expected=f"{self.op} {wanted}",
            actual=shown,
            actual_normalized=canonical[:200],
        )
        return Grade(1.0 if passed else 0.0, passed, details, (check,))
