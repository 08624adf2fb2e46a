"""Every fault mode, as the plain openai client (max_retries=0, short timeout) observes it."""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest

from ownloop.agents import AgentParseError, make_agent
from ownloop.modelserver import (
    HOSTILE_MARKER,
    FaultPhase,
    FaultSpecError,
    FaultyResponder,
    ModelServer,
    Reply,
    parse_faults,
)
from ownloop.modelserver.faults import HOSTILE_REPLIES

GOOD = "Thought: ok\nAction: finished(content='good')"
MESSAGES = [{"role": "user", "content": "hi"}]


def good(request: dict[str, Any]) -> Reply:
    return Reply(GOOD)


def _ask(api: openai.OpenAI) -> Any:
    return api.chat.completions.create(model="m", messages=MESSAGES)


def test_parse_faults_reads_phases():
    assert parse_faults("500:2,hang=8:1,429=3") == (
        FaultPhase("500", None, 2),
        FaultPhase("hang", 8.0, 1),
        FaultPhase("429", 3.0, None),
    )


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("explode", "bad fault phase 'explode'"),
        ("500:x", "bad fault phase '500:x'"),
        ("garbage,500:1", "has no :N, so it never ends"),
    ],
)
def test_parse_faults_rejects_bad_specs_with_the_fix(spec, needle):
    with pytest.raises(FaultSpecError, match=needle):
        parse_faults(spec)


@pytest.mark.parametrize(
    ("mode", "check"),
    [
        (
            "garbage",
            lambda r: (
                "Action: " not in r.choices[0].message.content
                or "teleport" in r.choices[0].message.content
            ),
        ),
        (
            "truncated",
            lambda r: (
                r.choices[0].finish_reason == "length"
                and r.choices[0].message.content.endswith("start_box='(31")
            ),
        ),
        ("huge", lambda r: len(r.choices[0].message.content) > 100_000),
        ("hostile", lambda r: "__import__" in r.choices[0].message.content),
    ],
)
def test_text_faults_answer_bad_text_then_good(serve, client, mode, check):
    api = client(serve(FaultyResponder(good, f"{mode}:1")))
    assert check(_ask(api))
    assert _ask(api).choices[0].message.content == GOOD


def test_hostile_mode_cycles_through_every_payload(serve, client):
    api = client(serve(FaultyResponder(good, "hostile")))
    texts = [_ask(api).choices[0].message.content for _ in HOSTILE_REPLIES]
    assert texts == list(HOSTILE_REPLIES)
    assert all(HOSTILE_MARKER in text for text in texts)
    assert any("type(content=" in text for text in texts)


@pytest.mark.parametrize("payload", HOSTILE_REPLIES)
def test_hostile_payloads_never_run_in_the_uitars_parser(payload, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agent = make_agent("uitars")
    try:
        agent.parse(payload, (1280, 800))
    except AgentParseError:
        pass
    assert not (tmp_path / HOSTILE_MARKER).exists()


def test_500_is_an_internal_server_error_in_openai_shape(serve, client):
    api = client(serve(FaultyResponder(good, "500:1")))
    with pytest.raises(openai.InternalServerError) as raised:
        _ask(api)
    assert raised.value.status_code == 500
    assert raised.value.body["message"] == "the model server failed (ownloop fault injection)"
    assert _ask(api).choices[0].message.content == GOOD


def test_429_is_a_rate_limit_error_with_retry_after(serve, client):
    api = client(serve(FaultyResponder(good, "429=3:1")))
    with pytest.raises(openai.RateLimitError) as raised:
        _ask(api)
    assert raised.value.response.headers["retry-after"] == "3"
    assert raised.value.body["type"] == "rate_limit_error"
    assert _ask(api).choices[0].message.content == GOOD


def test_hang_outlasts_the_client_timeout_but_is_bounded(serve, client):
    api = client(serve(FaultyResponder(good, "hang=1.5:1")), timeout=0.3)
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        _ask(api)
    assert time.monotonic() - started < 1.4  # before the 1.5 s hang ends
    # The hang is bounded: a patient client gets the connection closed, no reply, in ~1.5 s.
    patient = client(serve(FaultyResponder(good, "hang=1.5:1")), timeout=10)
    started = time.monotonic()
    with pytest.raises(openai.APIConnectionError):
        _ask(patient)
    assert 1.4 < time.monotonic() - started < 5
    assert _ask(patient).choices[0].message.content == GOOD


def test_stop_ends_a_hang_at_once(client):
    server = ModelServer(FaultyResponder(good, "hang=60"))
    api = client(server.start(), timeout=0.2)
    with pytest.raises(openai.APITimeoutError):
        _ask(api)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 10  # not the 60 s hang


def test_drop_closes_the_connection_without_a_response(serve, client):
    api = client(serve(FaultyResponder(good, "ok:1,drop:1")))
    assert _ask(api).choices[0].message.content == GOOD  # a kept-alive connection is dropped
    with pytest.raises(openai.APIConnectionError) as raised:
        _ask(api)
    assert not isinstance(raised.value, openai.APITimeoutError)
    assert _ask(api).choices[0].message.content == GOOD


def test_down_refuses_connections_then_listens_again(serve, client):
    url = serve(FaultyResponder(good, "down=1:1"))
    api = client(url)
    with pytest.raises(openai.APIConnectionError):
        _ask(api)
    time.sleep(0.2)
    with pytest.raises(openai.APIConnectionError, match="Connection error"):
        client(url).models.list()  # a fresh connection is refused, not just this one dropped
    time.sleep(1.2)
    assert _ask(api).choices[0].message.content == GOOD


def test_first_n_calls_fault_then_the_inner_responder_answers(serve, client):
    api = client(serve(FaultyResponder(good, "500:2,garbage:1")))
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            _ask(api)
    assert _ask(api).choices[0].message.content != GOOD
    assert [_ask(api).choices[0].message.content for _ in range(3)] == [GOOD] * 3
