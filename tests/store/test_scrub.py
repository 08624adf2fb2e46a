"""ownloop.store.scrub: every credential form is masked, ordinary text and JSON survive, and a
5 MB hostile body is scrubbed in linear time."""

from __future__ import annotations

import base64
import json
import random
import time

import pytest

from ownloop.store.scrub import (
    REDACTED,
    mask_secrets,
    scrub_bytes,
    scrub_text,
    scrub_url,
    url_secrets,
)

BASIC = base64.b64encode(b"user:pw-4711").decode()


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("--endpoint http://user:pw@host:8000/v1", "--endpoint http://***@host:8000/v1"),
        ("https://u%40x:p%3Aw@h/v1?q=1", "https://***@h/v1?q=1"),
        (
            "connect to socks5://me:secret@proxy:1080 failed",
            "connect to socks5://***@proxy:1080 failed",
        ),
        ("Authorization: Basic " + BASIC, "Authorization: ***"),
        ("proxy-authorization: Bearer abc.def-ghi", "proxy-authorization: ***"),
        (
            "{'authorization': 'Bearer abcdefgh', 'host': 'x'}",
            "{'authorization': '***', 'host': 'x'}",
        ),
        ('{"Authorization":"Basic ' + BASIC + '"}', '{"Authorization":"***"}'),
        ('{\\"authorization\\": \\"Bearer abcdefgh\\"}', '{\\"authorization\\": \\"***\\"}'),
        ("header Authorization=xyz&a=1", "header Authorization=***&a=1"),
        ("got Bearer eyJhbGciOi.x-y_z~ back", "got Bearer *** back"),
        ("sent Basic " + BASIC + " to it", "sent Basic *** to it"),
        ("GET /v1?api_key=abcd1234&x=1", "GET /v1?api_key=***&x=1"),
        ("--api-key=k2 --token=t --password=p", "--api-key=*** --token=*** --password=***"),
        ("access_token=qq; refresh_token=rr", "access_token=***; refresh_token=***"),
        (
            '{"api_key": "zzzz", "x_access_token": "abc"}',
            '{"api_key": "***", "x_access_token": "***"}',
        ),
        ("key sk-proj-abcdefghijklmnop1234 leaked", "key *** leaked"),
    ],
)
def test_credential_forms_are_masked(text: str, scrubbed: str) -> None:
    assert scrub_text(text) == scrubbed
    assert scrub_text(scrubbed) == scrubbed  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "Thought: a basic idea. The bearer of it. max_tokens=500, prompt_tokens, tokens=4",
        "Action: type(content='hello world')\nAction: click(start_box='(10,20)')",
        "see https://example.com/a@b, mailto:x@y.z and git@github.com:o/r.git",
        "Basic auth is off",  # "auth" is not base64 of user:password
        '{"prompt_tokens": 12, "completion_tokens": 3, "token": "hello"}',
        "",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert scrub_text(text) == text


def test_given_secrets_are_masked_anywhere_but_short_ones_are_not() -> None:
    assert scrub_text("the key k-12345 was k-12345", ["k-12345"]) == "the key *** was ***"
    assert scrub_text("pw is in the word pwned", ["pw"]) == "pw is in the word pwned"


def test_scrub_url_removes_userinfo_and_masks_secret_query_values() -> None:
    assert scrub_url("http://user:pw@host:8000/v1") == "http://host:8000/v1"
    assert (
        scrub_url("http://user@[::1]:8000/v1?token=abc&x=1") == "http://[::1]:8000/v1?token=***&x=1"
    )
    assert scrub_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_url_secrets_cover_raw_decoded_and_basic_forms() -> None:
    secrets = url_secrets("http://user:p%40ss-1@host/v1")
    assert {"p%40ss-1", "p@ss-1", "user:p@ss-1", base64.b64encode(b"user:p@ss-1").decode()} <= set(
        secrets
    )
    assert url_secrets("http://host/v1") == ()
    assert url_secrets("http://[bad") == ()


def test_scrubbed_json_stays_json_with_the_same_keys() -> None:
    body = json.dumps(
        {
            "error": {
                "message": f"Authorization: Basic {BASIC} at http://u:p@h/x",
                "api_key": "k" * 20,
                "url": "http://a:b@c/d?token=e&f=g",
            }
        }
    )
    scrubbed = json.loads(scrub_text(body))
    assert scrubbed["error"] == {
        "message": "Authorization: *** at http://***@h/x",
        "api_key": REDACTED,
        "url": "http://***@c/d?token=***&f=g",
    }


def test_scrub_bytes_keeps_invalid_utf8_exactly() -> None:
    clean = b"\xff\xfe not utf-8 \xed\xa0\x80 at all"
    assert scrub_bytes(clean) is clean
    dirty = b"\xff\xfe Authorization: Bearer abcdefgh \xed\xa0\x80"
    assert scrub_bytes(dirty) == b"\xff\xfe Authorization: *** \xed\xa0\x80"


@pytest.mark.parametrize(
    "unit",
    ["a", "a_", "http://", "token=", "Basic ", '"a":', "authorization: x ", "@://", "sk-"],
)
@pytest.mark.slow
def test_a_5_mb_hostile_text_is_scrubbed_in_linear_time(unit: str) -> None:
    text = unit * (5_000_000 // len(unit))
    began = time.perf_counter()
    scrub_text(text)
    assert time.perf_counter() - began < 60  # quadratic would take hours; linear takes < 1 s


@pytest.mark.slow
def test_a_5_mb_random_text_is_scrubbed_in_linear_time() -> None:
    rng = random.Random(7)
    text = "".join(rng.choice("ab_-=:/@\"'\\ .Bt") for _ in range(5_000_000))
    began = time.perf_counter()
    scrub_text(text)
    assert time.perf_counter() - began < 60


def test_mask_secrets_masks_only_the_given_secrets() -> None:
    # A model's answer: its own URL and token= are data; our key is not.
    answer = "goto(url='http://shop/?token=abc123') and key sk-live-0123456789abcdef9"
    assert mask_secrets(answer, ["sk-live-0123456789abcdef9", "ab"]) == (
        "goto(url='http://shop/?token=abc123') and key ***"
    )
    assert scrub_text(answer) != answer  # the generic forms would have changed the answer
