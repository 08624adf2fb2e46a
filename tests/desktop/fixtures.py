"""The test desktop for the whole session: one ``ownloop serve-desktop`` (in-process), reset
before each test that asks for it. Imported by ``tests/conftest.py``, so every test folder can
use the fixtures:

- ``desktop_server``: the session's ``DesktopServer`` (1280x720, no apps on a fresh desktop),
  started on first use (Xvfb + openbox: about a second), stopped at the end of the run.
- ``desktop``: a ``TestDesktop`` (``url``, ``size``, ``home``, ``get``/``post`` helpers) on a
  desktop just reset (every window closed, HOME wiped); its ``home`` is the desktop's HOME.
  Mark such tests ``@pytest.mark.desktop``.

The desktop is shared: tests using it must not run at once in one process (they do not:
pytest runs a worker's tests one after another), and each leaves nothing it needs to the next.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

DESKTOP_SIZE = (1280, 720)
_TIMEOUT_S = 60


class TestDesktop(NamedTuple):
    __test__ = False  # not a test class, for pytest
    url: str
    size: tuple[int, int]
    home: Path

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=_TIMEOUT_S) as response:
            return bytes(response.read())

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """POST a JSON body; the answer's JSON (or its text, when it is not JSON)."""
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body or {}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            error.msg = f"{error.msg}: {error.read()[:500]!r}"  # the server's reason, in the report
            raise
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode()

    def pyautogui(self, code: str) -> dict[str, Any]:
        """/execute of ``code`` the way OSWorld's client sends it."""
        prelude = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
        answer: dict[str, Any] = self.post(
            "/execute", {"command": ["python", "-c", prelude + code], "shell": False}
        )
        return answer

    def shell(self, command: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.post("/execute", {"command": command, "shell": True})
        return answer

    def windows(self) -> str:
        """The accessibility tree as XML (about a second: prefer ``titles`` to wait on)."""
        return str(json.loads(self.get("/accessibility"))["AT"])

    def titles(self) -> str:
        """``wmctrl -l``: one line per window, its title last."""
        return str(self.shell("wmctrl -l")["output"])

    def wait_for(self, ready: Callable[[], bool], what: str, seconds: float = 20) -> None:
        end = time.monotonic() + seconds
        while not ready():
            if time.monotonic() > end:
                raise AssertionError(f"{what} within {seconds:g} s")
            time.sleep(0.1)


@pytest.fixture(scope="session")
def desktop_server() -> Iterator[Any]:
    from ownloop.desktopserver import Desktop, DesktopServer

    server = DesktopServer(Desktop(DESKTOP_SIZE))
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def desktop(desktop_server: Any) -> TestDesktop:
    """The session's desktop, just reset."""
    shared = TestDesktop(desktop_server.url, DESKTOP_SIZE, desktop_server.desktop.home)
    shared.post("/reset")
    return shared
