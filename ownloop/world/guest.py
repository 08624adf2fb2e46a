"""An HTTP client of the OSWorld in-VM server protocol (reference/osworld.md §1).

Stdlib only (``urllib``): each call has a timeout, and a server that does not answer, or answers
with something that is not the protocol's, raises :class:`ownloop.world.WorldLost` in one line
that names the URL. An answer with an HTTP error status is returned as it came (``status``), so
the caller records it.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from typing import NamedTuple

from ownloop.world import WorldLost

__all__ = ["Answer", "Guest", "Reply"]

_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"


class Reply(NamedTuple):
    """One HTTP answer: status and body bytes."""

    status: int
    body: bytes


class Answer(NamedTuple):
    """What ``POST /execute`` said: the HTTP status, then the guest process's result."""

    http_status: int
    status: str
    returncode: int | None
    output: str
    error: str
    ms: float


class Guest:
    """The desktop server at ``url`` (e.g. ``http://127.0.0.1:5000``)."""

    def __init__(self, url: str, *, timeout_s: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        # Told every exchange (method, path, request body, answer), for the session's cassette.
        self.on_exchange: Callable[[str, str, bytes | None, Reply], None] | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str = "application/json",
        timeout_s: float | None = None,
    ) -> Reply:
        """One exchange; an HTTP error status is a Reply, a dead server a WorldLost."""
        url = self.url + path
        headers = {"Content-Type": content_type} if body is not None else {}
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s or self.timeout_s) as response:
                reply = Reply(response.status, response.read())
        except urllib.error.HTTPError as error:
            reply = Reply(error.code, error.read())
        except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise WorldLost(f"desktop {url} did not answer: {reason}") from None
        if self.on_exchange is not None:
            self.on_exchange(method, path, body, reply)
        return reply

    def post_json(self, path: str, payload: object, *, timeout_s: float | None = None) -> Reply:
        return self.request("POST", path, body=json.dumps(payload).encode(), timeout_s=timeout_s)

    def screenshot(self) -> bytes:
        """The screen as PNG (or JPEG) bytes; tried three times, as OSWorld's client does."""
        last = ""
        for attempt in range(3):
            reply = self.request("GET", "/screenshot")
            if reply.status == 200 and (reply.body[:8] == _PNG or reply.body[:3] == _JPEG):
                return reply.body
            last = f"HTTP {reply.status}, {len(reply.body)} bytes that are not an image"
            if attempt < 2:
                time.sleep(0.5)
        raise WorldLost(f"desktop {self.url}/screenshot gave no screenshot: {last}")

    def screen_size(self) -> tuple[int, int]:
        """The screen's width and height in pixels."""
        reply = self.request("POST", "/screen_size")
        try:
            data = json.loads(reply.body)
            return int(data["width"]), int(data["height"])
        except (ValueError, KeyError, TypeError):
            raise WorldLost(
                f"desktop {self.url}/screen_size answered HTTP {reply.status} without a size"
            ) from None

    def execute(
        self, command: list[str] | str, *, shell: bool = False, timeout_s: float = 60.0
    ) -> Answer:
        """Run a command in the guest (``POST /execute``) and say what it returned."""
        began = time.perf_counter()
        payload = {"command": command, "shell": shell, "timeout": timeout_s}
        reply = self.post_json("/execute", payload, timeout_s=timeout_s + 30)
        ms = round((time.perf_counter() - began) * 1000, 1)
        try:
            data = json.loads(reply.body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            text = reply.body[:300].decode("utf-8", "replace")
            return Answer(reply.status, "error", None, "", f"not JSON: {text}", ms)
        code = data.get("returncode")
        return Answer(
            reply.status,
            str(data.get("status", "")),
            code if isinstance(code, int) else None,
            str(data.get("output") or ""),
            str(data.get("error") or ""),
            ms,
        )

    def accessibility(self) -> str | None:
        """The accessibility tree's XML, or None when the server has none to give."""
        reply = self.request("GET", "/accessibility")
        try:
            tree = json.loads(reply.body).get("AT")
        except (ValueError, AttributeError):
            return None
        return tree if reply.status == 200 and isinstance(tree, str) else None

    def file(self, path: str) -> bytes | None:
        """A guest file's bytes (``POST /file``), None when the server says it has none."""
        body = urllib.parse.urlencode({"file_path": path}).encode()
        reply = self.request(
            "POST", "/file", body=body, content_type="application/x-www-form-urlencoded"
        )
        return reply.body if reply.status == 200 else None

    def upload(self, path: str, data: bytes) -> Reply:
        """Put ``data`` at ``path`` in the guest (``POST /setup/upload``, multipart)."""
        boundary = uuid.uuid4().hex
        parts = [
            f"--{boundary}\r\nContent-Disposition: form-data; "
            f'name="file_path"\r\n\r\n{path}\r\n'.encode(),
            f'--{boundary}\r\nContent-Disposition: form-data; name="file_data"; filename="f"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n".encode()
            + data
            + b"\r\n",
            f"--{boundary}--\r\n".encode(),
        ]
        return self.request(
            "POST",
            "/setup/upload",
            body=b"".join(parts),
            content_type=f"multipart/form-data; boundary={boundary}",
        )
