"""An OpenAI-compatible chat-completions server on the standard library, for tests and demos.

``ModelServer(responder)`` serves ``GET /v1/models`` and ``POST /v1/chat/completions`` (plain
or ``stream=true`` server-sent events) on a background thread; the responder decides every
answer, or raises a ``Fault`` to misbehave on purpose (see ``chat.py``).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from ownloop.errors import OwnloopError
from ownloop.httpserver import QuietHTTPServer, wait_until_stopped
from ownloop.modelserver.chat import (
    DropConnection,
    Hang,
    HttpFault,
    RawBody,
    Responder,
    StopListening,
    template_switches,
)
from ownloop.modelserver.wire import completion_body, error_body, stream_body, validate_request

__all__ = ["ModelServer", "ServerNotStarted"]


class ServerNotStarted(OwnloopError):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the openai client reuses its connections
    disable_nagle_algorithm = True  # else every small response waits ~40 ms for a delayed ACK
    timeout = 120  # an idle keep-alive connection is closed after this many seconds
    server: QuietHTTPServer[ModelServer]

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the owner logs one line per call instead

    # ------------------------------------------------------------------ routes

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        owner = self.server.owner
        if not self._authorized():
            return
        if path == "/v1/models":
            data = [owner.model_card(name) for name in owner.models]
            self._send_json(200, {"object": "list", "data": data})
        elif path.startswith("/v1/models/"):
            name = unquote(path.removeprefix("/v1/models/"))
            if owner.serves(name):
                self._send_json(200, owner.model_card(name))
            else:
                self._send_json(404, _no_model(name))
        else:
            self._send_json(404, error_body(f"no route GET {path}", "invalid_request_error"))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._send_json(411, error_body("Content-Length required", "invalid_request_error"))
            return
        raw = self.rfile.read(int(length))
        if not self._authorized():
            return
        if path != "/v1/chat/completions":
            self._send_json(404, error_body(f"no route POST {path}", "invalid_request_error"))
            return
        try:
            request = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            self._send_json(400, error_body("the body is not JSON", "invalid_request_error"))
            return
        problem = validate_request(request)
        if problem:
            self._send_json(400, error_body(problem, "invalid_request_error", param="messages"))
            return
        if not self.server.owner.serves(str(request.get("model"))):
            self._send_json(404, _no_model(str(request.get("model"))))
            return
        self._answer(request)

    def _authorized(self) -> bool:
        """Whether the request carries the server's key (any request does when it has none);
        else a 401 in OpenAI's shape is sent."""
        key = self.server.owner.api_key
        if key is None or self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        body = error_body(
            "Incorrect API key provided (ownloop serve-model --api-key)", "invalid_request_error"
        )
        body["error"]["code"] = "invalid_api_key"
        self._send_json(401, body)
        return False

    def _answer(self, request: dict[str, Any]) -> None:
        owner = self.server.owner
        started = time.monotonic()
        try:
            reply = owner.responder(request)
        except HttpFault as fault:
            headers = {}
            if fault.retry_after is not None:
                headers["Retry-After"] = f"{fault.retry_after:g}"
            owner._log(f"-> HTTP {fault.status}: {fault.message}")
            self._send_json(fault.status, error_body(fault.message, fault.error_type), headers)
            return
        except RawBody as fault:
            owner._log(f"-> HTTP {fault.status} {fault.what} ({len(fault.body)} bytes)")
            self._send(fault.status, fault.body, fault.content_type)
            return
        except Hang as fault:
            owner._log(f"-> hang {fault.seconds:g} s")
            if owner._stopping.wait(fault.seconds) or fault.then is None:
                self.close_connection = True
                return
            reply = fault.then
        except DropConnection:
            owner._log("-> connection dropped")
            self._drop()
            return
        except StopListening as fault:
            owner._log("-> stopped listening")
            self._drop()
            owner._stop_listening(fault.seconds)
            return
        except Exception as exc:  # noqa: BLE001 - a responder bug must become a 500, not a hang
            owner._log(f"-> responder failed: {exc!r}")
            self._send_json(500, error_body(f"responder failed: {exc}", "server_error"))
            return
        matched = f" [{reply.match}]" if reply.match else ""
        switches = template_switches(request)
        sent = f" chat_template_kwargs={json.dumps(switches)}" if switches else ""
        owner._log(
            f"-> {reply.text[:80]!r}{matched}{sent} ({(time.monotonic() - started) * 1000:.0f} ms)"
        )
        headers = {"x-ownloop-match": reply.match} if reply.match else {}
        if request.get("stream"):
            body = stream_body(request, reply)
            self._send(
                200,
                body,
                "text/event-stream; charset=utf-8",
                {"Cache-Control": "no-cache", **headers},
            )
        else:
            self._send_json(200, completion_body(request, reply), headers)

    # ------------------------------------------------------------------ wire

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode()
        self._send(status, body, "application/json", headers)

    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            self.close_connection = True  # the client went away (e.g. it timed out first)

    def _drop(self) -> None:
        """Close the socket with a reset, so the client sees no response at all."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ModelServer:
    """An OpenAI-compatible endpoint on a background thread.

    Example:
        with ModelServer(lambda request: Reply("Action: finished(content='hi')")) as url:
            OpenAI(base_url=url, api_key="x").chat.completions.create(...)

    Args:
        responder: answers each chat-completions request (see ``chat.Responder``).
        host: the address to bind; 127.0.0.1 keeps it off the network.
        port: the port; 0 picks a free one (``start`` returns the real URL).
        models: the model names ``GET /v1/models`` lists.
        any_model: accept any model name in requests (and ``GET /v1/models/NAME``), not only the
            listed ones; False answers another name with 404, as vLLM does.
        api_key: the key every request must send as ``Authorization: Bearer KEY`` (else 401);
            None: no key needed.
        log: called with one line per request, if given.
    """

    def __init__(
        self,
        responder: Responder,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        models: tuple[str, ...] = ("ownloop-expert",),
        any_model: bool = True,
        api_key: str | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.responder = responder
        self.host = host
        self.port = port
        self.models = models
        self.any_model = any_model
        self.api_key = api_key
        self.created = int(time.time())
        self._logger = log
        self._lock = threading.Lock()
        self._httpd: QuietHTTPServer[ModelServer] | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._calls = itertools.count(1)  # next() on a count is atomic under the GIL

    def serves(self, name: str) -> bool:
        """Whether requests may name the model ``name``."""
        return self.any_model or name in self.models

    def model_card(self, name: str) -> dict[str, Any]:
        """The model object ``GET /v1/models`` lists for ``name``."""
        return {"id": name, "object": "model", "created": self.created, "owned_by": "ownloop"}

    @property
    def url(self) -> str:
        """The base URL clients use, ending with /v1."""
        if self.port == 0:
            raise ServerNotStarted("the model server is not started. Call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> str:
        """Bind and serve on a background thread; returns the base URL (…/v1)."""
        self._stopping.clear()
        self._listen()
        return self.url

    def stop(self) -> None:
        """Stop listening, close every open connection and end hangs; safe to call twice.

        A responder with a ``close()`` method (the expert's browser) is closed too.
        """
        self._stopping.set()
        self._close_listener()
        with self._lock:
            open_connections = list(self._connections)
        for connection in open_connections:
            _shut(connection)
        close = getattr(self.responder, "close", None)
        if callable(close):
            close()

    def serve_forever(self) -> None:
        """Block until Ctrl-C, SIGTERM (on the main thread) or ``stop`` from another thread."""
        try:
            wait_until_stopped(self._stopping)
        finally:
            self.stop()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ internals

    def _listen(self) -> None:
        try:
            httpd = QuietHTTPServer((self.host, self.port), _Handler, self)
        except OSError as exc:
            raise OwnloopError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror}. "
                "Pick another --port (0 picks a free one)"
            ) from None
        self.port = httpd.server_address[1]
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"ownloop-modelserver-{self.port}",
            daemon=True,
        )
        with self._lock:
            self._httpd, self._thread = httpd, thread
        thread.start()

    def _close_listener(self) -> None:
        with self._lock:
            httpd, thread = self._httpd, self._thread
            self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _stop_listening(self, seconds: float | None) -> None:
        """Refuse connections (close the listener and all connections); listen again later."""

        def outage() -> None:
            self._close_listener()
            with self._lock:
                open_connections = list(self._connections)
            for connection in open_connections:
                _shut(connection)
            if seconds is not None and not self._stopping.wait(seconds):
                self._listen()

        threading.Thread(target=outage, name="ownloop-modelserver-outage", daemon=True).start()

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(connection)

    def _log(self, line: str) -> None:
        if self._logger is not None:
            self._logger(f"call {next(self._calls)} {line}")


def _no_model(name: str) -> dict[str, Any]:
    """The 404 body for a model the server does not serve (vLLM's wording)."""
    body = error_body(f"The model `{name}` does not exist.", "NotFoundError", param="model")
    body["error"]["code"] = 404
    return body


def _shut(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
