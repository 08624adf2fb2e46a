"""A test-side stand-in for a desktop's HTTP server on 127.0.0.1 that records every request.

Not ownloop code: it answers the OSWorld protocol's shapes (a 64x48 PNG, the screen size, a
successful ``/execute``) so a test can assert exactly what the recorder sent. ``die_after``
executes, it stops answering (its socket is closed), as a desktop that went away mid-task.
"""

from __future__ import annotations

import json
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SIZE = (640, 360)


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + b"\x80" * (width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


class RecordingDesktop:
    def __init__(self, die_after: int | None = None) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.die_after = die_after
        self.executes = 0
        png = _png(*SIZE)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.requests.append(("GET", self.path, None))
                if self.path == "/screenshot":
                    self._send(200, png, "image/png")
                elif self.path == "/accessibility":
                    self._send(200, json.dumps({"AT": "<desktop-frame/>"}).encode())
                else:
                    self._send(404, b"{}")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                owner.requests.append(("POST", self.path, body))
                if self.path == "/screen_size":
                    self._send(200, json.dumps({"width": SIZE[0], "height": SIZE[1]}).encode())
                elif self.path == "/execute":
                    owner.executes += 1
                    if owner.die_after is not None and owner.executes > owner.die_after:
                        threading.Thread(target=owner.stop, daemon=True).start()
                        self.close_connection = True
                        return
                    answer = {"status": "success", "output": "", "error": "", "returncode": 0}
                    self._send(200, json.dumps(answer).encode())
                else:
                    self._send(200, b"ok", "text/plain")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def executed(self) -> list[Any]:
        return [body["command"] for method, path, body in self.requests if path == "/execute"]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
