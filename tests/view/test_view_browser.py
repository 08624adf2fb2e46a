"""``ownloop view`` in a real Chromium: the sessions table filters and sorts, every step shows its
screenshot with the markers at the recorded coordinates, keys move between steps, a replay sits
beside its parent, and hostile recorded text stays text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.view.dashboard import wait_until
from tests.view.synthetic import (
    HOSTILE_ANSWER,
    HOSTILE_ELEMENT,
    HOSTILE_RUNG,
    HOSTILE_THOUGHT,
    HOSTILE_TITLE,
    HOSTILE_TYPED,
    ViewStore,
)

pytestmark = pytest.mark.browser

_ALL_LOADED = (
    "Array.from(document.querySelectorAll('section.step figure.shot img'))"
    ".every(i => i.complete && i.naturalWidth > 0)"
)

# Where a mark is on screen, and where its step's screenshot is.
_GEOMETRY = """([number, selector]) => {
  const section = document.getElementById('step-' + number);
  const img = section.querySelector('img');
  const r = img.getBoundingClientRect();
  const marks = Array.from(section.querySelectorAll(selector)).map(m => {
    const b = m.getBoundingClientRect();
    return [b.left + b.width / 2, b.top + b.height / 2];
  });
  return {left: r.left, top: r.top, width: r.width, height: r.height,
          natural: img.naturalWidth, marks: marks};
}"""

# A point of an SVG element (e.g. a line's x2, y2) in screen coordinates.
_SCREEN_POINT = """([number, selector, xa, ya]) => {
  const el = document.getElementById('step-' + number).querySelector(selector);
  const svg = el.ownerSVGElement;
  let p = svg.createSVGPoint();
  p.x = el[xa].baseVal.value; p.y = el[ya].baseVal.value;
  p = p.matrixTransform(el.getScreenCTM());
  return [p.x, p.y];
}"""


def _rows(page: Any) -> list[dict[str, str]]:
    return page.eval_on_selector_all(
        "#sessions tbody tr[data-session]",
        "rows => rows.map(r => ({id: r.dataset.session, task: r.querySelector('.task').textContent,"
        " run: r.children[1].textContent.trim(), passed: r.querySelector('.passed').textContent}))",
    )


def _follow(page: Any, selector: str) -> None:
    with page.expect_navigation():
        page.click(selector)


def _show_all_steps(page: Any) -> None:
    # Screenshots load lazily: bring each step into view, then wait for every image.
    for section in page.query_selector_all("section.step"):
        section.scroll_into_view_if_needed()
    wait_until(page, _ALL_LOADED)


def test_sessions_table_filters_and_sorts(page: Any, viewer: str, view_store: ViewStore) -> None:
    page.goto(viewer + "sessions")
    everything = _rows(page)
    count = view_store.store.sql("select count(*) from sessions").rows[0][0]
    assert len(everything) == count == 5
    page.select_option("select[name=run]", "r1")
    _follow(page, "form.filters button[type=submit]")
    rows = _rows(page)
    assert len(rows) == 2 and {r["run"] for r in rows} == {"r1"}
    assert sorted(r["task"].rsplit("-", 1)[0] for r in rows) == ["click-button", "enter-text"]
    page.goto(viewer + "sessions")
    page.select_option("select[name=passed]", "no")
    _follow(page, "form.filters button[type=submit]")
    assert [r["id"] for r in _rows(page)] == [view_store.hostile]
    page.goto(viewer + "sessions")
    page.fill("input[name=task]", "GESTURES")
    _follow(page, "form.filters button[type=submit]")
    assert [r["id"] for r in _rows(page)] == [view_store.gestures]
    # Sorting: by task id ascending, then (a second click) descending; filters are kept.
    page.goto(viewer + "sessions?agent=synthetic-agent")
    _follow(page, "#sessions thead a.sort:text-is('task id')")
    ascending = [r["task"] for r in _rows(page)]
    assert ascending == sorted(ascending) and len(ascending) == 3
    _follow(page, "#sessions thead a.sort:has-text('task id')")
    assert [r["task"] for r in _rows(page)] == sorted(ascending, reverse=True)
    assert "agent=synthetic-agent" in page.url


@pytest.mark.parametrize("task", ["click-button", "enter-text", "gestures-task"])
def test_every_step_shows_its_screenshot_with_markers_where_the_actions_were(
    page: Any, viewer: str, view_store: ViewStore, task: str
) -> None:
    store = view_store.store
    session_id = store.sql(
        f"select session_id from sessions where starts_with(task_id, '{task}')"
    ).rows[0][0]
    shots = dict(
        store.sql(f"select step, width from screenshots where session_id = '{session_id}'").rows
    )
    clicks = store.sql(
        "select step, x, y from actions where kind = 'click' and session_id = "
        f"'{session_id}' order by step, idx"
    ).rows
    # The whole screenshot, as recorded: crop to content (the default) is off for this page
    # (the cropped geometry is test_dashboard_browser's).
    page.add_init_script("sessionStorage.setItem('ownloop-crop', '')")
    page.goto(f"{viewer}session/{session_id}")
    assert page.eval_on_selector_all("section.step", "s => s.length") == len(shots)
    _show_all_steps(page)
    for width_px in (1400, 860):  # two layouts: the screenshot is shown at two sizes
        page.set_viewport_size({"width": width_px, "height": 900})
        for step, x, y in clicks:
            g = page.evaluate(_GEOMETRY, [step, ".mark .ring:not(.outer)"])
            assert g["natural"] == shots[step]
            scale = g["width"] / shots[step]
            assert scale < 1.0  # the screenshot is shown smaller than recorded
            ((cx, cy),) = g["marks"]
            assert cx == pytest.approx(g["left"] + x * scale, abs=1.0)
            assert cy == pytest.approx(g["top"] + y * scale, abs=1.0)
    if task == "gestures-task":
        g = page.evaluate(_GEOMETRY, [1, ".mark-drag .dot"])
        scale = g["width"] / 1280
        assert g["marks"][0] == pytest.approx(
            [g["left"] + 100 * scale, g["top"] + 200 * scale], abs=1.0
        )
        end = page.evaluate(_SCREEN_POINT, [1, ".mark-drag line", "x2", "y2"])
        assert end == pytest.approx([g["left"] + 600 * scale, g["top"] + 420 * scale], abs=1.0)
        g = page.evaluate(_GEOMETRY, [2, ".mark-scroll"])
        start = page.evaluate(_SCREEN_POINT, [2, ".mark-scroll line", "x1", "y1"])
        end = page.evaluate(_SCREEN_POINT, [2, ".mark-scroll line", "x2", "y2"])
        assert start == pytest.approx([g["left"] + 640 * scale, g["top"] + 400 * scale], abs=1.0)
        assert end[1] > start[1] and end[0] == pytest.approx(start[0])  # an arrow pointing down
        assert page.locator("#step-2 .mark-scroll text").text_content() == "scroll down 5"
        assert page.locator("#step-3 .mark-double_click .ring").count() == 2


def test_keys_move_between_steps(page: Any, viewer: str, view_store: ViewStore) -> None:
    page.goto(f"{viewer}session/{view_store.gestures}")
    assert page.evaluate("document.body.dataset.step") == "1"

    def press(key: str, expected: int) -> None:
        page.keyboard.press(key)
        assert page.evaluate("document.body.dataset.step") == str(expected)
        assert page.url.endswith(f"#step-{expected}")
        assert page.locator("section.step.current").get_attribute("id") == f"step-{expected}"
        assert page.locator("nav.timeline a.tick.current").get_attribute("data-step") == str(
            expected
        )
        top = page.evaluate(
            f"document.getElementById('step-{expected}').getBoundingClientRect().top"
        )
        assert 0 <= top < 150  # scrolled to it

    press("j", 2)
    press("ArrowRight", 3)
    press("j", 3)  # the last step stays
    press("k", 2)
    press("ArrowLeft", 1)
    press("k", 1)
    # Typing in a form field does not move (the sessions page has one; no steps there).
    page.goto(f"{viewer}session/{view_store.gestures}#step-3")
    assert page.evaluate("document.body.dataset.step") == "3"


def test_hostile_text_renders_as_text(page: Any, viewer: str, view_store: ViewStore) -> None:
    page.goto(f"{viewer}session/{view_store.hostile}")
    _show_all_steps(page)
    assert page.evaluate("window.pwned") is None
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0
    scripts = page.evaluate("Array.from(document.scripts).map(s => s.getAttribute('src'))")
    assert scripts == ["/static/view.js"]  # ours, and nothing injected
    assert page.locator("#step-1 .thought").text_content() == HOSTILE_THOUGHT
    assert page.locator("#step-2 .mark-type text").text_content() == HOSTILE_TYPED
    assert HOSTILE_ELEMENT in page.locator("#step-1 td.element").text_content()
    assert HOSTILE_ELEMENT in page.locator("#step-2 tr.failed .error").text_content()
    assert page.locator("dd.answer").text_content() == HOSTILE_ANSWER
    titles = page.locator(".evidence pre.json").all_text_contents()
    assert json.dumps(HOSTILE_TITLE) in titles
    assert "window.pwned=3" in page.locator("#step-1 figcaption").text_content()
    # The DOM snapshot opens as plain text, where its script cannot run either.
    _follow(page, "text=dom as text")
    assert "<script>window.pwned=5</script>" in page.locator("body").text_content()
    assert page.evaluate("window.pwned") is None
    # The sessions table shows the hostile answer as text too.
    page.goto(viewer + "sessions")
    assert page.evaluate("window.pwned") is None
    assert page.locator(f"tr[data-session={view_store.hostile}] td.answer").text_content() == (
        HOSTILE_ANSWER
    )


def test_a_replay_sits_beside_its_parent_with_fidelity(
    page: Any, viewer: str, view_store: ViewStore
) -> None:
    page.goto(f"{viewer}session/{view_store.replay}")
    parent = page.locator("a.parent")
    assert parent.get_attribute("href") == f"/session/{view_store.hostile}"
    assert page.locator("section.step.pair").count() == 3
    assert page.locator("section.pair .side.mine img").count() == 3
    assert page.locator("section.pair .side.theirs img").count() == 3
    assert "diverged" in page.locator("#step-2 .fidelity").text_content()
    assert "25.00% of pixels" in page.locator("#step-2 .fidelity").text_content()
    assert "same" in page.locator("#step-1 .fidelity").text_content()
    # each step's rung (the fidelity view's rung and operation counts), coloured by rung
    rungs = [
        (
            page.locator(f"#step-{n} .fidelity .rung").text_content(),
            page.locator(f"#step-{n} .fidelity .rung").get_attribute("class"),
            page.locator(f"#step-{n} .fidelity .rung-ops").text_content(),
        )
        for n in (1, 2, 3)
    ]
    assert rungs == [
        ("rung exact", "fact rung rung-exact", "operations 1 exact"),
        ("rung failed", "fact rung rung-failed", "operations 1 failed"),
        (f"rung {HOSTILE_RUNG}", "fact rung rung-other", "operations 1 retargeted"),
    ]
    assert page.locator("#step-3 .fidelity img").count() == 0  # a recorded rung stays text
    assert (
        page.locator("#step-2 .fidelity .rung").evaluate("e => getComputedStyle(e).backgroundColor")
        == "rgb(253, 232, 232)"
    )
    assert (
        page.locator("#step-1 .fidelity .rung").evaluate("e => getComputedStyle(e).backgroundColor")
        == "rgb(238, 247, 238)"
    )
    assert page.locator("nav.timeline a.tick.diverged").get_attribute("data-step") == "2"
    assert "first divergent step 2" in page.locator("dd.replay").text_content()
    assert page.locator("dd.replay .rungs").text_content() == (
        "operations 1 exact, 1 retargeted, 1 failed"
    )
    assert page.evaluate("window.pwned") is None
    with page.expect_navigation():
        parent.click()
    assert page.url.endswith(f"/session/{view_store.hostile}")


def test_runs_page_links_to_its_sessions(page: Any, viewer: str) -> None:
    page.goto(viewer)
    runs = page.eval_on_selector_all(
        "#runs tbody tr td:first-child", "cells => cells.map(c => c.textContent)"
    )
    assert sorted(runs) == ["r1", "synthetic"]
    _follow(page, "#runs tr[data-run=r1] td.sessions a")
    assert {r["run"] for r in _rows(page)} == {"r1"}
