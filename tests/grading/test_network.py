"""The network grader over a HAR built by the recorder's HAR builder: matching, checks, caps and
scrubbing, and the spec's errors."""

from __future__ import annotations

import json

import msgspec
import pytest

from ownloop.grading import Check, GraderSpecError, make_grader, wants_network, with_network
from ownloop.store.events import EvidenceCaptured
from ownloop.world.har import Exchange, build_har
from tests.grading.conftest import AT, evidence

BASE = "http://127.0.0.1:8312"
JSON = {"content-type": "application/json"}


def exchange(
    method: str,
    path: str,
    status: int = 200,
    sent: str | None = None,
    body: object = None,
    started: float = 1.0,
    **headers: str,
) -> Exchange:
    return Exchange(
        started=started,
        method=method,
        url=BASE + path,
        request_headers={**JSON, **headers} if sent is not None else dict(headers),
        post_data=sent,
        status=status,
        status_text="OK",
        response_headers=dict(JSON),
        body=None if body is None else json.dumps(body),
        body_note="",
        resource_type="fetch",
        elapsed_ms=3.5,
    )


TRAFFIC = (
    exchange("GET", "/pages/shop.html", started=1.0),
    exchange(
        "POST",
        "/api/cart?api_key=k-12345678",
        sent='{"product":"red-mug","qty":1}',
        body={"ok": True, "items": [{"product": "red-mug", "qty": 1}]},
        started=2.0,
    ),
    exchange(
        "POST",
        "/api/cart",
        status=200,
        sent='{"product":"blue-mug","qty":2}',
        body={
            "ok": True,
            "items": [{"product": "red-mug", "qty": 1}, {"product": "blue-mug", "qty": 2}],
        },
        started=3.0,
    ),
    exchange("POST", "/form", status=303, sent="title=Quarterly+report&amount=42", started=4.0),
)


def network(exchanges: tuple[Exchange, ...] = TRAFFIC) -> EvidenceCaptured:
    return evidence("network", raw=build_har(exchanges).decode(), source="har")


def grade(spec: object, *pieces: EvidenceCaptured):
    text = spec if isinstance(spec, str) else json.dumps(spec)
    return make_grader(text).grade(None, pieces or (network(),))


def test_a_post_with_a_json_body_passes_with_its_checks() -> None:
    result = grade(
        {
            "type": "network",
            "method": "POST",
            "url": "{BASE}/api/cart",
            "status": 200,
            "request": {"product": "blue-mug"},
            "response": {"items.1.qty": 2, "$.ok": True},
        }
    )
    assert result.passed and result.score == 1.0, result.details
    assert result.checks == (
        Check(
            name="request",
            passed=True,
            expected="POST /api/cart",
            actual=f"POST {BASE}/api/cart",
            actual_normalized="POST /api/cart",
        ),
        Check(name="status", passed=True, expected="200", actual="200", actual_normalized="200"),
        Check(
            name="request $.product",
            passed=True,
            expected='"blue-mug"',
            actual='"blue-mug"',
            actual_normalized='"blue-mug"',
        ),
        Check(
            name="response $.items[1].qty",
            passed=True,
            expected="2",
            actual="2",
            actual_normalized="2",
        ),
        Check(
            name="response $.ok",
            passed=True,
            expected="true",
            actual="true",
            actual_normalized="true",
        ),
    )
    assert result.details == f"POST {BASE}/api/cart matches (closest of 2 POST /api/cart)"


def test_the_closest_request_explains_a_failure() -> None:
    result = grade(
        {
            "type": "network",
            "method": "post",
            "url": "/api/cart",
            "status": 201,
            "request": {"product": "green-mug"},
        }
    )
    assert not result.passed and result.score == 0.0
    # Both POSTs miss the product and the status: the latest of the closest is shown.
    assert [(c.name, c.passed, c.actual) for c in result.checks] == [
        ("request", True, f"POST {BASE}/api/cart"),
        ("status", False, "200"),
        ("request $.product", False, '"blue-mug"'),
    ]
    assert result.details == (
        f"POST {BASE}/api/cart status expected 201, got 200; request $.product expected "
        '"green-mug", got "blue-mug" (closest of 2 POST /api/cart)'
    )


def test_the_closest_request_is_the_one_passing_most_checks() -> None:
    result = grade({"type": "network", "url": "/api/cart*", "request": {"product": "red-mug"}})
    assert result.passed
    assert result.checks[0].actual == f"POST {BASE}/api/cart?api_key=***"  # scrubbed in the HAR


@pytest.mark.parametrize(
    ("spec", "passed"),
    [
        ("network:POST:/api/cart:200", True),
        ("network:POST:/api/cart", True),
        ("network:*:/pages/*.html", True),
        ("network:GET:/api/cart", False),  # no GET of it
        ("network:POST:/form:303", True),
        ("network:POST:/form:200", False),
        ("network:POST:/api/cart?api_key=*", True),  # the query, when the glob has one
        ("network:POST:/api/cart?api_key=nope", False),
        (f"network:POST:{BASE}/api/cart", True),  # a whole-URL glob
        (f"network:POST:{BASE}/api/cart?*", True),
        ("network:POST:http://other/api/cart", False),
        ("network:POST:/API/cart", False),  # globs are case-sensitive
    ],
)
def test_compact_specs(spec: str, passed: bool) -> None:
    assert grade(spec).passed is passed


def test_a_form_body_is_read_as_fields() -> None:
    spec = {
        "type": "network",
        "method": "POST",
        "url": "/form",
        "request": {"title": "Quarterly report", "amount": "42"},
    }
    assert grade(spec).passed
    failed = grade({**spec, "request": {"amount": 42}})  # form fields are text
    assert not failed.passed and failed.checks[-1].actual == '"42"'


def test_a_missing_path_and_a_body_that_is_not_json() -> None:
    result = grade({"type": "network", "url": "/pages/shop.html", "response": {"x": 1}})
    assert not result.passed
    assert result.checks[-1] == Check(name="response $.x", expected="1", actual="(missing)")


def test_no_matching_request_and_no_network() -> None:
    result = grade("network:DELETE:/api/cart")
    assert not result.passed
    assert result.details == "no DELETE /api/cart among 4 recorded requests"
    assert result.checks == (
        Check(name="request", expected="DELETE /api/cart", actual="no such request among 4"),
    )
    final = evidence("final_url", BASE)
    assert grade("network:GET:*", final).details == "no network evidence (a HAR) was recorded"


def test_the_har_blob_is_read_by_whoever_grades() -> None:
    har = build_har(TRAFFIC)
    blob = EvidenceCaptured(
        at=AT, run_id="run1", session_id="s1", name="network", sha256="ab" * 32, source="har"
    )
    grader = make_grader("network:POST:/api/cart:200")
    assert wants_network(grader) and not wants_network(make_grader("url:glob:*"))
    unread = grader.grade(None, [blob])
    assert not unread.passed and "has no inline JSON value" in unread.details
    loaded = with_network([blob], {"ab" * 32: har}.__getitem__)
    assert grader.grade(None, loaded).passed
    assert loaded[0].sha256 == blob.sha256
    # A blob that cannot be read stays a blob: the grade fails, nothing raises.
    assert with_network([blob], {}.__getitem__) == [blob]


def test_secrets_are_scrubbed_from_the_har() -> None:
    secret = exchange(
        "POST",
        "/api/login",
        sent='{"user":"demo","password":"hunter22"}',
        body={"token": "t-0123456789", "access_token": "at-0123456789"},
        authorization="Bearer tok-abcdef123456",
        cookie="sid=abc123def456",
    )
    secret = secret._replace(
        url="http://user:pw-secret@127.0.0.1:8312/api/login?token=tq-999999",
        response_headers={**JSON, "set-cookie": "sid=abc123def456"},
    )
    text = build_har((secret,)).decode()
    for leaked in (
        "hunter22",
        "at-0123456789",
        "tok-abcdef123456",
        "abc123def456",
        "pw-secret",
        "tq-999999",
    ):
        assert leaked not in text
    entry = json.loads(text)["log"]["entries"][0]
    headers = {h["name"]: h["value"] for h in entry["request"]["headers"]}
    assert headers["authorization"] == "***" and headers["cookie"] == "***"
    assert entry["request"]["url"] == "http://127.0.0.1:8312/api/login?token=***"
    assert json.loads(entry["request"]["postData"]["text"]) == {"user": "demo", "password": "***"}


def test_the_har_is_capped_largest_bodies_first() -> None:
    big = exchange("GET", "/api/big", body={"x": "a" * 3000}, started=1.0)
    small = exchange("GET", "/api/small", body={"x": "b"}, started=2.0)
    data = build_har((small, big), max_bytes=2500)
    assert len(data) <= 2500
    entries = json.loads(data)["log"]["entries"]
    assert [e["request"]["url"] for e in entries] == [BASE + "/api/big", BASE + "/api/small"]
    assert (
        entries[0]["response"]["content"]["comment"] == "body dropped: the HAR is capped at 5 MiB"
    )
    assert entries[1]["response"]["content"]["text"] == '{"x": "b"}'
    # Still too big without bodies: the oldest entries go, and the log says how many.
    many = tuple(exchange("GET", f"/p{i}", started=float(i)) for i in range(40))
    log = json.loads(build_har(many, max_bytes=4000))["log"]
    assert log["comment"].endswith("oldest entries dropped: the HAR is capped at 5 MiB")
    assert log["entries"][-1]["request"]["url"] == BASE + "/p39"
    assert len(log["entries"]) < 40


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("network:POST", "needs a URL glob"),
        ("network:PO ST:/x", "bad method 'PO ST'"),
        ('{"type":"network","method":"POST"}', "url must be non-empty text"),
        (
            '{"type":"network","url":"/x","status":"200"}',
            "status must be an HTTP status such as 200, got '200'",
        ),
        (
            '{"type":"network","url":"/x","request":["a"]}',
            "request must be an object of path: JSON value",
        ),
        (
            '{"type":"network","url":"/x","response":{"a..b":1}}',
            "bad response path 'a..b' (path 'a..b' has an empty segment)",
        ),
        ('{"type":"network","url":"/x","body":{}}', "unknown field 'body' for type 'network'"),
    ],
)
def test_bad_network_specs(spec: str, problem: str) -> None:
    with pytest.raises(GraderSpecError) as caught:
        make_grader(spec)
    message = str(caught.value)
    assert message.startswith(f"bad grader spec {spec!r}: {problem}. Use "), message
    assert "network" in message.partition(". Use ")[2]


def test_the_spec_round_trips_through_msgspec() -> None:
    # A grade's checks are stored on the SessionGraded event as they are.
    checks = grade("network:POST:/api/cart:200").checks
    assert msgspec.json.decode(msgspec.json.encode(checks), type=tuple[Check, ...]) == checks


def test_the_har_keeps_the_browsers_headers_cookies_and_query_read_by_haralyzer() -> None:
    """What WebArena-Verified reads from a HAR (Accept and Sec-Fetch-* of a navigation, the
    response's cookies, the query) is there, and haralyzer (a HAR reader of its own) reads it."""
    from haralyzer import HarParser

    page = exchange(
        "GET",
        "/pages/shop.html?q=red+mug&page=2",
        accept="text/html,application/xhtml+xml",
        **{"sec-fetch-dest": "document", "sec-fetch-mode": "navigate", "sec-fetch-user": "?1"},
        cookie="theme=dark; PHPSESSID=s3cr3t0123456789",
    )
    page = page._replace(
        resource_type="document",
        response_headers={
            "content-type": "text/html",
            "content-length": "1234",
            "set-cookie": "theme=dark; Path=/; SameSite=Lax\n"
            "PHPSESSID=s3cr3t0123456789; Path=/; HttpOnly; Secure\n"
            "cart=a1b2c3d4e5f6a7b8c9d0",
        },
    )
    har = json.loads(build_har((page,)))
    [entry] = HarParser(har).har_data["entries"]
    request, response = entry["request"], entry["response"]
    headers = {h["name"]: h["value"] for h in request["headers"]}
    assert headers["accept"].startswith("text/html") and headers["sec-fetch-user"] == "?1"
    assert headers["cookie"] == "***"
    assert request["queryString"] == [
        {"name": "q", "value": "red mug"},
        {"name": "page", "value": "2"},
    ]
    assert request["cookies"] == [
        {"name": "theme", "value": "***"},
        {"name": "PHPSESSID", "value": "***"},
    ]
    # A plain preference keeps its value; a session id and a long random value do not.
    assert response["cookies"] == [
        {"name": "theme", "value": "dark", "path": "/", "sameSite": "Lax"},
        {"name": "PHPSESSID", "value": "***", "path": "/", "httpOnly": True, "secure": True},
        {"name": "cart", "value": "***"},
    ]
    assert response["content"]["size"] == 1234
    assert b"s3cr3t0123456789" not in build_har((page,))
