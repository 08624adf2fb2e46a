"""A download a click starts is recorded as evidence of its step, though no click waits for one.

Through the real CLI (run in this process): ``ownloop record`` on a page of the test site whose
button starts a download a second after the click (long after the click returned), with a
scripted endpoint. The settle (3 s) leaves the page's 1 s timer 2 s to fire on a busy machine.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver import ModelServer, Reply
from ownloop.store import open_store
from ownloop.store.events import BrowserActed
from tests.site.server import DOWNLOAD_BODY

pytestmark = [pytest.mark.browser, pytest.mark.slow]

_CLICK = "Thought: Fetch the file.\nAction: click(start_box='(50,30)')"
_DONE = "Thought: Done.\nAction: finished(content='ok')"


def test_a_late_download_is_recorded_on_the_click_that_started_it(
    tmp_path: Path, site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # as a user in the folder of the tasks
    tasks = tmp_path / "tasks.json"
    tasks.write_text(
        json.dumps(
            [
                {
                    "task_id": "late",
                    "prompt": "Download the report",
                    "start": "{BASE}/pages/late-download.html",
                    "grader": "none",
                }
            ]
        )
    )
    replies = itertools.chain([_CLICK], itertools.repeat(_DONE))
    store = tmp_path / "store"
    with ModelServer(lambda request: Reply(next(replies))) as url:
        argv = ["--store", str(store), "record", "uitars", "--tasks", str(tasks)]
        argv += ["--base", site.base, "--endpoint", url, "--model", "m", "--settle", "3"]
        argv += ["--retries", "0", "--run", "d1"]
        result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    acted = [
        event
        for path in (store / "journal").glob("*.jsonl")
        for line in path.read_text().splitlines()
        if (event := json.loads(line)["event"])["kind"] == "browser_acted"
    ]
    clicks = [e for e in acted if e["op"]["op"] == "mouse.click"]
    assert len(clicks) == 1 and clicks[0]["step"] == 1, acted
    assert clicks[0].get("download"), clicks[0]
    assert open_store(store).get_blob(clicks[0]["download"]) == DOWNLOAD_BODY
    # The other operations of the step (the move before the click) carry no download.
    assert [e.get("download") for e in acted if e is not clicks[0]] == [None] * (len(acted) - 1)
    # Re-executed, the click that downloaded downloads again, recorded on the child's click.
    argv = ["--store", str(store), "replay", "late", "--execute", "ops", "--settle", "3"]
    replay = CliRunner().invoke(cli, [*argv, "--format", "json"], catch_exceptions=False)
    assert replay.exit_code == 0, replay.output
    child = json.loads(replay.stdout)["child"]["session_id"]
    acted_again = [
        event
        for event in open_store(store).session_events(child)
        if isinstance(event, BrowserActed)
    ]
    downloads = [e.download for e in acted_again if e.download]
    assert downloads == [clicks[0]["download"]], acted_again
