"""Issue 31: a point a model wrote off the page, as Chromium handles it (the default,
``off_page=chromium``): the agent moves it just outside the edge, and the click Chromium gets there
lands on ``<html>`` and blurs the focused input; ``off_page=reject`` records a no-op instead."""

from __future__ import annotations

import pytest

from ownloop.agents import make_agent
from ownloop.store.events import Click, MouseClick, Rejected

pytestmark = pytest.mark.browser

VIEW = (1280, 800)


def test_an_off_page_click_lands_on_html_and_blurs_the_focused_input(new_session, site) -> None:
    agent = make_agent("uitars", viewport="1280x800")
    (action,) = agent.parse("Action: click(start_box='(99999,300)')", VIEW, ()).actions
    assert isinstance(action, Click) and (action.x, action.y) == (1281.0, action.y)
    (op,) = agent.translate(action)
    assert isinstance(op, MouseClick)
    session = new_session(viewport=VIEW)
    session.goto(f"{site.base}/pages/ops.html")
    session.evaluate(
        "() => { document.getElementById('text').focus(); window.hits = [];"
        " document.addEventListener('mousedown', (e) => window.hits.push(e.target.tagName)); }"
    )
    assert session.evaluate("() => document.activeElement.id") == "text"
    session.execute(op)
    assert session.evaluate("() => window.hits") == ["HTML"]
    assert session.evaluate("() => document.activeElement.tagName") == "BODY"

    rejecting = make_agent("uitars", viewport="1280x800", off_page="reject")
    (refused,) = rejecting.parse("Action: click(start_box='(99999,300)')", VIEW, ()).actions
    assert isinstance(refused, Rejected) and rejecting.translate(refused) == ()
