"""Fresh contexts made ahead for session after session (a batch replay's), on real Chromium: each
is as fresh as the one a session opens itself, and serves a session the same way."""

from __future__ import annotations

from typing import Any

import pytest

from ownloop.recorder.browser import BrowserSession
from ownloop.recorder.contexts import FreshContexts
from ownloop.store.events import MouseClick

pytestmark = pytest.mark.browser

_SEEN_JS = """() => ({
    stored: localStorage.getItem('left'), cookie: document.cookie, w: innerWidth, h: innerHeight,
    dpr: devicePixelRatio, lang: navigator.language,
    tz: Intl.DateTimeFormat().resolvedOptions().timeZone, focus: document.hasFocus()})"""


def test_a_context_made_ahead_carries_nothing_over_and_is_set_as_a_sessions_own(
    chromium: Any, site: Any
) -> None:
    before = len(chromium.contexts)
    fresh = FreshContexts(chromium)
    try:
        first = BrowserSession(chromium, (1000, 700), settle_s=0, opened=fresh.take((1000, 700)))
        fresh.ahead((1000, 700))
        first.goto(f"{site.base}/pages/page2.html")  # the next one is made meanwhile
        first.evaluate("() => { localStorage.setItem('left', 'x'); document.cookie = 'left=1'; }")
        assert first.cookies()
        fresh.retire(first)
        second = BrowserSession(chromium, (1000, 700), settle_s=0, opened=fresh.take((1000, 700)))
        second.goto(f"{site.base}/pages/page2.html")
        assert second.context is not first.context
        assert second.cookies() == []
        assert second.evaluate(_SEEN_JS) == {
            "stored": None,
            "cookie": "",
            "w": 1000,
            "h": 700,
            "dpr": 1,
            "lang": "en-US",
            "tz": "UTC",
            "focus": True,
        }
        # the tabs a click opens are counted and followed, as in a session's own context
        second.goto(f"{site.base}/pages/popup.html")
        effect = second.execute(MouseClick(x=50, y=30))
        assert effect.pages_opened == 1 and effect.url_after.endswith("/page2.html")
        fresh.retire(second)
    finally:
        fresh.close()
    assert len(chromium.contexts) == before  # retired, made ahead and unused: all closed


def test_a_context_made_ahead_for_another_viewport_is_not_handed_out(
    chromium: Any, site: Any
) -> None:
    before = len(chromium.contexts)
    fresh = FreshContexts(chromium)
    try:
        fresh.ahead((800, 600))
        session = BrowserSession(chromium, (640, 480), settle_s=0, opened=fresh.take((640, 480)))
        session.goto(f"{site.base}/pages/page2.html")
        assert session.evaluate("() => [innerWidth, innerHeight]") == [640, 480]
        fresh.retire(session)
    finally:
        fresh.close()
    assert len(chromium.contexts) == before


def test_a_click_right_after_a_look_up_at_its_point_reports_that_element_else_looks_again(
    new_session: Any, site: Any
) -> None:
    session = new_session()
    session.goto(f"{site.base}/pages/ops.html")
    checked = session.element_at(60, 40)  # a guarded replay's check, then its click
    assert checked is not None and checked.name == "Click me"
    assert session.execute(MouseClick(x=60, y=40)).element == checked
    session.element_at(60, 40)
    session.evaluate("() => { document.getElementById('click').textContent = 'Renamed'; }")
    renamed = session.execute(MouseClick(x=60, y=40)).element  # the page changed in between
    assert renamed is not None and renamed.name == "Renamed"
    session.element_at(300, 300)
    assert session.execute(MouseClick(x=60, y=40)).element == renamed  # another point
