"""``ownloop record fara7b`` end to end: real Chromium at 1440x900, the expert over HTTP.

The expert answers in Fara's ``<tool_call>`` grammar with coordinates in its 1428x896 space, so a
session that earns reward > 0 proves the mapping back to the page, ``type`` (click, type, no
Enter) and the terminate answer. Replaying the recorded responses must earn the same rewards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:fara7b")]

SIX = "click-button,click-link,enter-text,focus-text,click-checkboxes,login-user"


@pytest.fixture(scope="module")
def expert() -> Iterator[str]:
    with make_server("miniwob", "fara7b") as url:
        yield url


def _invoke(store: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _rows(store: Path, sql: str) -> list[tuple]:  # type: ignore[type-arg]
    return open_store(store).sql(sql).rows


def test_six_task_types_earn_rewards_and_replay_reproduces_them(
    tmp_path: Path, expert: str
) -> None:
    out = _invoke(
        tmp_path,
        "record",
        "fara7b",
        "--model",
        "expert",
        "--settle",
        "0.1",
        "--suite",
        f"miniwob:{SIX}",
        "--endpoint",
        expert,
        "--run",
        "f1",
        "--workers",
        "2",
        "-o",
        "pause=0",
    )
    assert "6 finished" in out, out
    rows = _rows(
        tmp_path,
        "select task_id, status, score, agent from sessions where run_id = 'f1' order by task_id",
    )
    assert sorted(r[0].rsplit("-", 1)[0] for r in rows) == sorted(SIX.split(","))
    assert all(r[1:] == ("finished", 1.0, "fara7b") for r in rows), rows
    assert _rows(tmp_path, "select distinct width, height from screenshots") == [(1440, 900)]
    # Model space 1428x896: what the model wrote differs from the page point it became.
    mapped = _rows(
        tmp_path,
        "select count(*) from actions where kind = 'click' "
        "and model_x is not null and abs(x - model_x * 1440 / 1428) < 0.01 "
        "and abs(y - model_y * 900 / 896) < 0.01 and x <> model_x",
    )
    assert mapped[0][0] >= 6
    typed = _rows(tmp_path, "select count(*) from effects where op = 'keyboard.type'")
    assert typed[0][0] == 3  # enter-text once, login-user twice; never an Enter after them
    assert _rows(tmp_path, "select count(*) from effects where op = 'keyboard.press'") == [(0,)]
    started = _rows(tmp_path, "select prompt_source, agent_settings from run_started")
    assert started[0][0] == "built-in" and '"pause":0' in started[0][1].replace(" ", "")

    task_ids = [row[0] for row in rows]
    # every session of the run, two at a time, each worker reusing one browser
    _invoke(tmp_path, "replay", "--run", "f1", "--execute", "responses", "--settle", "0.1")
    replayed = _rows(
        tmp_path,
        "select task_id, status, score from sessions "
        "where replay_mode = 'responses' order by task_id",
    )
    assert [r[0] for r in replayed] == task_ids
    assert all(r[1:] == ("finished", 1.0) for r in replayed), replayed
