"""Grader specs: the text in a task's ``grader`` field, turned into a Grader.

A spec is a compact string, or a JSON object (a task file may give an object; the suite stores it
as compact JSON text). Surrounding whitespace is ignored.

Compact form and JSON-object form, one line each::

    answer:exact:TEXT                      {"type":"answer","exact":"TEXT"}
    answer:normalized:TEXT                 {"type":"answer","normalized":"TEXT"}
    answer:contains:TEXT                   {"type":"answer","contains":"TEXT"}
    answer:regex:PATTERN                   {"type":"answer","regex":"PATTERN"}
    answer:number:VALUE[:TOLERANCE]        {"type":"answer","number":3.5,"tolerance":0.01}
    answer:any:["a","b"]                   {"type":"answer","any":["a","b"]}
    url:glob:PATTERN                       {"type":"url","glob":"*/done*"}
    url:regex:PATTERN                      {"type":"url","regex":"/done$"}
    miniwob                                {"type":"miniwob"}
    json:CAPTURE:$.PATH:eq:JSON            {"type":"json","capture":C,"path":P,"equals":V}
    json:CAPTURE:$.PATH:contains:JSON      {"type":"json","capture":C,"path":P,"contains":V}
    json:CAPTURE:$.PATH:exists             {"type":"json","capture":C,"path":P,"exists":true}
    network:METHOD:URL[:STATUS]            {"type":"network","method":"POST","url":"/api/cart",
                                            "status":200,"request":{"product":"blue-mug"},
                                            "response":{"ok":true}}
    python:MODULE:FUNCTION                 {"type":"python","function":"MODULE:FUNCTION"}
    webarena-verified:TASK_ID              {"type":"webarena-verified","task_id":157,
                                            "sites":{"shopping_admin":"{BASE}/admin"}}
    osworld                                (an OSWorld task's evaluator, read from evidence)
    none                                   {"type":"none"}

- Everything after the mode is the value, colons included (``answer:exact:a:b`` expects "a:b").
- ``normalized`` compares case-folded NFKC text with every run of non-alphanumeric characters read
  as one space (``"Bob O'Brien."`` matches ``bob o brien``); ``contains`` and ``any`` compare the
  same way; ``exact`` compares the text as is; ``regex`` is searched in the raw answer (add
  ``(?i)``, ``^``, ``$`` as needed).
- ``number`` passes when any number written in the answer is within TOLERANCE of VALUE (absolute,
  or relative with ``%``: ``answer:number:200:5%``; default 0). "1,234.5" reads as 1234.5.
- ``url`` matches evidence ``final_url``: a glob must match the whole URL (case-sensitive); a regex
  is searched anywhere in it.
- ``json`` reads the last ``capture`` evidence whose URL is CAPTURE, or whose path is CAPTURE when
  it starts with ``/`` (``{BASE}`` in front is ignored). PATH is ``$.items[0].name`` (also
  ``$["a.b"]``, ``[-1]``) or, in the object form, dotted ``items.0.name``. JSON values are strict
  JSON: strings are quoted. ``contains`` is substring of a string, element of a list, or key (or
  sub-object) of an object.
- ``network`` passes when a request of the session's recorded traffic (its HAR) has the METHOD
  (``*``: any), matches the URL glob (a glob starting with ``/`` matches the path and query, any
  other the whole URL), got STATUS, and has each JSON value given at the paths of ``request``
  (its JSON or form body) and ``response`` (its JSON body). A compact URL that ends in ``:NNN``
  is read as the status; give such a URL in the object form.
- ``python`` imports MODULE once and calls ``FUNCTION(answer, evidence)``; it returns a Grade, a
  bool, or a float score that passes at 1 or more. What it raises becomes a failed grade.
- ``webarena-verified`` grades by WebArena-Verified's own evaluator over the answer and the HAR
  (see ``ownloop.grading.webarena``; needs the ``webarena`` extra).
- ``none``: the task is not graded (``grade_session`` returns None).
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import msgspec

from ownloop.grading.answer import ANSWER_MODES, AnswerGrader, normalize
from ownloop.grading.capture import JSON_OPS, JsonGrader, parse_path
from ownloop.grading.grade import Grade, Grader, GraderSpecError, quoted
from ownloop.grading.miniwob import MiniwobGrader
from ownloop.grading.network import BodyCheck, NetworkGrader
from ownloop.grading.osworld import OsworldGrader
from ownloop.grading.plugin import PythonGrader
from ownloop.grading.url import URL_KINDS, UrlGrader
from ownloop.grading.webarena import WEBARENA_TYPE, WebArenaGrader, WebArenaUnavailable
from ownloop.store.events import EvidenceCaptured

__all__ = ["GRADER_TYPES", "NoGrader", "grade_session", "make_grader"]

GRADER_TYPES = (
    "answer",
    "url",
    "miniwob",
    "json",
    "network",
    "python",
    WEBARENA_TYPE,
    "none",
    "osworld",
)

_COMPACT_USAGE = {
    "answer": "answer:MODE:VALUE with MODE exact, normalized, contains, regex, number or any, "
    'e.g. answer:contains:42, answer:number:3.5:0.01, answer:any:["yes","y"]',
    "answer:number": "answer:number:VALUE[:TOLERANCE], e.g. answer:number:3.5:0.01 or "
    "answer:number:200:5%",
    "answer:any": 'answer:any:JSON_LIST, e.g. answer:any:["yes","y"]',
    "url": "url:glob:PATTERN or url:regex:PATTERN, e.g. url:glob:*/done*",
    "miniwob": "miniwob (no arguments)",
    "json": "json:CAPTURE:$.PATH:eq|contains:JSON or json:CAPTURE:$.PATH:exists, "
    'e.g. json:/_admin/record:$.items[0].name:eq:"Bob"',
    "network": "network:METHOD:URL[:STATUS], e.g. network:POST:/api/cart:200 (METHOD * is any)",
    "python": "python:MODULE:FUNCTION, e.g. python:my_graders:check_total",
    WEBARENA_TYPE: "webarena-verified:TASK_ID, e.g. webarena-verified:157",
    "none": "none (no arguments)",
    "osworld": "osworld (no arguments: the evaluator is the session's evidence)",
}
_OBJECT_USAGE = {
    "answer": '{"type":"answer","contains":"42"} with one of exact, normalized, contains, regex, '
    "number (and optional tolerance) or any (a list)",
    "answer:number": '{"type":"answer","number":3.5,"tolerance":0.01} (tolerance may be "5%")',
    "answer:any": '{"type":"answer","any":["yes","y"]}',
    "url": '{"type":"url","glob":"*/done*"} or {"type":"url","regex":"/done$"}',
    "miniwob": '{"type":"miniwob"}',
    "json": '{"type":"json","capture":"/_admin/record","path":"items.0.name","equals":"Bob"} '
    'with one of equals, contains or "exists":true',
    "network": '{"type":"network","method":"POST","url":"/api/cart","status":200,'
    '"request":{"product":"blue-mug"}} (url required; request and response map paths to values)',
    "python": '{"type":"python","function":"my_graders:check_total"}',
    WEBARENA_TYPE: '{"type":"webarena-verified","task_id":157,'
    '"sites":{"shopping_admin":"{BASE}/admin"}} (sites optional)',
    "none": '{"type":"none"}',
    "osworld": '{"type":"osworld"}',
}
_ANY_USAGE = (
    "one of answer:MODE:VALUE, url:glob|regex:PATTERN, miniwob, "
    "json:CAPTURE:$.PATH:eq|contains|exists[:JSON], network:METHOD:URL[:STATUS], "
    "python:MODULE:FUNCTION, none, "
    'or a JSON object with a "type"'
)
_ANY_OBJECT_USAGE = 'a JSON object with a "type", e.g. {"type":"answer","contains":"42"}'
_IDENTIFIERS = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_NUMBER_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_METHOD = re.compile(r"[A-Za-z]+|\*")
_COMPACT_STATUS = re.compile(r"(?P<url>.+):(?P<status>[1-5][0-9][0-9])")


@dataclass(frozen=True, slots=True)
class NoGrader:
    """The ``none`` spec: the task is not graded. ``grade`` says so if called anyway."""

    name: str = "none"
    version: str = "1"

    def grade(self, answer: str | None, evidence: Sequence[EvidenceCaptured]) -> Grade:
        """A failed grade saying the task has no grader."""
        return Grade(0.0, False, "not graded (grader none)")


class _Bad(Exception):
    """A problem found while reading a spec of a known type; made into a GraderSpecError."""

    def __init__(self, problem: str, kind: str) -> None:
        super().__init__(problem)
        self.kind = kind


def make_grader(spec: str) -> Grader:
    """The grader a spec describes; see this module's docstring for the syntax.

    The grader's name is the spec (stripped), so a recorded grade names the exact spec that made it.

    Raises:
        GraderSpecError: the spec is not valid; the one-line message shows a valid one.
    """
    if not isinstance(spec, str):
        raise GraderSpecError(f"bad grader spec {spec!r}: not text. Use {_ANY_USAGE}")
    return _make(spec.strip())


def grade_session(
    spec: str | None, answer: str | None, evidence: Sequence[EvidenceCaptured]
) -> Grade | None:
    """Grade one session with the grader ``spec`` names; None when the spec is None or ``none``.

    Raises:
        GraderSpecError: the spec is not valid.
    """
    if spec is None:
        return None
    grader = make_grader(spec)
    if isinstance(grader, NoGrader):
        return None
    return grader.grade(answer, evidence)


@lru_cache(maxsize=1024)
def _make(spec: str) -> Grader:
    is_object = spec.startswith("{")
    usage = _OBJECT_USAGE if is_object else _COMPACT_USAGE
    try:
        return _from_object(spec) if is_object else _from_compact(spec)
    except _Bad as bad:
        fix = usage.get(bad.kind) or (_ANY_OBJECT_USAGE if is_object else _ANY_USAGE)
        message = f"bad grader spec {quoted(spec)}: {bad}. Use {fix}"
        raise GraderSpecError(" ".join(message.splitlines())) from None


def _from_compact(spec: str) -> Grader:
    kind, has_args, rest = spec.partition(":")
    if kind not in GRADER_TYPES:
        raise _Bad(f"unknown grader type {kind!r}", "")
    if kind == "osworld":
        if has_args:
            raise _Bad("osworld takes no arguments", kind)
        return OsworldGrader()
    if kind in ("miniwob", "none"):
        if has_args:
            raise _Bad(f"{kind} takes no arguments", kind)
        return MiniwobGrader(spec) if kind == "miniwob" else NoGrader(spec)
    if kind == "answer":
        mode, _, value = rest.partition(":")
        if mode == "number":
            number, _, tolerance = value.partition(":")
            return _answer(spec, mode, number, tolerance or None)
        if mode == "any":
            problem = "answer:any needs a JSON list"
            return _answer(spec, mode, _json_value(value, problem, "answer:any"))
        return _answer(spec, mode, value)
    if kind == "url":
        url_kind, _, pattern = rest.partition(":")
        return _url(spec, url_kind, pattern)
    if kind == "json":
        return _json_compact(spec, rest)
    if kind == "network":
        return _network_compact(spec, rest)
    if kind == WEBARENA_TYPE:
        return _webarena(spec, rest.strip(), {})
    return _python(spec, rest)


def _from_object(spec: str) -> Grader:
    try:
        fields = msgspec.json.decode(spec)
    except msgspec.DecodeError as error:
        raise _Bad(f"not valid JSON ({error})", "") from None
    if not isinstance(fields, dict):
        raise _Bad("a JSON spec must be an object", "")
    kind = fields.pop("type", None)
    if kind not in GRADER_TYPES:
        raise _Bad(f"unknown or missing grader type {kind!r}", "")
    allowed = {
        "answer": {*ANSWER_MODES, "normalised", "tolerance"},
        "url": set(URL_KINDS),
        "json": {"capture", "path", "equals", "contains", "exists"},
        "network": {"method", "url", "status", "request", "response"},
        "python": {"function"},
        WEBARENA_TYPE: {"task_id", "sites"},
    }.get(kind, set())
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise _Bad(f"unknown field {unknown[0]!r} for type {kind!r}", kind)
    if kind == "osworld":
        return OsworldGrader()
    if kind in ("miniwob", "none"):
        return MiniwobGrader(spec) if kind == "miniwob" else NoGrader(spec)
    if kind == "python":
        return _python(spec, _text(fields.get("function"), "function", kind))
    if kind == "json":
        return _json_object(spec, fields)
    if kind == "network":
        return _network_object(spec, fields)
    if kind == WEBARENA_TYPE:
        sites = fields.get("sites", {})
        if not isinstance(sites, dict) or not all(
            isinstance(url, str) and url for url in sites.values()
        ):
            raise _Bad("sites must map site names to URLs", kind)
        return _webarena(spec, fields.get("task_id"), sites)
    modes = [key for key in fields if key != "tolerance"]
    if len(modes) != 1:
        raise _Bad(f"needs exactly one {'mode' if kind == 'answer' else 'pattern'} field", kind)
    if kind == "url":
        return _url(spec, modes[0], _text(fields[modes[0]], modes[0], kind))
    if "tolerance" in fields and modes[0] != "number":
        raise _Bad("tolerance is only for number", kind)
    return _answer(spec, modes[0], fields[modes[0]], fields.get("tolerance"))


def _text(value: object, field: str, kind: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Bad(f"{field} must be non-empty text", kind)
    return value


def _json_value(text: str, problem: str, kind: str) -> object:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        raise _Bad(f"{problem}, got {quoted(text, 40)}", kind) from None


def _answer(spec: str, mode: str, value: object, tolerance: object = None) -> Grader:
    mode = "normalized" if mode == "normalised" else mode
    if mode not in ANSWER_MODES:
        raise _Bad(f"unknown answer mode {mode!r}", "answer")
    if mode == "number":
        target = _number(value, "answer:number needs")
        spread, relative = _tolerance(tolerance)
        return AnswerGrader.build(spec, mode, target, spread, relative)
    if mode == "any":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise _Bad("answer:any needs a non-empty JSON list of strings", "answer:any")
        texts: tuple[str, ...] = tuple(value)
        if not all(normalize(text) for text in texts):
            raise _Bad("an answer:any choice has no letters or digits", "answer:any")
        return AnswerGrader.build(spec, mode, texts)
    text = _text(value, f"answer:{mode}", "answer")
    if mode in ("normalized", "contains") and not normalize(text):
        problem = f"{quoted(text, 40)} has no letters or digits to compare (exact and regex can)"
        raise _Bad(problem, "answer")
    try:
        return AnswerGrader.build(spec, mode, text)
    except re.error as error:
        raise _Bad(f"bad regex ({error})", "answer") from None


def _number(value: object, needs: str) -> float:
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        problem = f"{needs} a finite number, got {quoted(str(value), 40)}"
        raise _Bad(problem, "answer:number")
    return float(value)


def _tolerance(value: object) -> tuple[float, bool]:
    if value is None:
        return 0.0, False
    relative = isinstance(value, str) and value.endswith("%")
    spread = _number(value[:-1] if relative else value, "the tolerance must be")  # type: ignore[index]
    if spread < 0:
        raise _Bad("the tolerance must not be negative", "answer:number")
    return spread, relative


def _url(spec: str, kind: str, pattern: str) -> Grader:
    if kind not in URL_KINDS:
        raise _Bad(f"unknown url match {kind!r}", "url")
    if not pattern:
        raise _Bad(f"url:{kind} needs a pattern", "url")
    try:
        return UrlGrader.build(spec, kind, pattern)
    except re.error as error:
        raise _Bad(f"bad regex ({error})", "url") from None


def _json_compact(spec: str, rest: str) -> Grader:
    dollar = rest.find(":$")
    if dollar <= 0:
        raise _Bad("needs a capture URL, then ':' and a path starting with $", "json")
    try:
        path, end = parse_path(rest, dollar + 1, stop_at_colon=True)
    except ValueError as error:
        raise _Bad(f"bad path ({error})", "json") from None
    op, has_value, value_text = rest[end + 1 :].partition(":")
    if op not in JSON_OPS:
        raise _Bad(f"unknown json check {op!r}", "json")
    if op == "exists":
        if has_value:
            raise _Bad("json exists takes no value", "json")
        return JsonGrader(spec, rest[:dollar], path, op)
    value = _json_value(value_text, f"json {op} needs a JSON value (quote strings)", "json")
    return JsonGrader(spec, rest[:dollar], path, op, value)


def _json_object(spec: str, fields: dict[str, object]) -> Grader:
    capture = _text(fields.get("capture"), "capture", "json")
    path_text = _text(fields.get("path"), "path", "json")
    try:
        path, _ = parse_path(path_text)
    except ValueError as error:
        raise _Bad(f"bad path ({error})", "json") from None
    checks = [key for key in ("equals", "contains", "exists") if key in fields]
    if len(checks) != 1:
        raise _Bad("needs exactly one of equals, contains, exists", "json")
    if checks[0] == "exists":
        if fields["exists"] is not True:
            raise _Bad("exists must be true", "json")
        return JsonGrader(spec, capture, path, "exists")
    op = "eq" if checks[0] == "equals" else "contains"
    return JsonGrader(spec, capture, path, op, fields[checks[0]])


def _python(spec: str, target: str) -> Grader:
    module_name, _, function_name = target.partition(":")
    if not _IDENTIFIERS.fullmatch(module_name) or not _IDENTIFIERS.fullmatch(function_name):
        raise _Bad(f"{quoted(target, 40)} is not MODULE:FUNCTION", "python")
    try:
        importlib.import_module(module_name)
    except Exception as error:  # whatever a user's module raises while importing
        problem = f"cannot import {module_name!r} ({type(error).__name__}: {error})"
        raise _Bad(problem, "python") from None
    try:
        return PythonGrader.build(spec, module_name, function_name)
    except AttributeError:
        raise _Bad(f"{module_name!r} has no {function_name!r}", "python") from None
    except TypeError:
        raise _Bad(f"{module_name}:{function_name} is not callable", "python") from None


def _network_compact(spec: str, rest: str) -> Grader:
    method, _, url = rest.partition(":")
    status: int | None = None
    found = _COMPACT_STATUS.fullmatch(url)
    if found:
        url, status = found["url"], int(found["status"])
    return _network(spec, method, url, status, ())


def _network_object(spec: str, fields: dict[str, object]) -> Grader:
    url = _text(fields.get("url"), "url", "network")
    method = fields.get("method", "*")
    if not isinstance(method, str):
        raise _Bad("method must be text such as POST (or * for any)", "network")
    status = fields.get("status")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599
    ):
        raise _Bad(f"status must be an HTTP status such as 200, got {status!r}", "network")
    bodies: list[BodyCheck] = []
    for side in ("request", "response"):
        wanted = fields.get(side, {})
        if not isinstance(wanted, dict):
            raise _Bad(f"{side} must be an object of path: JSON value", "network")
        for path_text, value in wanted.items():
            try:
                path, _ = parse_path(path_text)
            except ValueError as error:
                raise _Bad(
                    f"bad {side} path {quoted(path_text, 40)} ({error})", "network"
                ) from None
            bodies.append(BodyCheck(side, path, value))
    return _network(spec, method, url, status, tuple(bodies))


def _network(
    spec: str, method: str, url: str, status: int | None, bodies: tuple[BodyCheck, ...]
) -> Grader:
    if not _METHOD.fullmatch(method):
        raise _Bad(f"bad method {quoted(method, 20)}", "network")
    if not url:
        raise _Bad("needs a URL glob", "network")
    return NetworkGrader.build(spec, url, None if method == "*" else method, status, bodies)


def _webarena(spec: str, task_id: object, sites: dict[str, str]) -> Grader:
    if isinstance(task_id, str) and task_id.isdigit():
        task_id = int(task_id)
    if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 0:
        raise _Bad(
            f"task_id must be a WebArena-Verified task number, got {task_id!r}", WEBARENA_TYPE
        )
    try:
        return WebArenaGrader.build(spec, task_id, sites)
    except WebArenaUnavailable as error:
        raise _Bad(str(error), WEBARENA_TYPE) from None
