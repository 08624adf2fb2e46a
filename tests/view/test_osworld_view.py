"""An imported OSWorld session in the viewer, in a real Chromium: every step's screenshot loads,
and the recording is a video element over a blob served as video/mp4."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.store import open_store
from ownloop.view.server import ViewServer
from tests.transfer.osworld_tree import EXAMPLES, write_tree
from tests.view.dashboard import wait_until

pytestmark = pytest.mark.browser

_SHOTS_LOADED = (
    "(() => { const imgs = Array.from(document.querySelectorAll('section.step figure.shot img'));"
    " return imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0)"
    " ? imgs.length : 0; })()"
)


def test_the_viewer_shows_an_imported_session_with_its_screens_and_recording(
    page: Any, tmp_path: Path
) -> None:
    results = write_tree(tmp_path / "results", damaged=False)
    store = tmp_path / "store"
    out = CliRunner().invoke(
        cli, ["--store", str(store), "import", str(results), "--format", "osworld"]
    )
    assert out.exit_code == 0, out.output
    opened = open_store(store)
    [(session_id,)] = opened.sql(
        "select session_id from sessions where run_id = 'osworld-opencua-7b' and task_id = $t",
        {"t": EXAMPLES["gimp"]},
    ).rows
    with ViewServer(opened, port=0) as url:
        page.goto(f"{url}session/{session_id}")
        for section in page.query_selector_all("section.step"):
            section.scroll_into_view_if_needed()
        assert wait_until(page, _SHOTS_LOADED) == 4  # step_0.png, then the screen after each step
        source = page.get_attribute("video.recording", "src")
        assert source is not None and source.startswith("/blob/")
        answer = page.request.get(url.rstrip("/") + source)
        assert answer.headers["content-type"] == "video/mp4"
        assert "Click the middle." in page.inner_text("body")
