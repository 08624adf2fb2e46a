"""``ownloop record molmoweb`` end to end: real Chromium at 1280x720, the expert over HTTP.

The expert answers in MolmoWeb's JSON with 0-100 percent coordinates (one decimal, as in
training) and finishes with send_msg_to_user("[ANSWER] ..."), so a session with reward > 0 proves
the prompt, the step count read from "## Step N", the percent mapping, translation and the end.
Then re-parsing changes nothing and ``ownloop replay --execute responses|actions|ops`` reproduces
the reward.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:molmoweb. no clone")]

SIX = "click-button,click-link,enter-text,focus-text,click-checkboxes,login-user"


@pytest.fixture(scope="module")
def expert() -> Iterator[str]:
    with make_server("miniwob", "molmoweb") as url:
        yield url


def _cli(store: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _rows(store: Path, sql: str) -> list[tuple]:
    return open_store(store).sql(sql).rows


def test_six_task_types_finish_with_reward_then_replay_reproduces_them(
    tmp_path: Path, expert: str
) -> None:
    out = _cli(
        tmp_path,
        "record",
        "molmoweb",
        "--suite",
        f"miniwob:{SIX}",
        "--endpoint",
        expert,
        "--model",
        "expert",
        "--settle",
        "0.1",
        "--run",
        "m1",
        "--workers",
        "2",
        "--released",
        str(tmp_path / "no-clone"),
    )
    assert "6 finished" in out
    sessions = _rows(
        tmp_path,
        "select session_id, task_id, status, passed, score, answer "
        "from sessions where run_id = 'm1' order by task_id",
    )
    assert sorted(r[1].rsplit("-", 1)[0] for r in sessions) == sorted(SIX.split(","))
    assert all(r[2:5] == ("finished", True, 1.0) for r in sessions), sessions
    # The answer comes from "[ANSWER] ...": e.g. the label of the button clicked.
    answers = {r[1].rsplit("-", 1)[0]: r[5] for r in sessions}
    assert answers["focus-text"] == "" and answers["click-button"]
    assert _rows(
        tmp_path, "select min(width), max(width), min(height), max(height) from screenshots"
    ) == [(1280, 1280, 720, 720)]
    calls = _rows(
        tmp_path,
        "select count(*), min(temperature), max(temperature), min(top_p), "
        "min(max_tokens), max(images) from model_calls where error is null",
    )
    assert calls[0][0] >= 15 and calls[0][1:] == (0.7, 0.7, 0.8, 1024, 1)
    runs = _rows(tmp_path, "select agent, prompt_source from runs where run_id = 'm1'")
    assert runs == [("molmoweb", "built-in")]
    # The last request of login-user shows its past steps as text, numbered from 1.
    messages = _rows(
        tmp_path,
        "select c.messages from model_called c join sessions s "
        "using (session_id) where s.task_id like 'login-user-%' "
        "order by c.step desc limit 1",
    )[0][0]
    text = json.dumps(messages)
    assert all(f"## Step {n}" in text for n in range(1, 6)) and "keyboard_type" in text
    # Percent clicks landed on elements: every click had an element under the pointer.
    missed = _rows(
        tmp_path,
        "select count(*) from effects where op = 'mouse.click' "
        "and (element_tag is null or element_tag = '')",
    )
    assert missed == [(0,)]

    # Re-parse changes nothing; each --execute mode reproduces the reward.
    reparsed = _cli(tmp_path, "replay", "--run", "m1", "--reparse")
    assert reparsed.splitlines()[-1].startswith("0 of "), reparsed
    target = next(r[1] for r in sessions if r[1].startswith("enter-text"))
    for mode in ("responses", "actions", "ops"):
        replayed = _cli(tmp_path, "replay", target, "--execute", mode, "--settle", "0.1")
        assert "first divergent step: none" in replayed, replayed
        child = _rows(tmp_path, f"select status, score from sessions where replay_mode = '{mode}'")
        assert child == [("finished", 1.0)], (mode, child)
