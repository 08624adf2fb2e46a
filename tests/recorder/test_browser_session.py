"""The session's context, screenshots and element look-ups on real Chromium."""

from __future__ import annotations

import pytest

from ownloop.recorder.browser import browser_versions, open_browser
from ownloop.store.errors import OwnloopError

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
    from ownloop.recorder.browser import BrowserSession

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
