"""The session's context, screenshots and element look-ups on real Chromium."""

from __future__ import annotations

import pytest

from ownloop.errors import OwnloopError
from ownloop.world.chromium import browser_versions, open_browser

pytestmark = pytest.mark.browser


def test_context_is_set_as_design_says(new_session, site):
    session = new_session(viewport=(1000, 700))
    session.goto(f"{site.base}/pages/page2.html")
    seen = session.evaluate("""() => ({
        w: innerWidth, h: innerHeight, dpr: devicePixelRatio, lang: navigator.language,
        tz: Intl.DateTimeFormat().resolvedOptions().timeZone, focus: document.hasFocus(),
        webdriver: navigator.webdriver})""")
    assert seen == {
        "w": 1000,
        "h": 700,
        "dpr": 1,
        "lang": "en-US",
        "tz": "UTC",
        "focus": True,
        "webdriver": False,
    }


def test_screenshot_is_a_lossless_png_of_the_viewport(new_session, site):
    session = new_session(viewport=(800, 600))
    session.goto(f"{site.base}/pages/ops.html")
    shot = session.screenshot()
    assert shot.png.startswith(b"\x89PNG\r\n\x1a\n")
    assert (shot.width, shot.height) == (800, 600) and shot.url.endswith("/ops.html")
    assert shot.capture_ms > 0


def test_element_lookup_descends_into_frames_and_shadow_roots(new_session, site):
    session = new_session()
    session.goto(f"{site.base}/pages/frames.html")
    inside = session.element_at(100, 150)
    assert (inside.id, inside.name, inside.frame) == ("deep", "Inside frame", "frame(iframe#inner)")
    assert inside.bbox == (75, 135, 100, 40)  # top-viewport pixels: frame offset + border added
    shadow = session.element_at(600, 150)
    assert (shadow.id, shadow.role, shadow.frame) == ("shadowlink", "link", "shadow(div#host)")


def test_element_names_come_from_labels(new_session, site):
    session = new_session()
    session.goto(f"{site.base}/_admin/session-flags")
    session.goto(f"{site.base}/form")
    box = session.evaluate("document.getElementById('title').getBoundingClientRect().toJSON()")
    element = session.element_at(box["x"] + 5, box["y"] + 5)
    assert (element.tag, element.role, element.name) == ("input", "textbox", "Title")


def test_unknown_dialog_policy_is_refused(chromium):
    from ownloop.world.browser import BrowserSession

    with pytest.raises(OwnloopError, match="unknown dialog policy 'ignore'. Use accept or dismiss"):
        BrowserSession(chromium, (800, 600), dialogs="ignore")


def test_open_browser_works_from_a_worker_thread():
    import threading

    seen: list[dict[str, str]] = []

    def work() -> None:
        launched = open_browser()
        try:
            seen.append(browser_versions(launched.browser))
        finally:
            launched.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen and seen[0]["chromium"][0].isdigit() and seen[0]["playwright"]


def _child_pids(pid: int) -> dict[int, str]:
    """The live (not zombie) children of ``pid``: their pids and the first word of their command."""
    from pathlib import Path

    found = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
            command = (entry / "cmdline").read_bytes().split(b"\0")[0].decode() if stat else ""
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split() if stat else []
        if fields and int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = command
    return found


def test_a_browser_that_dies_takes_its_driver_and_its_profile_with_it():
    """Playwright may leave a call on a dead browser pending for ever (a new page caught
    between its creation and its set-up): the driver's exit ends every call in flight, and
    ``close()`` returns at once and removes the profile the driver no longer can."""
    import os
    import signal
    import threading
    import time
    from pathlib import Path

    from playwright.sync_api import Error as PlaywrightError

    errors: list[BaseException] = []

    def work() -> None:  # its own thread: the module's fixtures drive a Playwright on this one
        try:
            before = set(_child_pids(os.getpid()))
            launched = open_browser()
            (driver,) = set(_child_pids(os.getpid())) - before  # Playwright's driver, our child
            (chromium,) = _child_pids(driver)
            profile = next(
                arg.split("=", 1)[1]
                for arg in Path(f"/proc/{chromium}/cmdline").read_bytes().decode().split("\0")
                if arg.startswith("--user-data-dir=")
            )
            page = launched.browser.new_context().new_page()
            threading.Timer(0.5, os.kill, (chromium, signal.SIGKILL)).start()
            with pytest.raises(PlaywrightError):
                page.evaluate("new Promise(() => {})")  # never settles while the browser lives
            deadline = time.monotonic() + 10
            while driver in _child_pids(os.getpid()) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert driver not in _child_pids(
                os.getpid()
            )  # the driver is gone: no call can wait on it
            assert not launched.browser.is_connected()
            with pytest.raises(PlaywrightError):
                launched.browser.new_context()
            launched.close()
            assert not Path(profile).exists()
        except BaseException as exc:  # noqa: BLE001 - raised again below
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(120)
    assert not thread.is_alive()
    if errors:
        raise errors[0]
