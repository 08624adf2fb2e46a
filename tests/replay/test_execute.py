"""``ownloop replay --execute ops|actions|responses``: real Chromium, MiniWoB, the expert.

A session recorded with the expert is re-executed in a fresh browser; each mode must reproduce the
reward with every step the same as recorded, and write a child session linked to its parent.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from ownloop.agents import make_agent
from ownloop.modelserver import ModelServer, Reply
from ownloop.store import open_store
from ownloop.store.events import Scroll
from tests.replay.conftest import Live, Recorded, invoke

pytestmark = pytest.mark.browser


def _rows(store: Path, query: str) -> list[tuple]:
    return open_store(store).sql(query).rows


@pytest.mark.parametrize("mode", ["ops", "actions", "responses"])
def test_execute_reproduces_the_reward_with_every_step_identical(
    mode: str, recorded: Recorded, store_copy: Path, expert: Live
) -> None:
    parent = recorded.sessions["enter-text"]
    before = expert.calls()
    out = invoke(store_copy, "replay", parent, "--execute", mode, "--settle", "0.1")
    assert "steps identical: 4/4" in out and "first divergent step: none" in out, out
    assert "parent: finished, pass 1.00 (miniwob)" in out, out
    assert "child:  finished, pass 1.00 (miniwob)" in out, out
    assert expert.calls() == before  # no request reached the model
    child, status, passed, mode_seen, parent_seen, run_id = _rows(
        store_copy,
        "select session_id, status, passed, replay_mode, parent_session_id, run_id "
        f"from sessions where parent_session_id = '{parent}'",
    )[0]
    assert (status, passed, mode_seen, parent_seen, run_id) == (
        "finished",
        True,
        mode,
        parent,
        "rec",
    )
    assert child in out
    fidelity = _rows(
        store_copy,
        "select step, diverged, url_equal, parent_session_id "
        f"from fidelity where session_id = '{child}' order by step",
    )
    assert fidelity == [(step, False, True, parent) for step in (1, 2, 3, 4)]
    elements = _rows(
        store_copy,
        "select step, element_equal from fidelity "
        f"where session_id = '{child}' and element_equal is not null order by step",
    )
    assert elements == [(1, True), (3, True)]  # the two clicks met the same elements
    reward = json.loads(
        _rows(
            store_copy,
            f"select value from evidence where name = 'miniwob_reward' and session_id = '{child}'",
        )[0][0]
    )
    assert reward["raw_reward"] == 1
    served = _rows(store_copy, f"select served_by from model_calls where session_id = '{child}'")
    if mode == "responses":
        assert len(served) == 4 and all(row[0].startswith("cassette:") for row in served)
    else:
        assert served == []
    ops = _rows(store_copy, f"select count(*) from effects where session_id = '{child}' and ok")[0][
        0
    ]
    assert ops == 3  # click, type, click


# A tall page of 150 px bands: scrolling 250 px instead of 500 shows other bands.
STRIPES = "data:text/html," + quote(
    "<body style='margin:0;height:9000px;background:repeating-linear-gradient("
    "rgb(255,255,255) 0 150px,rgb(20,20,20) 150px 300px)'>Stripes</body>"
)
SCROLL_TASKS = [
    {"task_id": "scroll-page", "prompt": "Scroll down the page, then stop.", "start": STRIPES}
]


def _scroll_then_finish(request: dict) -> Reply:
    agent = make_agent("uitars")
    turns = sum(1 for message in request["messages"] if message["role"] == "assistant")
    if turns == 0:
        return Reply(
            agent.render("I scroll down.", [Scroll(direction="down", x=640, y=400)], (1280, 800))
        )
    return Reply("Thought: Scrolled.\nAction: finished(content='done')")


def test_a_changed_scroll_step_diverges_at_the_step_after_the_scroll(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(SCROLL_TASKS))
    store = tmp_path / "store"
    with ModelServer(_scroll_then_finish) as url:
        invoke(
            store,
            "record",
            "uitars",
            "--tasks",
            str(tasks),
            "--endpoint",
            url,
            "--model",
            "scripted",
            "--run",
            "s",
            "--settle",
            "0.3",
        )
    parent = _rows(store, "select session_id from sessions")[0][0]
    same = invoke(store, "replay", parent, "--execute", "actions", "--settle", "0.3")
    assert "steps identical: 2/2" in same, same
    out = invoke(
        store, "replay", parent, "--execute", "actions", "--settle", "0.3", "-o", "notch_px=50"
    )
    assert "steps identical: 1/2" in out and "first divergent step: 2" in out, out
    child = _rows(
        store,
        "select session_id from sessions where parent_session_id is not null "
        "order by started_at desc limit 1",
    )[0][0]
    wheel = _rows(
        store, f"select sum((operation ->> 'dy')::double) from effects where session_id = '{child}'"
    )[0][0]
    assert wheel == 250  # 5 notches of 50 px, where the recording scrolled 500
    first = _rows(
        store,
        f"select first_divergent_step, pixel_diff > 0.01 from fidelity "
        f"where session_id = '{child}' and step = 2",
    )
    assert first == [(2, True)]
