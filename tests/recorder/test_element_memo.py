"""A guarded replay looks up the element under a point, then clicks there: one look-up, on real
Chromium, while the page has not changed."""

from __future__ import annotations

from typing import Any

import pytest

from ownloop.store.events import MouseClick

pytestmark = pytest.mark.browser


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
