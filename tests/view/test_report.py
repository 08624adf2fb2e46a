"""``ownloop report``: one self-contained HTML file that requests nothing when opened, and an
animated GIF with one frame per step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image

from ownloop.cli import cli
from tests.view.synthetic import HOSTILE_THOUGHT, HOSTILE_TYPED, ViewStore

pytestmark = pytest.mark.browser  # the store is a real recording (Chromium and the expert)


def _report(view_store: ViewStore, *args: str) -> Any:
    return CliRunner().invoke(
        cli, ["--store", str(view_store.root), "report", *args], catch_exceptions=False
    )


def _open_offline(page: Any, path: Path) -> list[str]:
    """Open ``path`` with every request the page makes recorded (and refused); returns them."""
    requests: list[str] = []

    def refuse(route: Any) -> None:
        requests.append(route.request.url)
        if route.request.url == path.as_uri():
            route.continue_()
        else:
            route.abort()

    page.route("**/*", refuse)
    page.goto(path.as_uri())
    page.wait_for_function(
        "Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)", timeout=10_000
    )
    return requests


@pytest.mark.parametrize("task", ["enter-text", "hostile-task"])
def test_report_is_one_file_that_requests_nothing(
    page: Any, view_store: ViewStore, tmp_path: Path, task: str
) -> None:
    out = tmp_path / "bug.html"
    gif = tmp_path / "bug.gif"
    # The hostile task's latest session is its replay: name the recorded one by its id.
    target = view_store.hostile if task == "hostile-task" else task
    result = _report(view_store, target, "--out", str(out), "--gif", str(gif))
    assert result.exit_code == 0, result.output
    assert f"wrote {out} (" in result.output and f"wrote {gif} (" in result.output
    session_id = view_store.store.sql(
        "select session_id from sessions where starts_with(task_id, "
        f"'{task}') and parent_session_id is null"
    ).rows[0][0]
    steps = view_store.store.sql(
        f"select count(*) from screenshots where session_id = '{session_id}'"
    ).rows[0][0]
    requests = _open_offline(page, out)
    assert requests == [out.as_uri()]  # the file itself, nothing else
    assert page.locator("section.step img").count() == steps
    assert page.evaluate("document.scripts.length") == 0
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == (
        "rgb(246, 247, 249)"
    )  # the inline stylesheet applies (its hash is in the CSP)
    if task == "hostile-task":
        assert page.evaluate("window.pwned") is None
        assert page.locator("#step-1 .thought").text_content() == HOSTILE_THOUGHT
        assert page.locator("#step-2 .mark-type text").text_content() == HOSTILE_TYPED
        assert "<script>window.pwned=5</script>" in page.locator("pre.blob").text_content()
    with Image.open(gif) as image:
        assert image.format == "GIF"
        assert image.n_frames == steps
        assert image.is_animated == (steps > 1)
        assert image.width <= 960


def test_a_replay_report_shows_its_parent_beside_it(
    page: Any, view_store: ViewStore, tmp_path: Path
) -> None:
    out = tmp_path / "replay.html"
    assert _report(view_store, view_store.replay, "--out", str(out)).exit_code == 0
    assert _open_offline(page, out) == [out.as_uri()]
    assert page.locator("section.pair").count() == 3
    assert page.locator("section.pair img").count() == 6
    assert page.locator("a.parent").count() == 0  # no link out of the file
    assert "diverged" in page.locator("#step-2 .fidelity").text_content()
    assert page.locator("#step-2 .fidelity .rung").text_content() == "rung failed"
    assert page.locator("dd.replay .rungs").text_content() == (
        "operations 1 exact, 1 retargeted, 1 failed"
    )


def test_gif_frames_show_the_markers(view_store: ViewStore, tmp_path: Path) -> None:
    gif = tmp_path / "g.gif"
    assert _report(view_store, view_store.gestures, "--gif", str(gif)).exit_code == 0
    with Image.open(gif) as image:
        assert image.n_frames == 3
        image.seek(2)  # the double click at (900, 700), shown at 960/1280 of its size
        frame = image.convert("RGB")
    scale = 960 / 1280
    cx, cy = round(900 * scale), round(700 * scale)
    assert frame.getpixel((cx, cy)) == pytest.approx((229, 72, 77), abs=40)  # the red dot
    assert frame.getpixel((cx + 60, cy - 60)) != frame.getpixel((cx, cy))


def test_report_says_what_is_missing(view_store: ViewStore, tmp_path: Path) -> None:
    result = _report(view_store, "click-button")
    assert result.exit_code == 1
    assert result.output == "Error: say where to write: --out FILE.html and/or --gif FILE.gif\n"
    result = _report(view_store, "no-such-task", "--out", str(tmp_path / "x.html"))
    assert result.exit_code == 1
    assert result.output == (
        f"Error: no session or task 'no-such-task' in {view_store.root}. "
        f"List them with: ownloop --store {view_store.root} sessions\n"
    )
    result = _report(view_store, "click-button", "--out", str(tmp_path / "no" / "x.html"))
    assert (
        result.output == f"Error: cannot write {tmp_path / 'no' / 'x.html'}: No such file or "
        "directory\n"
    )
