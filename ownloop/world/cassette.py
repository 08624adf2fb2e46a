"""A recorded desktop served back: ``ownloop serve-desktop --cassette SESSION``.

A desktop session recorded with its exchanges (evidence ``desktop_cassette``: one JSON line per
request to the desktop server — method, path, the request body's blob, the answer's status and
body blob) is served over the same protocol with no VM: each request gets the recorded answer of
the first unused exchange with the same method, path and body; else (a multipart upload's
boundary differs every time) of the first unused one with the same method and path; else, when
every such exchange was used, the last one again (a poll repeated). A request with no recorded
answer gets 404 and is counted. ``POST /reset`` always answers 200 (a recording has one start).
``GET /_cassette`` says how requests were answered: ``exact``, ``loose``, ``again``, ``missed``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ownloop.errors import OwnloopError
from ownloop.store.events import Event, EvidenceCaptured

__all__ = ["CassetteDesktop", "cassette_blob", "serve_recorded"]


def cassette_blob(events: Sequence[Event], session_id: str) -> str:
    """The blob of the exchanges a desktop session recorded (its last ``desktop_cassette``).

    Raises:
        OwnloopError: the session kept no cassette.
    """
    pieces = [e for e in events if isinstance(e, EvidenceCaptured) and e.name == "desktop_cassette"]
    if not pieces or pieces[-1].sha256 is None:
        raise OwnloopError(
            f"session {session_id} kept no desktop cassette: record it on a desktop "
            "(ownloop record --desktop URL) with this ownloop version"
        )
    return pieces[-1].sha256


class CassetteDesktop:
    """Serves ``exchanges`` (JSON lines read from the cassette blob) on 127.0.0.1."""

    def __init__(self, lines: bytes, get_blob: Callable[[str], bytes], *, port: int = 0) -> None:
        self.exchanges = [json.loads(line) for line in lines.splitlines() if line.strip()]
        self.used = [False] * len(self.exchanges)
        self.counts = {"exact": 0, "loose": 0, "again": 0, "missed": 0}
        self.get_blob = get_blob
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                status, data = owner.answer(self.command, self.path, body)
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _answer  # noqa: N815 - http.server's names
            do_POST = _answer  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        """The recorded (status, body) for one request."""
        if path == "/_cassette":
            return 200, json.dumps(self.counts).encode()
        if method == "POST" and path == "/reset":
            return 200, b'{"status": "reset"}'
        digest = hashlib.sha256(body).hexdigest() if body is not None else None
        with self._lock:
            same = [
                i
                for i, e in enumerate(self.exchanges)
                if (e["method"], e["path"]) == (method, path)
            ]
            for kind, candidates in (
                (
                    "exact",
                    [
                        i
                        for i in same
                        if self.exchanges[i]["request"] == digest and not self.used[i]
                    ],
                ),
                ("loose", [i for i in same if not self.used[i]]),
                ("again", same[-1:]),
            ):
                if candidates:
                    index = candidates[0]
                    self.used[index] = True
                    self.counts[kind] += 1
                    recorded = self.exchanges[index]
                    return int(recorded["status"]), self.get_blob(str(recorded["response"]))
            self.counts["missed"] += 1
        return 404, json.dumps({"error": f"no recorded answer for {method} {path}"}).encode()

    def start(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.url

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_recorded(store: Any, session_id: str, *, port: int = 0) -> str:
    """Start serving ``session_id``'s recorded desktop from ``store``; its URL."""
    events = list(store.read_stream(session_id))
    lines = store.get_blob(cassette_blob(events, session_id))
    return CassetteDesktop(lines, store.get_blob, port=port).start()
