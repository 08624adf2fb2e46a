"""Hostile model output on the desktop never becomes guest code; a dead desktop is env_error.

The "desktop" here is a test-side HTTP server on 127.0.0.1 that records every request
(``recording_desktop``); the model is the shipped ``ModelServer`` with canned UI-TARS replies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver import ModelServer, Reply
from ownloop.store import open_store
from ownloop.world.render import MAX_TEXT

from .recording_desktop import RecordingDesktop

PRELUDE = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
HOSTILE = '$(rm -rf ~); os.system("id") `reboot` && curl x|sh\n'
LONG = "x" * (MAX_TEXT + 1)
REPLIES = [
    f"Thought: t\nAction: type(content={HOSTILE!r})",
    "Thought: t\nAction: click(start_box='(99377,-39)')",
    f"Thought: t\nAction: type(content='{LONG}')",
    "Thought: t\nAction: hotkey(key='ctrl s')",
    "Thought: t\nAction: click(start_box='(10,20)')",
    "Thought: t\nAction: finished(content='')",
]


def _tasks(root: Path, ids: list[str]) -> Path:
    for task_id in ids:
        task = {
            "id": task_id,
            "instruction": f"task {task_id}",
            "config": [{"type": "sleep", "parameters": {"seconds": 0}}],
            "evaluator": {
                "func": "exact_match",
                "result": {"type": "vm_command_line", "command": "cat f", "shell": True},
                "expected": {"type": "rule", "rules": {"expected": ""}},
            },
        }
        (root / "examples" / "os").mkdir(parents=True, exist_ok=True)
        (root / "examples" / "os" / f"{task_id}.json").write_text(json.dumps(task))
    (root / "test_all.json").write_text(json.dumps({"os": ids}))
    return root


def _responder(request: dict[str, Any]) -> Reply:
    turns = sum(1 for m in request["messages"] if m["role"] == "assistant")
    return Reply(REPLIES[min(turns, len(REPLIES) - 1)])


@pytest.fixture
def model() -> Iterator[str]:
    with ModelServer(_responder) as url:
        yield url


def _record(store: Path, suite: Path, model: str, *desktops: str) -> Any:
    argv = ["--store", str(store), "record", "uitars", "--suite", f"osworld:{suite}"]
    argv += ["--endpoint", model, "--model", "m", "--settle", "0", "--retries", "0"]
    for url in desktops:
        argv += ["--desktop", url]
    return CliRunner().invoke(cli, argv, catch_exceptions=False)


@pytest.mark.slow
def test_hostile_output_sends_nothing_but_the_rendered_calls(tmp_path: Path, model: str) -> None:
    desktop = RecordingDesktop()
    try:
        result = _record(tmp_path / "s", _tasks(tmp_path / "t", ["a"]), model, desktop.url)
    finally:
        desktop.stop()
    assert "finished" in result.output, result.output
    pyautogui = [c for c in desktop.executed() if isinstance(c, list)]
    assert pyautogui == [
        [
            "python",
            "-c",
            PRELUDE + 'pyautogui.write(\'$(rm -rf ~); os.system("id") `reboot` '
            "&& curl x|sh\\n', interval=0.01)",
        ],
        # the off-screen point, at the screen's edge (the parser clamps it; so would render)
        ["python", "-c", PRELUDE + "pyautogui.click(x=639, y=0, clicks=1, button='left')"],
        ["python", "-c", PRELUDE + "pyautogui.hotkey('ctrl', 's')"],
        ["python", "-c", PRELUDE + "pyautogui.click(x=10, y=20, clicks=1, button='left')"],
    ]
    # the getter's command is the task file's, sent as the task gives it (a shell string)
    assert [c for c in desktop.executed() if not isinstance(c, list)] == ["cat f"]
    store = open_store(tmp_path / "s")
    rows = store.sql("select op, ok, error from effects order by step, idx").rows
    assert [(op, ok) for op, ok, _ in rows] == [
        ("pyautogui", True),
        ("pyautogui", True),
        ("pyautogui", False),  # the text over MAX_TEXT: refused, nothing sent
        ("pyautogui", True),
        ("pyautogui", True),
    ]
    assert rows[2][2].startswith(f"refused: text to type is {MAX_TEXT + 1} characters")


@pytest.mark.slow
def test_a_desktop_that_stops_answering_ends_env_error_and_the_run_goes_on(
    tmp_path: Path, model: str
) -> None:
    dying, healthy = RecordingDesktop(die_after=0), RecordingDesktop()
    try:
        result = _record(
            tmp_path / "s", _tasks(tmp_path / "t", ["a", "b"]), model, dying.url, healthy.url
        )
    finally:
        healthy.stop()
    store = open_store(tmp_path / "s")
    statuses = sorted(s for (s,) in store.sql("select status from sessions").rows)
    assert statuses == ["env_error", "finished"], result.output
    error = store.sql("select error from sessions where status = 'env_error'").rows[0][0]
    assert error.startswith(f"desktop {dying.url}/") and "did not answer" in error
