"""The url, miniwob and json graders over captured evidence, passing and failing."""

from __future__ import annotations

import msgspec
import pytest

from ownloop.grading import Grade, final_url, make_grader
from tests.grading.conftest import evidence

RECORD = "http://127.0.0.1:8312/_admin/record"
BODY = {"items": [{"name": "Bob", "age": 41, "tags": ["a", "b"], "ok": True}], "count": 1}
ITEM = '{"name": "Bob", "age": 41, "tags": ["a", "b"], "ok": true}'  # as details show it
BOB_41 = '{"name": "Bob", "age": 41}'
EVIDENCE = (
    evidence("final_url", "http://127.0.0.1:8312/start"),
    evidence("capture", {"items": []}, RECORD),  # an earlier capture of the same URL: not used
    evidence("final_url", "http://127.0.0.1:8312/form/Done?id=7"),
    evidence("title", "Done"),
    evidence("capture", BODY, RECORD),
    evidence("capture", {"lines": ["login", "save"]}, "http://127.0.0.1:8312/_admin/log?tail=2"),
)


def test_final_url_is_the_last_one() -> None:
    assert final_url(EVIDENCE) == "http://127.0.0.1:8312/form/Done?id=7"
    assert final_url([evidence("final_url", raw="not json")]) is None
    assert final_url([evidence("final_url", 3)]) is None
    assert final_url([]) is None


@pytest.mark.parametrize(
    ("spec", "passed"),
    [
        ("url:glob:*/form/Done*", True),
        ("url:glob:http://127.0.0.1:8312/form/Done?id=?", True),
        ("url:glob:*/form/done*", False),  # globs are case-sensitive
        ("url:glob:*/form/Done", False),  # and match the whole URL
        ("url:glob:*/start", False),  # the last final_url counts
        ("url:regex:/form/Done", True),  # regexes are searched
        ("url:regex:(?i)/FORM/done\\?id=\\d+$", True),
        ("url:regex:^/form", False),
        ('{"type":"url","glob":"*id=7"}', True),
    ],
)
def test_url(spec: str, passed: bool) -> None:
    grade = make_grader(spec).grade(None, EVIDENCE)
    kind, pattern = spec.split(":", 2)[1:] if spec[0] != "{" else ("glob", "*id=7")
    verb = "matches" if passed else "does not match"
    details = f"final URL 'http://127.0.0.1:8312/form/Done?id=7' {verb} {kind} {pattern!r}"
    assert grade == Grade(1.0 if passed else 0.0, passed, details)


def test_url_without_final_url_fails() -> None:
    assert make_grader("url:glob:*").grade("x", EVIDENCE[3:]) == Grade(
        0.0, False, "no final_url evidence"
    )


@pytest.mark.parametrize(
    ("value", "grade"),
    [
        (
            {"reward": 0.73, "raw_reward": 1.0, "done": True, "reason": None},
            Grade(1.0, True, "raw reward 1 > 0 (reward 0.73, done true, reason null)"),
        ),
        ({"raw_reward": 0.5}, Grade(0.5, True, "raw reward 0.5 > 0")),
        (
            {"reward": -1.0, "raw_reward": -1, "done": True, "reason": "wrong button"},
            Grade(0.0, False, 'raw reward -1 <= 0 (reward -1.0, done true, reason "wrong button")'),
        ),
        (
            {"reward": 0, "raw_reward": 0, "done": False},
            Grade(0.0, False, "raw reward 0 <= 0 (reward 0, done false)"),
        ),
        (
            {"reward": 1},
            Grade(0.0, False, 'miniwob_reward has no numeric raw_reward: {"reward": 1}'),
        ),
        (
            {"raw_reward": True},
            Grade(0.0, False, 'miniwob_reward has no numeric raw_reward: {"raw_reward": true}'),
        ),
        ([1], Grade(0.0, False, "miniwob_reward has no numeric raw_reward: [1]")),
    ],
)
def test_miniwob(value: object, grade: Grade) -> None:
    assert make_grader("miniwob").grade(None, [evidence("miniwob_reward", value)]) == grade


def test_miniwob_uses_the_last_reward_and_needs_one() -> None:
    pieces = [
        evidence("miniwob_reward", {"raw_reward": -1}),
        evidence("miniwob_reward", {"raw_reward": 1}),
    ]
    assert make_grader("miniwob").grade(None, pieces).passed
    assert make_grader("miniwob").grade(None, pieces[::-1]).passed is False
    assert make_grader("miniwob").grade(None, []) == Grade(0.0, False, "no miniwob_reward evidence")
    broken = [evidence("miniwob_reward", raw="{")]
    assert (
        make_grader('{"type":"miniwob"}')
        .grade(None, broken)
        .details.startswith("evidence 'miniwob_reward' is not valid JSON (")
    )


@pytest.mark.parametrize(
    ("spec", "grade"),
    [
        (
            'json:/_admin/record:$.items[0].name:eq:"Bob"',
            Grade(1.0, True, '$.items[0].name = "Bob" equals "Bob"'),
        ),
        (
            'json:/_admin/record:$.items[0].name:eq:"bob"',
            Grade(0.0, False, '$.items[0].name = "Bob" does not equal "bob"'),
        ),
        (
            "json:/_admin/record:$.items[0].age:eq:41.0",
            Grade(1.0, True, "$.items[0].age = 41 equals 41.0"),
        ),
        (
            "json:/_admin/record:$.items[0].ok:eq:1",
            Grade(0.0, False, "$.items[0].ok = true does not equal 1"),
        ),
        (
            "json:/_admin/record:$.count:eq:true",
            Grade(0.0, False, "$.count = 1 does not equal true"),
        ),
        (
            'json:/_admin/record:$.items[-1].tags:contains:"b"',
            Grade(1.0, True, '$.items[-1].tags = ["a", "b"] contains "b"'),
        ),
        (
            'json:/_admin/record:$.items[0].name:contains:"ob"',
            Grade(1.0, True, '$.items[0].name = "Bob" contains "ob"'),
        ),
        (
            'json:/_admin/record:$.items[0]:contains:"age"',
            Grade(
                1.0,
                True,
                f'$.items[0] = {ITEM} contains "age"',
            ),
        ),
        (
            'json:/_admin/record:$.items:contains:{"name":"Bob","age":41}',
            Grade(
                0.0,
                False,
                f"$.items = [{ITEM}] does not contain {BOB_41}",
            ),
        ),
        (
            'json:/_admin/record:$.items[0]:contains:{"name":"Bob","age":41}',
            Grade(
                1.0,
                True,
                f"$.items[0] = {ITEM} contains {BOB_41}",
            ),
        ),
        (
            "json:/_admin/record:$.items[0].age:contains:4",
            Grade(0.0, False, "$.items[0].age = 41 does not contain 4"),
        ),
        (
            "json:/_admin/record:$.items[0]:exists",
            Grade(
                1.0,
                True,
                f"$.items[0] exists ({ITEM})",
            ),
        ),
        (
            "json:/_admin/record:$.items[1]:exists",
            Grade(0.0, False, f"$.items[1] not found in capture '{RECORD}'"),
        ),
        (
            'json:/_admin/record:$.items.name:eq:"Bob"',
            Grade(0.0, False, f"$.items.name not found in capture '{RECORD}'"),
        ),
        (f"json:{RECORD}:$.count:eq:1", Grade(1.0, True, "$.count = 1 equals 1")),
        ("json:{BASE}/_admin/record:$.count:eq:1", Grade(1.0, True, "$.count = 1 equals 1")),
        (
            'json:/_admin/log?tail=2:$.lines[1]:eq:"save"',
            Grade(1.0, True, '$.lines[1] = "save" equals "save"'),
        ),
        (
            'json:/_admin/log:$.lines:contains:"login"',
            Grade(1.0, True, '$.lines = ["login", "save"] contains "login"'),
        ),
        ("json:/_admin/other:$.x:exists", Grade(0.0, False, "no capture of '/_admin/other'")),
        ("json:_admin/record:$.count:exists", Grade(0.0, False, "no capture of '_admin/record'")),
        (
            '{"type":"json","capture":"/_admin/record","path":"items.0.name","equals":"Bob"}',
            Grade(1.0, True, '$.items[0].name = "Bob" equals "Bob"'),
        ),
        (
            '{"type":"json","capture":"/_admin/record","path":"$.items[0].tags","contains":"a"}',
            Grade(1.0, True, '$.items[0].tags = ["a", "b"] contains "a"'),
        ),
        (
            '{"type":"json","capture":"/_admin/record","path":"items.-1","exists":true}',
            Grade(
                1.0,
                True,
                f"$.items[-1] exists ({ITEM})",
            ),
        ),
    ],
)
def test_json(spec: str, grade: Grade) -> None:
    assert make_grader(spec).grade(None, EVIDENCE) == grade


def test_json_odd_keys_and_unreadable_captures() -> None:
    odd = [evidence("capture", {"a.b": {"0": "zero"}, "x:y": [1]}, "http://h/_c")]
    assert make_grader('json:/_c:$["a.b"][0]:eq:"zero"').grade(None, odd).passed
    assert make_grader('json:/_c:$["x:y"][0]:eq:1').grade(None, odd).passed
    blob = msgspec.structs.replace(odd[0], value_json=None, sha256="ab" * 32)
    assert make_grader("json:/_c:$.x:exists").grade(None, [blob]) == Grade(
        0.0,
        False,
        "capture 'http://h/_c': evidence 'capture' has no inline JSON value (blob abababababab)",
    )
    broken = msgspec.structs.replace(odd[0], value_json='{"a": ')
    details = make_grader("json:/_c:$.x:exists").grade(None, [broken]).details
    assert details.startswith("capture 'http://h/_c': evidence 'capture' is not valid JSON (")
    scalar = msgspec.structs.replace(odd[0], value_json="3")
    assert make_grader("json:/_c:$.x:exists").grade(None, [scalar]) == Grade(
        0.0, False, "$.x not found in capture 'http://h/_c'"
    )
