"""The server over real HTTP on 127.0.0.1, spoken to by the plain openai client."""

from __future__ import annotations

import base64
import http.client
import io
import json
import time
from typing import Any

import openai
import pytest
from PIL import Image

from ownloop.modelserver import (
    ModelServer,
    Reply,
    assistant_turns,
    find_task,
    last_image_size,
)

FINISHED = "Thought: Done.\nAction: finished(content='ok')"


def echo_responder(request: dict[str, Any]) -> Reply:
    return Reply(FINISHED)


def _png_data_url(width: int, height: int) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _request_with_image(width: int, height: int) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "You are interacting with a web application at "
                    "http://127.0.0.1:9/miniwob/click-button.html?seed=7. Your task: Click on "
                    "OK.\nMore.",
                },
            ],
        },
        {"role": "assistant", "content": "Thought: a\nAction: wait()"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": _png_data_url(64, 32)}},
            ],
        },
        {"role": "assistant", "content": "Thought: b\nAction: wait()"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": _png_data_url(width, height)}},
            ],
        },
    ]


def test_models_endpoint_lists_the_served_model(serve, client):
    url = serve(echo_responder)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    models = client(url).models.list()
    assert [m.id for m in models.data] == ["ownloop-expert"]


def test_chat_completion_round_trip_gives_the_responder_the_request(serve, client):
    seen: list[dict[str, Any]] = []

    def responder(request: dict[str, Any]) -> Reply:
        seen.append(request)
        return Reply(f"turns={assistant_turns(request)} size={last_image_size(request)}")

    url = serve(responder)
    reply = client(url).chat.completions.create(
        model="uitars15-7b",
        messages=_request_with_image(1280, 800),
        temperature=0,
        top_p=0.9,
        max_tokens=500,
    )
    assert reply.choices[0].message.content == "turns=2 size=(1280, 800)"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "uitars15-7b" and reply.object == "chat.completion"
    assert reply.id.startswith("chatcmpl-") and reply.created > 0
    assert reply.usage.prompt_tokens >= 2000 and reply.usage.completion_tokens > 0
    assert seen[0]["temperature"] == 0 and seen[0]["max_tokens"] == 500
    task = find_task(seen[0])
    assert task is not None
    assert task.start_url == "http://127.0.0.1:9/miniwob/click-button.html?seed=7"
    assert task.prompt == "Click on OK."


def test_streaming_sends_the_text_in_chunks_and_usage(serve, client):
    text = "Thought: a long enough thought to need several chunks.\nAction: wait()"
    url = serve(lambda request: Reply(text, finish_reason="length"))
    stream = client(url).chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(pieces) == text and len([p for p in pieces if p]) > 2
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_keep_alive_calls_are_fast(serve):
    """Nagle off and keep-alive on: a local call is far below the 40 ms delayed-ACK stall.

    A plain HTTP client on one kept-alive connection (the openai client's own CPU per call is
    larger than the margin on a busy machine), and the fastest of 20 calls: load delays some
    calls, a Nagle stall delays every one by 40 ms."""
    url = serve(echo_responder)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]})
    took = []
    try:
        for _ in range(21):
            started = time.perf_counter()
            connection.request(
                "POST", "/v1/chat/completions", body, {"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            assert response.status == 200 and json.loads(response.read())["choices"]
            took.append(time.perf_counter() - started)
    finally:
        connection.close()
    assert min(took[1:]) < 0.03, took


def test_raw_http_has_content_length_and_keeps_the_connection(serve):
    url = serve(echo_responder)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    for _ in range(2):
        connection.request(
            "POST", "/v1/chat/completions", body, {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        payload = response.read()
        assert response.status == 200
        assert int(response.getheader("Content-Length")) == len(payload)
        assert json.loads(payload)["choices"][0]["message"]["content"] == FINISHED
    connection.close()


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "needle"),
    [
        ("GET", "/v1/nothing", None, 404, "no route GET /v1/nothing"),
        ("POST", "/v1/chat/completions", b"{not json", 400, "not JSON"),
        ("POST", "/v1/chat/completions", b'{"messages": []}', 400, "non-empty list"),
        (
            "POST",
            "/v1/chat/completions",
            b'{"messages": [{"role": "user", "content": [{"type": "audio"}]}]}',
            400,
            "text or image_url part",
        ),
    ],
)
def test_bad_requests_get_openai_shaped_errors(serve, method, path, body, status, needle):
    url = serve(echo_responder)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request(method, path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        error = json.loads(response.read())["error"]
    finally:
        connection.close()  # else an unclosed-socket ResourceWarning
    assert response.status == status
    assert needle in error["message"] and error["type"] == "invalid_request_error"
    assert set(error) == {"message", "type", "param", "code"}


def test_a_responder_that_crashes_becomes_a_500(serve, client):
    def broken(request: dict[str, Any]) -> Reply:
        raise RuntimeError("boom")

    with pytest.raises(openai.InternalServerError, match="responder failed: boom"):
        client(serve(broken)).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )


def test_context_manager_stops_listening(client):
    with ModelServer(echo_responder) as url:
        assert client(url).models.list().data
    with pytest.raises(openai.APIConnectionError):
        client(url).models.list()


def test_last_image_size_ignores_what_is_not_a_png():
    assert last_image_size({"messages": [{"role": "user", "content": "no image"}]}) is None
    jpeg = {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQSkZJRg=="}}
    assert last_image_size({"messages": [{"role": "user", "content": [jpeg]}]}) is None
