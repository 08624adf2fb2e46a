"""``ownloop serve-desktop``: OSWorld's in-VM server protocol over HTTP, on a real X desktop.

``DesktopServer(desktop)`` serves the endpoints of ``handlers.py`` on 127.0.0.1 from a background
thread (``start()`` returns the URL), plus two of its own: ``POST /reset`` restores a clean
desktop (``Desktop.reset``) and answers ``{"status": "success", "seconds": s}``; ``GET /health``
answers ``ok``. Requests are served one at a time per desktop (a lock): input events and
screenshots of one display must not interleave.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs

from ownloop.desktopserver import handlers
from ownloop.desktopserver.display import Desktop, DesktopError
from ownloop.desktopserver.handlers import Answer, json_answer, text_answer
from ownloop.httpserver import QuietHTTPServer, wait_until_stopped

__all__ = ["DesktopServer", "reset_remote"]

_MAX_BODY = 256 * 1024 * 1024  # an upload larger than this is refused


def _no_body(fn: Callable[[Desktop], Answer]) -> Callable[[Desktop, bytes, str], Answer]:
    return lambda desktop, raw, content_type: fn(desktop)


def _json_body(
    fn: Callable[[Desktop, dict[str, Any]], Answer],
) -> Callable[[Desktop, bytes, str], Answer]:
    def call(desktop: Desktop, raw: bytes, content_type: str) -> Answer:
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError):
            return json_answer({"status": "error", "message": "the body is not JSON"}, 400)
        if not isinstance(body, dict):
            return json_answer({"status": "error", "message": "the body must be an object"}, 400)
        return fn(desktop, body)

    return call


def _form_body(
    fn: Callable[[Desktop, dict[str, str]], Answer],
) -> Callable[[Desktop, bytes, str], Answer]:
    def call(desktop: Desktop, raw: bytes, content_type: str) -> Answer:
        if content_type.startswith("multipart/"):
            fields = {
                k: v.decode(errors="replace") for k, v in _multipart(raw, content_type).items()
            }
        elif content_type.startswith("application/json"):
            try:
                loaded = json.loads(raw or b"{}")
            except ValueError:
                loaded = {}
            fields = {k: str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
        else:
            query = parse_qs(raw.decode(errors="replace"))
            fields = {key: values[0] for key, values in query.items()}
        return fn(desktop, fields)

    return call


def _multipart(raw: bytes, content_type: str) -> dict[str, bytes]:
    """The named parts of a multipart/form-data body."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    fields: dict[str, bytes] = {}
    if not message.is_multipart():
        return fields
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = payload
    return fields


def _upload(desktop: Desktop, raw: bytes, content_type: str) -> Answer:
    if not content_type.startswith("multipart/"):
        return text_answer("/setup/upload takes multipart/form-data", 400)
    return handlers.upload(desktop, _multipart(raw, content_type))


def _reset(desktop: Desktop, raw: bytes, content_type: str) -> Answer:
    started = time.monotonic()
    desktop.reset()
    return json_answer({"status": "success", "seconds": round(time.monotonic() - started, 3)})


_GET: dict[str, Callable[[Desktop], Answer]] = {
    "/screenshot": handlers.screenshot,
    "/accessibility": handlers.accessibility,
    "/platform": lambda desktop: text_answer("Linux"),
    "/cursor_position": lambda desktop: json_answer(list(_pointer(desktop))),
    "/health": lambda desktop: text_answer("ok"),
}
_POST: dict[str, Callable[[Desktop, bytes, str], Answer]] = {
    "/execute": _json_body(handlers.execute),
    "/setup/execute": _json_body(handlers.execute),
    "/setup/launch": _json_body(handlers.launch),
    "/setup/open_file": _json_body(handlers.open_file),
    "/setup/activate_window": _json_body(handlers.activate_window),
    "/setup/close_window": _json_body(handlers.close_window),
    "/setup/download_file": _json_body(handlers.download_file),
    "/setup/upload": _upload,
    "/list_directory": _json_body(handlers.list_directory),
    "/file": _form_body(handlers.get_file),
    "/window_size": _form_body(handlers.window_size),
    "/screen_size": _no_body(handlers.screen_size),
    "/desktop_path": _no_body(lambda desktop: text_answer(str(desktop.home / "Desktop"))),
    "/reset": _reset,
}


def _pointer(desktop: Desktop) -> tuple[int, int]:
    from ownloop.desktopserver.capture import pointer

    return pointer(desktop.env)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else every small answer waits ~40 ms for a delayed ACK
    timeout = 300
    server: QuietHTTPServer[DesktopServer]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        route = _GET.get(path)
        if route is None:
            self._send(json_answer({"error": f"no route GET {path}"}, 404))
            return
        self._send(self.server.owner.serve(path, lambda desktop: route(desktop)))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length = self.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > _MAX_BODY:
            self._send(json_answer({"error": "a Content-Length up to 256 MiB is required"}, 411))
            self.close_connection = True
            return
        raw = self.rfile.read(int(length))
        route = _POST.get(path)
        if route is None:
            self._send(json_answer({"error": f"no route POST {path}"}, 404))
            return
        content_type = self.headers.get("Content-Type", "")
        self._send(self.server.owner.serve(path, lambda desktop: route(desktop, raw, content_type)))

    def _send(self, answer: Answer) -> None:
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
        except OSError:
            self.close_connection = True


class DesktopServer:
    """The protocol on a background thread, over one ``Desktop`` (started by ``start``).

    Example:
        with DesktopServer(Desktop(size=(1024, 768))) as url:
            requests.get(url + "/screenshot")

    Args:
        desktop: the desktop to serve (not yet started: ``start`` starts it, ``close`` stops it).
        host: the address to bind (127.0.0.1 keeps it off the network).
        port: the port; 0 picks a free one.
        log: called with one line per request, if given.
    """

    def __init__(
        self,
        desktop: Desktop,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.desktop = desktop
        self.host, self.port = host, port
        self._log = log
        self._lock = threading.Lock()
        self._httpd: QuietHTTPServer[DesktopServer] | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> str:
        """Start the desktop and the server; returns the URL (``http://127.0.0.1:PORT``)."""
        self.desktop.start()
        try:
            self._httpd = QuietHTTPServer((self.host, self.port), _Handler, self)
        except OSError:
            self.desktop.stop()
            raise
        self.url = f"http://{self.host}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="ownloop-desktop-server", daemon=True
        )
        self._thread.start()
        return self.url

    def serve_forever(self) -> None:
        """Block until Ctrl-C or SIGTERM, then close."""
        try:
            wait_until_stopped(threading.Event())
        finally:
            self.close()

    def close(self) -> None:
        """Stop serving, then stop the desktop (every process it started); safe twice."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            self.desktop.stop()

    def serve(self, path: str, handle: Callable[[Desktop], Answer]) -> Answer:
        """Run one request's handler with the desktop to itself; a failure becomes a 500."""
        started = time.monotonic()
        with self._lock:
            try:
                answer = handle(self.desktop)
            except Exception as error:  # noqa: BLE001 - a handler bug must answer, not hang
                answer = json_answer(
                    {"status": "error", "message": f"{type(error).__name__}: {error}"}, 500
                )
        if self._log is not None:
            self._log(f"{path} -> {answer.status} ({(time.monotonic() - started) * 1000:.0f} ms)")
        return answer

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def reset_remote(url: str, timeout_s: float = 120.0) -> float:
    """``POST URL/reset`` to a running test desktop; the seconds the reset took.

    Raises:
        DesktopError: no test desktop answered at ``url``, or its reset failed.
    """
    import urllib.error
    import urllib.request

    if not url.startswith(("http://127.0.0.1", "http://localhost")):
        raise DesktopError(
            f"--reset takes the test desktop's http://127.0.0.1:PORT URL, not {url[:60]}"
        )
    request = urllib.request.Request(url.rstrip("/") + "/reset", data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            answer = json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise DesktopError(f"the desktop at {url} could not reset (HTTP {error.code})") from None
    except (OSError, ValueError) as error:
        raise DesktopError(
            f"no test desktop answered at {url} ({error}); start one with: ownloop serve-desktop"
        ) from None
    seconds = answer.get("seconds") if isinstance(answer, dict) else None
    if not isinstance(seconds, int | float):
        raise DesktopError(f"{url} answered /reset, but not as ownloop serve-desktop does")
    return float(seconds)
