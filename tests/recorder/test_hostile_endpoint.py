"""A hostile endpoint (``serve-model --faults`` body modes) against the real model client.

Every shape the server sends is recorded as a ModelCalled whose journal line decodes, whose
``response_blob`` holds the body exactly as sent, and the store verifies clean. Bodies that are
chat completions reach the agent (what fits of them); bodies that are not are retried like a
transport failure. Credentials never reach the journal or the blobs.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ownloop.modelserver import FaultyResponder, ModelServer, RawBody, Reply, Responder
from ownloop.recorder.call import CallContext, CallOutcome, CallRequest
from ownloop.recorder.model import MAX_RESPONSE_CHARS, ModelClient
from ownloop.store import Store, open_store
from ownloop.store.events import (
    Event,
    Message,
    ModelCalled,
    RunStarted,
    Sampling,
    SessionStarted,
    Task,
    TextPart,
    now,
)

GOOD = "Thought: ok\nAction: finished(content='good')"
MESSAGES = (Message(role="user", parts=(TextPart(text="hi"),)),)
KEY = "sk-hostile-test-KEY-0815"
PASSWORD = "s3cret-pw-4711"


class _Line(msgspec.Struct):
    seq: int
    prev: str
    sum: str
    event: Event


class Capture:
    """A responder that remembers the exact bytes of every hostile body it lets through."""

    def __init__(self, inner: Responder) -> None:
        self.inner = inner
        self.bodies: list[bytes] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        try:
            return self.inner(request)
        except RawBody as fault:
            self.bodies.append(fault.body)
            raise


def good(request: dict[str, Any]) -> Reply:
    return Reply(GOOD)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(tmp_path)


def _call(client: ModelClient) -> CallOutcome:
    return client.call(
        CallRequest(
            MESSAGES,
            Sampling(temperature=0.0),
            CallContext("r", "s", 1),
        )
    )


def _record(store: Store, events: list[ModelCalled]) -> None:
    """Write the calls as a recorder would: after the run's and the session's start."""
    task = Task(task_id="t", prompt="p", start_url="http://127.0.0.1/")
    with store.stream("r") as run:
        run.append([RunStarted(at=now(), run_id="r")])
    with store.stream("s") as session:
        session.append([SessionStarted(at=now(), run_id="r", session_id="s", task=task)])
        session.append(events)


def _decoded_lines(store: Store) -> list[Event]:
    """Every event of every stream as readers get it (requests in full), after checking that
    every line decodes by msgspec alone: a written line always decodes."""
    decoder = msgspec.json.Decoder(_Line)
    events = []
    for path in store.stream_paths():
        for raw in path.read_bytes().splitlines():
            decoder.decode(raw)
        events += store.read_stream(path.stem)
    return events


# mode -> (the text the agent gets, None for none; a phrase of the error)
SHAPES = {
    "intcontent": ("", "bad response: content is int 7"),
    "listcontent": (GOOD, "bad response: content[1] is int 7, not a text part"),
    "intfinish": (GOOD, "bad response: finish_reason is int 7"),
    "strtokens": (GOOD, "bad response: usage.prompt_tokens is str '"),
    "nonjson": (None, "bad response: body is not JSON (text/plain, 34 bytes): 'upstream says"),
    "html": (None, "bad response: body is not JSON (text/html, 159 bytes): '<!DOCTYPE html>"),
    "badutf8": ("\ufffd\ufffd" + GOOD, "bad response: body is not valid UTF-8 (byte 0xff"),
    "surrogate": ("\ufffd" + GOOD, "bad response: 1 lone surrogate(s) in content replaced"),
    "bigbody": (
        "Thought: " + "x" * (MAX_RESPONSE_CHARS - 9),
        f"the first {MAX_RESPONSE_CHARS} kept (the blob has the whole body)",
    ),
}


@pytest.mark.parametrize("mode", sorted(SHAPES))
def test_each_hostile_shape_is_one_recorded_call_that_decodes(store: Store, mode: str) -> None:
    capture = Capture(FaultyResponder(good, mode))
    with ModelServer(capture) as url:
        client = ModelClient(url, "m", load_blob=store.get_blob, put_blob=store.put_blob, retries=0)
        outcome = _call(client)
    text, error = SHAPES[mode]
    [event] = outcome.events
    assert event.http_status == 200
    assert event.response_blob is not None
    assert store.get_blob(event.response_blob) == capture.bodies[0]  # byte for byte
    assert event.error is not None and error in event.error, event.error
    assert event.response == outcome.text == text
    if mode == "bigbody":
        assert len(capture.bodies[0]) > 5_000_000 and event.finish_reason == "length"
    if text is None:  # not a completion: nothing for the agent, the call failed
        assert outcome.error == event.error
    if mode == "intfinish":
        assert event.finish_reason is None and event.prompt_tokens is not None
    if mode == "strtokens":
        assert event.prompt_tokens is None and event.completion_tokens is not None
    _record(store, outcome.events)
    decoded = [e for e in _decoded_lines(store) if isinstance(e, ModelCalled)]
    assert decoded == outcome.events
    report = store.verify()
    assert report.problems == [], report.problems
    store.sync()
    assert store.sql("select count(*) from model_called").rows == [(1,)]


def test_every_shape_in_one_stream_decodes_and_reaches_the_index(store: Store) -> None:
    modes = sorted(SHAPES)
    capture = Capture(FaultyResponder(good, ",".join(f"{m}:1" for m in modes)))
    events: list[ModelCalled] = []
    with ModelServer(capture) as url:
        client = ModelClient(url, "m", load_blob=store.get_blob, put_blob=store.put_blob, retries=0)
        for _ in modes:
            events += _call(client).events
    _record(store, events)
    assert [e for e in _decoded_lines(store) if isinstance(e, ModelCalled)] == events
    assert [store.get_blob(e.response_blob or "") for e in events] == capture.bodies
    assert store.verify().problems == []
    store.sync()
    assert store.sql(
        "select count(*) from model_called where error like 'bad response: %'"
    ).rows == [(len(modes),)]


def test_a_body_that_is_no_completion_is_retried_then_fails_the_call(store: Store) -> None:
    with ModelServer(FaultyResponder(good, "html:1,nonjson:1")) as url:
        client = ModelClient(
            url, "m", load_blob=store.get_blob, put_blob=store.put_blob, retries=2, retry_wait_s=0
        )
        recovered = _call(client)
    assert [e.purpose for e in recovered.events] == ["step", "retry", "retry"]
    assert [e.response for e in recovered.events] == [None, None, GOOD]
    assert recovered.text == GOOD
    with ModelServer(FaultyResponder(good, "html")) as url:
        client = ModelClient(url, "m", load_blob=store.get_blob, retries=1, retry_wait_s=0)
        failed = _call(client)
    assert failed.text is None and len(failed.events) == 2
    assert failed.error is not None and "body is not JSON (text/html" in failed.error


def test_retry_after_on_a_429_is_honoured_and_recorded(store: Store) -> None:
    with ModelServer(FaultyResponder(good, "429=1.5:1")) as url:
        client = ModelClient(
            url, "m", load_blob=store.get_blob, put_blob=store.put_blob, retries=1, retry_wait_s=0
        )
        began = time.monotonic()
        outcome = _call(client)
        took = time.monotonic() - began
    limited, retry = outcome.events
    assert took >= 1.5  # retry_wait_s is 0: only Retry-After made it wait
    assert limited.http_status == 429 and retry.purpose == "retry" and retry.response == GOOD
    assert limited.error is not None and limited.error.startswith("RateLimitError: ")
    assert limited.error.endswith("; Retry-After 1.5 s: retrying in 1.5 s")
    body = json.loads(store.get_blob(limited.response_blob or ""))
    assert body["error"]["type"] == "rate_limit_error"


def test_retry_after_is_bounded_by_the_call_timeout(store: Store) -> None:
    with ModelServer(FaultyResponder(good, "429=3600:1")) as url:
        client = ModelClient(
            url, "m", load_blob=store.get_blob, retries=1, retry_wait_s=0, timeout_s=1.0
        )
        began = time.monotonic()
        outcome = _call(client)
        took = time.monotonic() - began
    assert 1.0 <= took < 10
    assert (outcome.events[0].error or "").endswith("; Retry-After 3600 s: retrying in 1 s")
    assert outcome.text == GOOD


# ------------------------------------------------------------------ credentials


class _EchoHandler(BaseHTTPRequestHandler):
    """Answers every POST with what it was sent: 401 with the headers echoed, or (path
    .../ok/...) a completion whose text carries the Authorization header."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    seen: list[str] = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        auth = self.headers.get("Authorization", "")
        self.seen.append(auth)
        if "/ok/" in self.path:
            payload: dict[str, Any] = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": f"{GOOD}\nI was sent Authorization: {auth}",
                        },
                    }
                ],
            }
            status = 200
        else:
            payload = {
                "error": {
                    "message": f"bad credentials in Authorization: {auth} "
                    f"(sent to {self.path}, headers {dict(self.headers)})",
                    "type": "auth_error",
                    "echo": auth,
                }
            }
            status = 401
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo() -> Iterator[tuple[int, list[str]]]:
    seen: list[str] = []
    handler = type("Echo", (_EchoHandler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def _secret_free(store: Store, *secrets: str) -> None:
    for path in store.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, (secret, path)


@pytest.mark.parametrize("route", ["v1", "ok/v1"])
def test_userinfo_is_sent_as_basic_auth_and_never_recorded(
    store: Store, echo: tuple[int, list[str]], route: str
) -> None:
    port, seen = echo
    basic = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
    client = ModelClient(
        f"http://user:{PASSWORD}@127.0.0.1:{port}/{route}",
        "m",
        load_blob=store.get_blob,
        put_blob=store.put_blob,
        api_key=KEY,
        retries=0,
    )
    assert client.endpoint == f"http://127.0.0.1:{port}/{route}"
    outcome = _call(client)
    assert seen == [f"Basic {basic}"]
    [event] = outcome.events
    assert event.response_blob is not None
    if route == "ok/v1":
        # The model's text is masked only where it holds our secrets (the Basic token here).
        assert outcome.text == f"{GOOD}\nI was sent Authorization: Basic ***"
    else:
        assert event.http_status == 401 and outcome.text is None
        assert "Authorization: ***" in (event.error or "")
    _record(store, outcome.events)
    _secret_free(store, PASSWORD, basic, KEY)
    assert store.verify().problems == []


def test_the_api_key_is_sent_as_bearer_and_never_recorded(
    store: Store, echo: tuple[int, list[str]]
) -> None:
    port, seen = echo
    client = ModelClient(
        f"http://127.0.0.1:{port}/v1",
        "m",
        load_blob=store.get_blob,
        put_blob=store.put_blob,
        api_key=KEY,
        retries=0,
    )
    outcome = _call(client)
    assert seen == [f"Bearer {KEY}"]
    blob = store.get_blob(outcome.events[0].response_blob or "")
    assert b"Authorization: ***" in blob and json.loads(blob)["error"]["echo"] == "Bearer ***"
    _record(store, outcome.events)
    _secret_free(store, KEY)


def test_redact_argv_scrubs_userinfo_and_tokens() -> None:
    from ownloop.recorder.runner import redact_argv

    assert redact_argv(
        [
            "ownloop",
            "record",
            "--endpoint",
            f"http://user:{PASSWORD}@h:8000/v1",
            "--api-key",
            KEY,
            "--tasks",
            "t.json",
            "--base",
            "http://h/?token=abc",
        ]
    ) == (
        "ownloop",
        "record",
        "--endpoint",
        "http://***@h:8000/v1",
        "--api-key",
        "***",
        "--tasks",
        "t.json",
        "--base",
        "http://h/?token=***",
    )


# ------------------------------------------------------------------ end to end

HOSTILE_RUN = (
    "intcontent:1,nonjson:1,listcontent:1,html:1,intfinish:1,badutf8:1,strtokens:1,"
    "surrogate:1,bigbody:1"
)


@pytest.mark.browser
@pytest.mark.slow
def test_record_against_a_hostile_endpoint_records_every_call(tmp_path: Path) -> None:
    from ownloop.modelserver.endpoint import make_server

    served: list[str] = []
    with make_server("miniwob", "uitars", HOSTILE_RUN, log=served.append) as url:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ownloop",
                "--store",
                str(tmp_path),
                "record",
                "uitars",
                "--suite",
                "miniwob:login-user",
                "--endpoint",
                url.replace("http://", f"http://user:{PASSWORD}@"),
                "--model",
                "m",
                "--run",
                "h",
                "--settle",
                "0",
                "--retry-wait",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output, output
    store = open_store(tmp_path)
    assert store.verify().problems == []
    calls = [e for e in _decoded_lines(store) if isinstance(e, ModelCalled)]
    assert len(calls) == len(served) and all(c.http_status == 200 for c in calls)
    assert all(c.response_blob for c in calls)
    # Every shape was met: each faulty call is one recorded call with its error.
    bad = [c.error for c in calls if c.error]
    assert len(bad) == len(HOSTILE_RUN.split(",")), bad
    [(status, passed)] = store.sql("select status, passed from sessions").rows
    assert (status, passed) == ("finished", True), output
    _secret_free(store, PASSWORD)
    [(argv,)] = store.sql("select argv from runs").rows
    assert "http://***@127.0.0.1:" in str(argv)
