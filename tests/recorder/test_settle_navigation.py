"""A navigation that a step starts only after its operation returned (a form submitted a moment
after Enter) is waited for by ``settle``: the step's screenshot shows the page it led to."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ownloop.store.events import KeyboardType

pytestmark = pytest.mark.browser

# The key is heard on the document: an input's autofocus may come after a fast first keystroke.
_FIRST = b"""<!doctype html><title>first</title><input id="q" autofocus>
<script>
document.addEventListener("keydown", (event) => {
  if (event.key === "Enter") setTimeout(() => { location.href = "/next"; }, 60);
});
</script>"""
_NEXT = b"<!doctype html><title>next</title><p>the page the step led to</p>"


class _Pages(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path == "/next":
            time.sleep(1.5)  # the next document comes after the step's pause (1 s here)
        body = _NEXT if self.path == "/next" else _FIRST
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def pages() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_settle_waits_for_a_navigation_that_began_after_the_operation(
    pages: str, new_session: Any
) -> None:
    # A pause of 1 s after a key that may start something: the navigation begins inside it even
    # on a cold, loaded machine; its document comes only after it.
    session = new_session(event_grace_s=1.0)
    session.goto(pages + "/")
    session.settle()  # nothing began loading: no wait, and none skipped later because of it
    assert session.title() == "first"
    session.execute(KeyboardType(text="\n"))
    session.settle()
    assert session.page.url == pages + "/next"
    assert session.title() == "next"
