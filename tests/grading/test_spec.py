"""Spec syntax: compact and JSON-object forms agree, names round-trip, bad specs say the fix."""

from __future__ import annotations

import pytest

from ownloop.grading import (
    AnswerGrader,
    Grade,
    Grader,
    GraderSpecError,
    JsonGrader,
    MiniwobGrader,
    NoGrader,
    UrlGrader,
    grade_session,
    make_grader,
)
from tests.grading.conftest import evidence

EVIDENCE = (
    evidence("final_url", "http://h/done"),
    evidence("miniwob_reward", {"raw_reward": 1}),
    evidence("capture", {"items": [{"name": "Bob"}]}, "http://h/_admin/record"),
)


@pytest.mark.parametrize(
    ("compact", "obj", "kind"),
    [
        ("answer:exact:42", '{"type":"answer","exact":"42"}', AnswerGrader),
        ("answer:normalized:42", '{"type":"answer","normalised":"42"}', AnswerGrader),
        ("answer:contains:42", '{"type":"answer","contains":"42"}', AnswerGrader),
        ("answer:regex:4\\d", '{"type":"answer","regex":"4\\\\d"}', AnswerGrader),
        ("answer:number:42:1", '{"type":"answer","number":42,"tolerance":1}', AnswerGrader),
        ('answer:any:["41","42"]', '{"type":"answer","any":["41","42"]}', AnswerGrader),
        ("url:glob:*/done", '{"type":"url","glob":"*/done"}', UrlGrader),
        ("url:regex:done$", '{"type":"url","regex":"done$"}', UrlGrader),
        ("miniwob", '{"type":"miniwob"}', MiniwobGrader),
        (
            'json:/_admin/record:$.items[0].name:eq:"Bob"',
            '{"type":"json","capture":"/_admin/record","path":"items.0.name","equals":"Bob"}',
            JsonGrader,
        ),
        (
            'json:/_admin/record:$.items:contains:{"name":"Bob"}',
            '{"type":"json","capture":"/_admin/record","path":"items","contains":{"name":"Bob"}}',
            JsonGrader,
        ),
        (
            "json:/_admin/record:$.items[0]:exists",
            '{"type":"json","capture":"/_admin/record","path":"items.0","exists":true}',
            JsonGrader,
        ),
        ("none", '{"type":"none"}', NoGrader),
    ],
)
def test_compact_and_object_forms_agree(compact: str, obj: str, kind: type) -> None:
    for answer in ("42", "41", "no", None):
        a, b = make_grader(compact), make_grader(obj)
        assert isinstance(a, kind) and isinstance(b, kind) and isinstance(a, Grader)
        assert a.grade(answer, EVIDENCE) == b.grade(answer, EVIDENCE)
        assert (a.name, b.name) == (compact, obj)  # a grade names the exact spec that made it
        assert a.version == b.version == "1"


def test_name_round_trips_and_whitespace_is_ignored() -> None:
    grader = make_grader("  answer:contains:42\n")
    assert grader.name == "answer:contains:42"
    assert make_grader(grader.name) is grader  # specs are parsed once


def test_grade_session() -> None:
    assert grade_session("answer:contains:42", "42!", ()) == Grade(
        1.0, True, "answer '42!' contains '42'"
    )
    assert grade_session("none", "42", ()) is None
    assert grade_session(None, "42", ()) is None
    assert make_grader("none").grade("42", ()) == Grade(0.0, False, "not graded (grader none)")
    with pytest.raises(GraderSpecError):
        grade_session("answer", "42", ())


ANSWER_USE = (
    "Use answer:MODE:VALUE with MODE exact, normalized, contains, regex, number or any, "
    'e.g. answer:contains:42, answer:number:3.5:0.01, answer:any:["yes","y"]'
)
NUMBER_USE = (
    "Use answer:number:VALUE[:TOLERANCE], e.g. answer:number:3.5:0.01 or answer:number:200:5%"
)
ANY_USE = 'Use answer:any:JSON_LIST, e.g. answer:any:["yes","y"]'
URL_USE = "Use url:glob:PATTERN or url:regex:PATTERN, e.g. url:glob:*/done*"
JSON_USE = (
    "Use json:CAPTURE:$.PATH:eq|contains:JSON or json:CAPTURE:$.PATH:exists, "
    'e.g. json:/_admin/record:$.items[0].name:eq:"Bob"'
)
ALL_USE = (
    "Use one of answer:MODE:VALUE, url:glob|regex:PATTERN, miniwob, "
    "json:CAPTURE:$.PATH:eq|contains|exists[:JSON], network:METHOD:URL[:STATUS], "
    'python:MODULE:FUNCTION, none, or a JSON object with a "type"'
)
OBJECT_USE = 'Use a JSON object with a "type", e.g. {"type":"answer","contains":"42"}'
OBJECT_ANSWER_USE = (
    'Use {"type":"answer","contains":"42"} with one of exact, normalized, contains, regex, '
    "number (and optional tolerance) or any (a list)"
)
OBJECT_JSON_USE = (
    'Use {"type":"json","capture":"/_admin/record","path":"items.0.name","equals":"Bob"} '
    'with one of equals, contains or "exists":true'
)


def test_bad_spec_message_in_full() -> None:
    with pytest.raises(GraderSpecError) as caught:
        make_grader("answer:number:three")
    assert str(caught.value) == (
        "bad grader spec 'answer:number:three': answer:number needs a finite number, got 'three'. "
        "Use answer:number:VALUE[:TOLERANCE], e.g. answer:number:3.5:0.01 or answer:number:200:5%"
    )


JSON_PATH_HINT = 'use [0], [-1] or ["key"]'
NEEDS_PATH = "needs a capture URL, then ':' and a path starting with $"


@pytest.mark.parametrize(
    ("spec", "problem", "use"),
    [
        ("", "unknown grader type ''", ALL_USE),
        ("exact:42", "unknown grader type 'exact'", ALL_USE),
        ("answer", "unknown answer mode ''", ANSWER_USE),
        ("answer:equals:42", "unknown answer mode 'equals'", ANSWER_USE),
        ("answer:exact:", "answer:exact must be non-empty text", ANSWER_USE),
        (
            "answer:contains:?!",
            "'?!' has no letters or digits to compare (exact and regex can)",
            ANSWER_USE,
        ),
        (
            "answer:regex:(a",
            "bad regex (missing ), unterminated subpattern at position 0)",
            ANSWER_USE,
        ),
        ("answer:number:inf", "answer:number needs a finite number, got 'inf'", NUMBER_USE),
        ("answer:number:3:x%", "the tolerance must be a finite number, got 'x'", NUMBER_USE),
        ("answer:number:3:-1", "the tolerance must not be negative", NUMBER_USE),
        ("answer:any:yes", "answer:any needs a JSON list, got 'yes'", ANY_USE),
        ("answer:any:[]", "answer:any needs a non-empty JSON list of strings", ANY_USE),
        ('answer:any:["a",1]', "answer:any needs a non-empty JSON list of strings", ANY_USE),
        ("url:*/done", "unknown url match '*/done'", URL_USE),
        ("url:glob:", "url:glob needs a pattern", URL_USE),
        ("url:regex:[", "bad regex (unterminated character set at position 0)", URL_USE),
        ("miniwob:click-button", "miniwob takes no arguments", "Use miniwob (no arguments)"),
        ("none:x", "none takes no arguments", "Use none (no arguments)"),
        ("json:/r:items.0:eq:1", NEEDS_PATH, JSON_USE),
        ("json:$.a:eq:1", NEEDS_PATH, JSON_USE),
        ("json:/r:$.a:equals:1", "unknown json check 'equals'", JSON_USE),
        ("json:/r:$.a", "unknown json check ''", JSON_USE),
        ("json:/r:$.a:eq:Bob", "json eq needs a JSON value (quote strings), got 'Bob'", JSON_USE),
        ("json:/r:$.a:exists:true", "json exists takes no value", JSON_USE),
        (
            "json:/r:$.a[x]:exists",
            f"bad path (bad index at position 4; {JSON_PATH_HINT})",
            JSON_USE,
        ),
        ("json:/r:$..a:exists", "bad path (empty key after '.' at position 1)", JSON_USE),
        ("json:/r:$[0:exists", f"bad path (bad index at position 2; {JSON_PATH_HINT})", JSON_USE),
        ('json:/r:$["a"x]:exists', "bad path (missing ']' at position 5)", JSON_USE),
        ("{", "not valid JSON (Input data was truncated)", OBJECT_USE),
        ("[1]", "unknown grader type '[1]'", ALL_USE),
        ('{"grader":"x"}', "unknown or missing grader type None", OBJECT_USE),
        ('{"type":"answer"}', "needs exactly one mode field", OBJECT_ANSWER_USE),
        (
            '{"type":"answer","exact":"a","contains":"a"}',
            "needs exactly one mode field",
            OBJECT_ANSWER_USE,
        ),
        (
            '{"type":"answer","exact":"a","tolerance":1}',
            "tolerance is only for number",
            OBJECT_ANSWER_USE,
        ),
        (
            '{"type":"answer","number":true}',
            "answer:number needs a finite number, got 'True'",
            'Use {"type":"answer","number":3.5,"tolerance":0.01} (tolerance may be "5%")',
        ),
        (
            '{"type":"url","glob":"*","regex":"x"}',
            "needs exactly one pattern field",
            'Use {"type":"url","glob":"*/done*"} or {"type":"url","regex":"/done$"}',
        ),
        (
            '{"type":"miniwob","seed":3}',
            "unknown field 'seed' for type 'miniwob'",
            'Use {"type":"miniwob"}',
        ),
        (
            '{"type":"json","capture":"/r","path":"a","equals":1,"exists":true}',
            "needs exactly one of equals, contains, exists",
            OBJECT_JSON_USE,
        ),
        (
            '{"type":"json","capture":"/r","path":"a","exists":false}',
            "exists must be true",
            OBJECT_JSON_USE,
        ),
        (
            '{"type":"json","path":"a","exists":true}',
            "capture must be non-empty text",
            OBJECT_JSON_USE,
        ),
        (
            '{"type":"json","capture":"/r","path":"a..b","exists":true}',
            "bad path (path 'a..b' has an empty segment)",
            OBJECT_JSON_USE,
        ),
        (
            '{"type":"python"}',
            "function must be non-empty text",
            'Use {"type":"python","function":"my_graders:check_total"}',
        ),
    ],
)
def test_bad_specs(spec: str, problem: str, use: str) -> None:
    with pytest.raises(GraderSpecError) as caught:
        make_grader(spec)
    assert str(caught.value) == f"bad grader spec {spec!r}: {problem}. {use}"
    assert "\n" not in str(caught.value)


def test_long_bad_spec_is_shortened_on_one_line() -> None:
    with pytest.raises(GraderSpecError) as caught:
        make_grader("answer:bogus:" + "x\n" * 100)
    message = str(caught.value)
    assert message.startswith("bad grader spec 'answer:bogus:x\\nx\\n")
    assert "...': unknown answer mode 'bogus'." in message and "\n" not in message


def test_not_text_spec() -> None:
    with pytest.raises(GraderSpecError, match=r"^bad grader spec 3: not text\. Use one of answer"):
        make_grader(3)  # type: ignore[arg-type]
