"""Each browser operation does on a real page what it says, and reports it in its Effect."""

from __future__ import annotations

import pytest

from ownloop.store.events import (
    KeyboardDown,
    KeyboardPress,
    KeyboardType,
    KeyboardUp,
    MouseClick,
    MouseDown,
    MouseMove,
    MouseUp,
    MouseWheel,
    PageGoBack,
    PageGoto,
    Sleep,
)
from ownloop.world.browser import BrowserFailed
from tests.site.server import DOWNLOAD_BODY

pytestmark = pytest.mark.browser


@pytest.fixture
def ops(new_session, site):
    session = new_session()
    session.goto(f"{site.base}/pages/ops.html")
    return session


def events(session, kind):
    return [e for e in session.evaluate("window.events") if e["kind"] == kind]


def test_click_hits_the_point_and_names_the_button(ops):
    effect = ops.execute(MouseClick(x=60, y=40))
    assert effect.ok and effect.error is None
    assert [(e["x"], e["y"], e["detail"]) for e in events(ops, "click")] == [(60, 40, 1)]
    element = effect.element
    assert (element.tag, element.id, element.role, element.name) == (
        "button",
        "click",
        "button",
        "Click me",
    )
    assert element.css_path == "button#click" and element.bbox == (10, 10, 100, 60)


def test_double_and_right_click(ops):
    double = ops.execute(MouseClick(x=180, y=40, click_count=2))
    right = ops.execute(MouseClick(x=300, y=40, button="right"))
    assert len(events(ops, "dblclick")) == 1
    assert [e["button"] for e in events(ops, "contextmenu")] == [2]
    assert double.element.name == "Double target" and double.element.role == "button"
    assert right.element.id == "right"


def test_move_enters_and_names_by_title(ops):
    effect = ops.execute(MouseMove(x=420, y=40, steps=3))
    assert len(events(ops, "mouseenter")) == 1
    assert effect.element.name == "Hover here"


def test_drag_is_down_move_up_at_the_pointer(ops):
    ops.execute(MouseMove(x=50, y=150))
    down = ops.execute(MouseDown())
    ops.execute(MouseMove(x=300, y=160, steps=5))
    up = ops.execute(MouseUp())
    assert [(e["kind"], e["x"], e["y"]) for e in ops.evaluate("window.events")] == [
        ("mousedown", 50, 150),
        ("mouseup", 300, 160),
    ]
    assert down.element.id == "drag" and up.element.id == "drag"


def test_wheel_scrolls_the_page(ops):
    ops.execute(MouseMove(x=600, y=400))
    effect = ops.execute(MouseWheel(dy=500))
    ops.execute(Sleep(seconds=0.3))  # smooth scrolling lands after the wheel event
    assert effect.ok and ops.evaluate("window.scrollY") == 500


def test_type_press_and_keys(ops):
    ops.execute(MouseClick(x=100, y=240))
    ops.execute(KeyboardType(text="hello world"))
    ops.execute(KeyboardPress(key="Control+a"))
    ops.execute(KeyboardType(text="bye"))
    assert ops.evaluate("document.getElementById('text').value") == "bye"
    ops.execute(KeyboardDown(key="Shift"))
    ops.execute(KeyboardUp(key="Shift"))
    keys = [(e["kind"], e["key"]) for e in ops.evaluate("window.events") if e["key"] == "Shift"]
    assert keys == [("keydown", "Shift"), ("keyup", "Shift")]


def test_unknown_key_is_a_recorded_error(ops):
    effect = ops.execute(KeyboardPress(key="NoSuchKey"))
    assert not effect.ok and "NoSuchKey" in effect.error


def test_goto_back_and_sleep(ops, site):
    start = ops.page.url
    goto = ops.execute(PageGoto(url=f"{site.base}/pages/page2.html"))
    assert goto.ok and goto.url_before == start and goto.url_after.endswith("/page2.html")
    back = ops.execute(PageGoBack())
    assert back.ok and back.url_after == start
    slept = ops.execute(Sleep(seconds=0.2))
    assert slept.ok and slept.duration_ms >= 200 and slept.element is None


def test_a_click_that_opens_a_tab_is_followed(new_session, site):
    session = new_session()
    session.goto(f"{site.base}/pages/popup.html")
    effect = session.execute(MouseClick(x=50, y=30))
    assert effect.pages_opened == 1 and effect.url_after.endswith("/page2.html")
    session.settle()
    assert session.page.url.endswith("/page2.html") and len(session.pages) == 2
    assert session.title() == "Page two"


def test_a_tab_is_counted_by_its_own_session_of_a_shared_browser(new_session, site):
    # The sessions of one Chromium share its announcements of new tabs, each counting its own.
    first, second = new_session(), new_session()
    for session in (first, second):
        session.goto(f"{site.base}/pages/popup.html")
    effect = first.execute(MouseClick(x=50, y=30))
    assert effect.pages_opened == 1 and len(first.pages) == 2
    other = second.execute(MouseMove(x=5, y=5))
    assert other.pages_opened == 0 and len(second.pages) == 1
    second.close()  # a closed session no longer listens; the other still counts its tabs
    first.goto(f"{site.base}/pages/popup.html")  # in the tab it follows now
    assert first.execute(MouseClick(x=50, y=30)).pages_opened == 1


def test_a_download_is_returned_by_its_click_or_by_settle_once(new_session, site):
    session = new_session()
    session.goto(f"{site.base}/pages/popup.html")
    effect = session.execute(MouseClick(x=50, y=100))
    assert (effect.download or session.settle()) == DOWNLOAD_BODY
    assert session.settle() is None  # taken once


@pytest.mark.parametrize(("policy", "title"), [("accept", "yes"), ("dismiss", "no")])
def test_a_dialog_is_handled_by_policy_and_recorded(new_session, site, policy, title):
    session = new_session(dialogs=policy)
    session.goto(f"{site.base}/pages/dialog.html")
    effect = session.execute(MouseClick(x=50, y=30))
    assert effect.dialog.type == "confirm" and effect.dialog.message == "Delete it?"
    assert effect.dialog.accepted is (policy == "accept")
    assert session.title() == title


def test_an_op_on_a_closed_page_is_a_recorded_error(new_session, site):
    session = new_session()
    session.goto(f"{site.base}/pages/ops.html")
    session.page.close()
    effect = session.execute(MouseClick(x=60, y=40))
    assert not effect.ok and "closed" in effect.error
    with pytest.raises(BrowserFailed, match="could not take a screenshot"):
        session.screenshot()


def test_an_op_after_the_context_closed_is_a_recorded_error(new_session, site):
    session = new_session()
    session.goto(f"{site.base}/pages/ops.html")
    session.close()
    effect = session.execute(KeyboardType(text="x"))
    assert not effect.ok and effect.error


def test_a_click_does_not_wait_for_a_download_that_settle_picks_up(new_session, site):
    # The page starts the download 1 s after the click: the click returns without it, and the
    # step's settle (longer than that) returns it.
    session = new_session(settle_s=1.5)
    session.goto(f"{site.base}/pages/late-download.html")
    effect = session.execute(MouseClick(x=50, y=30))
    assert effect.ok and effect.download is None
    assert session.settle() == DOWNLOAD_BODY
    assert session.settle() is None
