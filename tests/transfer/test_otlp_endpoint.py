"""Issue 25: the OTLP ``--endpoint`` parsed once (scrubbed in every message, the path before the
query, control characters refused, ``HTTP://`` taken) and a redirect never followed: posts to a
real HTTP server on 127.0.0.1 that answers as each test asks."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ownloop.errors import OwnloopError
from ownloop.transfer.collector import parse_endpoint, post


class _Server(ThreadingHTTPServer):
    status: int
    location: str
    seen: list[tuple[str, str, str | None, bytes]]  # method, path, Authorization, body


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.server.seen.append((self.command, self.path, self.headers["Authorization"], body))
        self.send_response(self.server.status)
        if self.server.location:
            self.send_header("Location", self.server.location)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_POST = do_GET = _answer  # noqa: N815 - http.server's names

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.status, httpd.location, httpd.seen = 200, "", []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _base(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("status", [300, 301, 302, 303, 304, 305, 307, 308])
def test_any_redirect_is_an_error_naming_its_location(server: _Server, status: int) -> None:
    server.status = status
    server.location = "ftp://elsewhere.example/drop?token=s3cr3t-value"
    with pytest.raises(OwnloopError) as caught:
        post(parse_endpoint(_base(server)), b"{}", "application/json", lambda code: "fix")
    message = str(caught.value)
    assert message.startswith(f"the collector at {_base(server)}/v1/traces answered {status} ")
    assert message.endswith(
        "a redirect to ftp://elsewhere.example/drop?token=***: nothing was delivered (redirects "
        "are not followed). Pass the URL that takes the traces as --endpoint"
    )
    assert [(m, p) for m, p, _, _ in server.seen] == [("POST", "/v1/traces")]  # not followed


def test_a_password_is_sent_as_basic_auth_and_never_shown(server: _Server) -> None:
    server.status = 401
    url = f"http://otel:hunter2-pass@127.0.0.1:{server.server_address[1]}/otel?token=tok-12345"
    endpoint = parse_endpoint(url)
    with pytest.raises(OwnloopError) as caught:
        post(endpoint, b"{}", "application/json", lambda code: f"Check --endpoint ({code})")
    message = str(caught.value)
    assert message == (
        f"the collector at {_base(server)}/otel/v1/traces?token=*** answered 401 Unauthorized "
        "to application/json. Check --endpoint (401)"
    )
    [(_, path, authorization, _)] = server.seen
    assert path == "/otel/v1/traces?token=tok-12345"  # the path before the query
    assert authorization == "Basic b3RlbDpodW50ZXIyLXBhc3M="  # otel:hunter2-pass


def test_a_collector_not_there_is_named_scrubbed() -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = closed.server_address[1]
    closed.server_close()
    with pytest.raises(OwnloopError) as caught:
        post(parse_endpoint(f"http://u:pw-secret@127.0.0.1:{port}"), b"{}", "x", lambda c: "")
    assert str(caught.value).startswith(f"cannot reach the collector at http://127.0.0.1:{port}/")
    assert "pw-secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("HTTP://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("HTTPS://Collector:4318/", "https://Collector:4318/v1/traces"),
        ("http://h:4318/v1/traces", "http://h:4318/v1/traces"),
        ("http://h/base/?a=1&token=x#frag", "http://h/base/v1/traces?a=1&token=x"),
        ("http://user:pw@h:1/p", "http://h:1/p/v1/traces"),
    ],
)
def test_the_url_is_parsed_once(given: str, url: str) -> None:
    assert parse_endpoint(given).url == url


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            "http://127.0.0.1:4318\r\nX-Injected: 1",
            "--endpoint holds \\x0d at character 22 (a pasted line break?): pass the "
            "collector's OTLP/HTTP base URL on one line, e.g. http://127.0.0.1:4318",
        ),
        (
            "http://h:99999",
            "--endpoint 'http://h:99999' is not a URL (Port out of range 0-65535). Pass the "
            "collector's OTLP/HTTP base URL, e.g. http://127.0.0.1:4318",
        ),
        (
            "ftp://user:pw-secret@h/?api_key=k-123456",
            "--endpoint 'ftp://h/?api_key=***' is not an http(s) URL. Pass the collector's "
            "OTLP/HTTP base URL, e.g. http://127.0.0.1:4318",
        ),
    ],
)
def test_a_bad_endpoint_is_one_line_without_its_secrets(given: str, message: str) -> None:
    with pytest.raises(OwnloopError) as caught:
        parse_endpoint(given)
    assert str(caught.value) == message
