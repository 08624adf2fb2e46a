"""The cassette: matching rules in-process, and ``ownloop serve-model --cassette`` answering a
plain ``openai`` client with the recorded responses, a miss handled by each policy."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import msgspec
import openai
import pytest

from ownloop.modelserver import ModelServer, Reply
from ownloop.recorder.call import CallContext, CallRequest
from ownloop.recorder.model import wire_messages
from ownloop.replay import fold
from ownloop.replay.cassette import (
    Cassette,
    CassetteClient,
    load_cassette,
    make_cassette_server,
    message_keys,
    request_keys,
    wire_digest,
)
from ownloop.store import Store, open_store
from ownloop.store.events import ImagePart, Message, ModelCalled, Sampling, TextPart
from tests.replay.conftest import Recorded

pytestmark = pytest.mark.browser  # the store is recorded with Chromium once per run


def _calls(store: Store, session_id: str) -> list[ModelCalled]:
    return [call for step in fold(store.session_events(session_id)).steps for call in step.calls]


def _wire(store: Store, call: ModelCalled) -> list[dict[str, Any]]:
    import base64

    return wire_messages(
        call.messages,
        lambda part: (
            "data:image/png;base64," + base64.b64encode(store.get_blob(part.sha256)).decode()
        ),
    )


def test_wire_and_in_process_requests_have_the_same_keys(recorded: Recorded) -> None:
    store = open_store(recorded.path)
    for call in _calls(store, recorded.sessions["enter-text"]):
        wire = {"model": "m", "messages": _wire(store, call), "temperature": 0.7}
        # (the screenshots were compacted: the client sends a PNG written again from them)
        assert request_keys(wire) == message_keys(call.messages, wire_digest(store))


def test_a_changed_screenshot_matches_by_step_and_a_miss_stops(recorded: Recorded) -> None:
    store = open_store(recorded.path)
    session = fold(store.session_events(recorded.sessions["enter-text"]))
    client = CassetteClient(Cassette([session]))
    first, second = session.steps[0].calls[0], session.steps[1].calls[0]
    outcome = client.call(
        CallRequest(first.messages, Sampling(temperature=1.0), CallContext("r", "s", 1))
    )
    assert (outcome.text, outcome.events[0].served_by) == (first.response, "cassette:exact")
    last = second.messages[-1]
    changed = (
        *second.messages[:-1],
        msgspec.structs.replace(last, parts=(ImagePart(sha256="0" * 64, width=1280, height=800),)),
    )
    outcome = client.call(CallRequest(changed, Sampling(), CallContext("r", "s", 2)))
    assert (outcome.text, outcome.events[0].served_by) == (second.response, "cassette:step")
    stranger = (msgspec.structs.replace(first.messages[0], parts=first.messages[1].parts),)
    outcome = client.call(CallRequest(stranger, Sampling(), CallContext("r", "s", 9)))
    assert outcome.text is None and outcome.events[0].served_by == "cassette:miss"
    assert outcome.error == (
        "cassette miss at step 9: no recorded response matches this "
        "request; replay with --on-miss force (next recorded response) or "
        "forward (live model)"
    )
    forced = CassetteClient(Cassette([session]), on_miss="force")
    forced.call(CallRequest(first.messages, Sampling(), CallContext("r", "s", 1)))
    outcome = forced.call(CallRequest(stranger, Sampling(), CallContext("r", "s", 9)))
    assert (outcome.text, outcome.events[0].served_by) == (second.response, "cassette:force")


def _with_origin(messages: tuple[Message, ...], old: str, new: str) -> tuple[Message, ...]:
    return tuple(
        msgspec.structs.replace(
            message,
            parts=tuple(
                msgspec.structs.replace(part, text=part.text.replace(old, new))
                if isinstance(part, TextPart)
                else part
                for part in message.parts
            ),
        )
        for message in messages
    )


def test_a_task_served_at_another_origin_still_matches_exactly(recorded: Recorded) -> None:
    store = open_store(recorded.path)
    session = fold(store.session_events(recorded.sessions["enter-text"]))
    assert session.task is not None
    recorded_url = session.task.start_url
    parts = urlsplit(recorded_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    first = session.steps[0].calls[0]
    assert origin in str(first.messages)  # the prompt names the start URL
    now = "http://127.0.0.1:1"
    sent = _with_origin(first.messages, origin, now)

    def served_by(client: CassetteClient, messages: tuple[Message, ...]) -> str:
        outcome = client.call(CallRequest(messages, Sampling(), CallContext("r", "s", 1)))
        assert outcome.text == first.response
        return outcome.events[0].served_by

    # Unmoved, only the step number matches it.
    assert served_by(CassetteClient(Cassette([session])), sent) == "cassette:step"
    moved = CassetteClient(Cassette([session])).moved(recorded_url, now + parts.path)
    assert served_by(moved, sent) == "cassette:exact"
    # A port that only begins with the new one is another origin: it is not read as the recorded.
    longer = _with_origin(first.messages, origin, now + "0")
    moved = CassetteClient(Cassette([session])).moved(recorded_url, now + parts.path)
    assert served_by(moved, longer) == "cassette:step"
    # Nothing moved: the same client.
    unmoved = CassetteClient(Cassette([session]))
    assert unmoved.moved(recorded_url, recorded_url) is unmoved


@pytest.fixture
def served(recorded: Recorded) -> Iterator[tuple[Store, str, str]]:
    """``ownloop serve-model --cassette SESSION`` in a subprocess: (store, session id, URL)."""
    session_id = recorded.sessions["enter-text"]
    argv = ["--store", str(recorded.path), "serve-model", "--cassette", session_id, "--quiet"]
    # As a context manager: leaving it closes the pipe (else an unclosed-file ResourceWarning).
    with subprocess.Popen(
        [sys.executable, "-m", "ownloop", *argv], stdout=subprocess.PIPE, text=True
    ) as process:
        try:
            line = process.stdout.readline() if process.stdout else ""
            assert f"cassette of {session_id} at http://" in line, line
            yield open_store(recorded.path), session_id, line.rsplit(" at ", 1)[1].strip()
        finally:
            process.terminate()
            process.wait(10)


def test_serve_model_cassette_answers_a_plain_openai_client_in_order(
    served: tuple[Store, str, str],
) -> None:
    store, session_id, url = served
    client = openai.OpenAI(base_url=url, api_key="unused")
    calls = _calls(store, session_id)
    for call in calls:
        raw = client.chat.completions.with_raw_response.create(
            model="anything", messages=_wire(store, call), temperature=0.3
        )  # type: ignore[arg-type]
        reply = raw.parse()
        assert reply.choices[0].message.content == call.response
        assert raw.headers["x-ownloop-match"] == "cassette:exact"
        assert reply.system_fingerprint == "cassette:exact"
    stranger = [{"role": "user", "content": "What is the capital of France?"}]
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="m", messages=stranger)  # type: ignore[arg-type]
    assert caught.value.status_code == 409
    assert "cassette miss at step 1" in str(caught.value)


def test_a_miss_is_forced_or_forwarded_by_policy(recorded: Recorded) -> None:
    store = open_store(recorded.path)
    target = recorded.sessions["focus-text"]
    calls = _calls(store, target)
    stranger = [{"role": "user", "content": "Something never recorded"}]
    with make_cassette_server(store, target, "force") as url:
        client = openai.OpenAI(base_url=url, api_key="unused")
        texts = [
            client.chat.completions.create(model="m", messages=stranger)  # type: ignore[arg-type]
            for _ in calls
        ]
        assert [t.choices[0].message.content for t in texts] == [c.response for c in calls]
        assert {t.system_fingerprint for t in texts} == {"cassette:force"}
    with (
        ModelServer(lambda request: Reply("Action: wait()")) as live,
        make_cassette_server(store, target, "forward", live) as url,
    ):
        client = openai.OpenAI(base_url=url, api_key="unused")
        answer = client.chat.completions.create(model="m", messages=stranger)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "Action: wait()"
        exact = client.chat.completions.create(model="m", messages=_wire(store, calls[0]))  # type: ignore[arg-type]
        assert exact.choices[0].message.content == calls[0].response


def test_a_cassette_of_a_run_or_task_and_an_unknown_target(recorded: Recorded) -> None:
    store = open_store(recorded.path)
    assert len(load_cassette(store, "rec").sessions) == 3
    task_id = fold(store.session_events(recorded.sessions["focus-text"])).task_id
    assert load_cassette(store, task_id).sessions == [recorded.sessions["focus-text"]]
    with pytest.raises(Exception, match="no session, run or task 'nope'"):
        load_cassette(store, "nope")


@pytest.fixture(scope="module")
def molmoweb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, str]:
    """A molmoweb session of enter-text recorded against the expert: (store, session id).

    MolmoWeb sends one user turn with its past steps as "## Step N" text and no assistant
    message, so a request's step is not its assistant turns plus one.
    """
    from click.testing import CliRunner

    from ownloop.cli import cli
    from ownloop.modelserver.endpoint import make_server

    path = tmp_path_factory.mktemp("molmoweb") / "store"
    with make_server("miniwob", "molmoweb") as url:  # its Chromium closes before the tests run
        result = CliRunner().invoke(
            cli,
            [
                "--store",
                str(path),
                "record",
                "molmoweb",
                "--suite",
                "miniwob:enter-text",
                "--endpoint",
                url,
                "--model",
                "expert",
                "--settle",
                "0.1",
                "--workers",
                "1",
                "--released",
                str(path.parent / "no-clone"),
            ],
            catch_exceptions=False,
        )
    assert result.exit_code == 0 and "1 finished" in result.output, result.output
    store = open_store(path)
    [(session_id,)] = store.sql("select session_id from sessions").rows
    return store, session_id


def _changed_screenshots(store: Store, call: ModelCalled) -> list[dict[str, Any]]:
    import base64

    # The same PNG with one byte more: its header (and size) stays, its sha256 changes.
    return wire_messages(
        call.messages,
        lambda part: (
            "data:image/png;base64,"
            + base64.b64encode(store.get_blob(part.sha256) + b"\0").decode()
        ),
    )


@pytest.mark.filterwarnings("ignore:molmoweb. no clone")
def test_a_molmoweb_session_is_served_over_http_in_order_and_a_miss_names_its_step(
    molmoweb: tuple[Store, str],
) -> None:
    store, session_id = molmoweb
    calls = _calls(store, session_id)
    steps = sorted({call.step for call in calls})
    assert len(steps) >= 2 and all(
        not any(m.role == "assistant" for m in c.messages) for c in calls
    )
    for wire, how in ((_wire, "cassette:exact"), (_changed_screenshots, "cassette:step")):
        with make_cassette_server(store, session_id, "force") as url:
            client = openai.OpenAI(base_url=url, api_key="unused")
            answers = [
                client.chat.completions.create(model="m", messages=wire(store, call))
                for call in calls
            ]  # type: ignore[arg-type]
        assert [a.choices[0].message.content for a in answers] == [c.response for c in calls]
        assert [a.system_fingerprint for a in answers] == [how] * len(calls)
    # A miss at the last step (its start URL moved to another port) names that step, read from
    # the prompt's "## Step N" history.
    last = calls[-1]
    text = json.dumps(_wire(store, last))
    moved = json.loads(text.replace("http://127.0.0.1:", "http://127.0.0.2:"))
    assert moved != json.loads(text)
    with make_cassette_server(store, session_id) as url:
        client = openai.OpenAI(base_url=url, api_key="unused")
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="m", messages=moved)
    assert caught.value.status_code == 409
    assert f"cassette miss at step {last.step}:" in str(caught.value) and last.step == steps[-1]
