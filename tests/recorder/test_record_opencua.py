"""``ownloop record opencua`` end to end: real Chromium at 1920x1080, MiniWoB, the expert over HTTP
answering in OpenCUA's grammar (## Thought/Action/Code, pyautogui code, 1932x1092 model space).

A session that earns reward > 0 proves the chain: prompt, history, the whitelist interpreter,
the qwen25 coordinate mapping, translation and execution. Then ``ownloop replay --execute
responses`` feeds the recorded responses back and must earn the same rewards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store

pytestmark = pytest.mark.browser

SIX = "click-button,click-link,enter-text,focus-text,click-checkboxes,login-user"


@pytest.fixture(scope="module")
def expert() -> Iterator[str]:
    with make_server("miniwob", "opencua") as url:
        yield url


def _invoke(store: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _rows(store: Path, sql: str) -> list[tuple]:
    return open_store(store).sql(sql).rows


def test_six_task_types_finish_with_reward_then_replay_reproduces_them(
    tmp_path: Path, expert: str
) -> None:
    out = _invoke(
        tmp_path,
        "record",
        "opencua",
        "--model",
        "expert",
        "--settle",
        "0.1",
        "--suite",
        f"miniwob:{SIX}",
        "--endpoint",
        expert,
        "--run",
        "oc",
        "--workers",
        "2",
        "-o",
        "pause=0",
    )
    assert "6 finished" in out, out
    rows = _rows(
        tmp_path,
        "select task_id, status, score, agent, session_id, steps "
        "from sessions where run_id = 'oc' order by task_id",
    )
    assert sorted(r[0].rsplit("-", 1)[0] for r in rows) == sorted(SIX.split(","))
    assert all(r[1:4] == ("finished", 1.0, "opencua") for r in rows), rows
    # OSWorld's loop settings reached the wire and the journal.
    calls = _rows(
        tmp_path,
        "select min(temperature), max(temperature), min(top_p), max(max_tokens) from model_calls",
    )
    assert calls == [(0.0, 0.0, 0.9, 2048)]
    shots = _rows(tmp_path, "select distinct width, height from screenshots")
    assert shots == [(1920, 1080)]
    clicks = _rows(
        tmp_path, "select count(*), min(model_x > x) from actions where kind = 'click' and x > 0"
    )
    assert clicks[0][0] >= 6 and clicks[0][1]  # model space (1932 wide) is wider than the page
    source = _rows(tmp_path, "select distinct prompt_source from runs")
    assert source == [("built-in",)] or source[0][0].startswith("released:")

    # login-user takes 6 steps: older steps are merged into one history message, so the
    # expert (and the replay) must count steps by their headings, not by assistant messages.
    session = next(r[4] for r in rows if r[0].startswith("login-user"))
    assert next(r[5] for r in rows if r[0].startswith("login-user")) >= 5
    replayed = _invoke(tmp_path, "replay", session, "--execute", "responses", "--settle", "0.1")
    assert "child:  finished, pass 1.00 (miniwob)" in replayed, replayed
    assert "first divergent step: none" in replayed, replayed
