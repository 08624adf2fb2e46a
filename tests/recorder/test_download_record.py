"""A download a click starts is recorded as evidence of its step, though no click waits for one.

Through the real CLI: ``ownloop record`` on a page of the test site whose button starts a download
a second after the click (long after the click returned), with a scripted endpoint.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ownloop.modelserver import ModelServer, Reply
from ownloop.store import open_store
from ownloop.store.events import BrowserActed
from tests.site.server import DOWNLOAD_BODY

pytestmark = [pytest.mark.browser, pytest.mark.slow]

_CLICK = "Thought: Fetch the file.\nAction: click(start_box='(50,30)')"
_DONE = "Thought: Done.\nAction: finished(content='ok')"


def test_a_late_download_is_recorded_on_the_click_that_started_it(
    tmp_path: Path, site: Any
) -> None:
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
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "ownloop",
                "--store",
                str(store),
                "record",
                "uitars",
                "--tasks",
                str(tasks),
                "--base",
                site.base,
                "--endpoint",
                url,
                "--model",
                "m",
                "--settle",
                "1.5",
                "--retries",
                "0",
                "--run",
                "d1",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
    assert result.returncode == 0, (result.stdout, result.stderr)
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
    replay = subprocess.run(
        [
            sys.executable,
            "-m",
            "ownloop",
            "--store",
            str(store),
            "replay",
            "late",
            "--execute",
            "ops",
            "--settle",
            "1.5",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert replay.returncode == 0, (replay.stdout, replay.stderr)
    child = json.loads(replay.stdout)["child"]["session_id"]
    acted_again = [
        event
        for event in open_store(store).session_events(child)
        if isinstance(event, BrowserActed)
    ]
    downloads = [e.download for e in acted_again if e.download]
    assert downloads == [clicks[0]["download"]], acted_again
