"""Guarded replay on a changed site: a session recorded on the test site's layout a replays on
layout b (the same pages, elements moved and reordered, same names) with ``--base``.

``retarget`` finds each recorded field and button again and earns the same grade; ``ignore``
clicks where the elements were and fails; ``stop`` ends at the first moved element and names it.
Real Chromium, the real CLI, a scripted model over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from click.testing import CliRunner

from ownloop.agents import make_agent
from ownloop.cli import cli
from ownloop.modelserver import ModelServer, Reply
from ownloop.store import open_store
from ownloop.store.events import Click, TypeText
from tests.replay.conftest import invoke
from tests.site.server import SiteServer, start_site

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GRADER = 'json:/_admin/record:$.record:eq:{"title": "Quarterly", "amount": "42"}'


class Sites(NamedTuple):
    a: SiteServer
    b: SiteServer


class Recorded(NamedTuple):
    store: Path
    session: str


@pytest.fixture(scope="module")
def sites() -> Iterator[Sites]:
    a, b = start_site("a"), start_site("b")
    yield Sites(a, b)
    a.stop()
    b.stop()


def _centres(chromium: Any, base: str) -> dict[str, tuple[float, float]]:
    """Where the form's fields and button are drawn on a site (fonts differ between machines)."""
    from ownloop.world.browser import BrowserSession

    session = BrowserSession(chromium, (1280, 800), settle_s=0)
    try:
        session.goto(base + "/_admin/session-flags")
        session.goto(base + "/form")
        found = session.evaluate(
            "() => Object.fromEntries(['title', 'amount', 'save'].map((id) => {"
            "const r = document.getElementById(id).getBoundingClientRect();"
            "return [id, [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]]; }))"
        )
    finally:
        session.close()
    return {key: (float(x), float(y)) for key, (x, y) in found.items()}


def _scripted(centres: dict[str, tuple[float, float]]) -> Any:
    agent = make_agent("uitars")
    plan = [
        Click(x=centres["title"][0], y=centres["title"][1]),
        TypeText(text="Quarterly"),
        Click(x=centres["amount"][0], y=centres["amount"][1]),
        TypeText(text="42"),
        Click(x=centres["save"][0], y=centres["save"][1]),
    ]

    def reply(request: dict[str, Any]) -> Reply:
        turns = sum(1 for message in request["messages"] if message["role"] == "assistant")
        if turns < len(plan):
            return Reply(agent.render("Next.", [plan[turns]], (1280, 800)))
        return Reply("Thought: Saved.\nAction: finished(content='saved')")

    return reply


@pytest.fixture(scope="module")
def recorded(sites: Sites, chromium: Any, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    folder = tmp_path_factory.mktemp("site")
    tasks = folder / "tasks.json"
    tasks.write_text(
        json.dumps(
            {
                "setup": ["{BASE}/_admin/session-flags"],
                "capture": ["{BASE}/_admin/record"],
                "tasks": [
                    {
                        "task_id": "new-record",
                        "prompt": "Save a record: Quarterly, 42",
                        "start": "{BASE}/form",
                        "grader": GRADER,
                    }
                ],
            }
        )
    )
    store = folder / "store"
    with ModelServer(_scripted(_centres(chromium, sites.a.base))) as url:
        invoke(
            store,
            "record",
            "uitars",
            "--tasks",
            str(tasks),
            "--base",
            sites.a.base,
            "--endpoint",
            url,
            "--model",
            "scripted",
            "--run",
            "site",
            "--settle",
            "0.1",
        )
    ((session, passed),) = open_store(store).sql("select session_id, passed from sessions").rows
    assert passed is True
    return Recorded(store, session)


def _rows(store: Path, query: str) -> list[tuple[Any, ...]]:
    return open_store(store).sql(query).rows


def _child(store: Path) -> str:
    return _rows(
        store,
        "select session_id from sessions where parent_session_id is not null "
        "order by started_at desc limit 1",
    )[0][0]


@pytest.mark.parametrize("mode", ["ops", "actions"])
def test_retarget_on_the_other_layout_earns_the_same_grade(
    recorded: Recorded, sites: Sites, mode: str
) -> None:
    out = invoke(
        recorded.store,
        "replay",
        recorded.session,
        "--execute",
        mode,
        "--base",
        sites.b.base,
        "--on-diverge",
        "retarget",
        "--settle",
        "0.1",
    )
    assert "child:  finished, pass 1.00 (json:" in out, out
    assert "operations: 0 exact, 2 same_target, 3 retargeted, 0 diverged, 0 failed" in out, out
    assert (
        "step 1 op 0: input 'Title' at (" in out
        and "div 'Records, version b' is there instead; re-targeted (name_role)" in out
    ), out
    child = _child(recorded.store)
    checks = _rows(
        recorded.store,
        "select step, idx, passed, on_diverge, match, rung, "
        f"recorded_name, found_name from guard_checks where session_id = '{child}' "
        "and \"check\" = 'element' order by step, idx",
    )
    assert checks == [
        (1, 0, False, "retarget", "name_role", "retargeted", "Title", "Title"),
        (3, 0, False, "retarget", "name_role", "retargeted", "Amount", "Amount"),
        (5, 0, False, "retarget", "name_role", "retargeted", "Save", "Save"),
    ]
    rungs = _rows(
        recorded.store,
        "select step, rung, exact, same_target, retargeted, "
        f"diverged_ops, failed from fidelity where session_id = '{child}' "
        "and rung is not null order by step",
    )
    assert rungs == [
        (1, "retargeted", 0, 0, 1, 0, 0),
        (2, "same_target", 0, 1, 0, 0, 0),
        (3, "retargeted", 0, 0, 1, 0, 0),
        (4, "same_target", 0, 1, 0, 0, 0),
        (5, "retargeted", 0, 0, 1, 0, 0),
    ]
    # The child's task points at the other deployment; the text went to the re-found fields.
    start = _rows(
        recorded.store,
        f"select task ->> 'start_url' from session_started where session_id = '{child}'",
    )[0][0]
    assert start == sites.b.base + "/form"


def test_ignore_on_the_other_layout_clicks_the_old_points_and_fails(
    recorded: Recorded, sites: Sites
) -> None:
    out = invoke(
        recorded.store,
        "replay",
        recorded.session,
        "--execute",
        "ops",
        "--base",
        sites.b.base,
        "--on-diverge",
        "ignore",
        "--settle",
        "0.1",
    )
    assert "child:  finished, fail 0.00 (json:" in out, out
    assert "3 diverged" in out and "acted at the recorded point" in out, out


def test_stop_on_the_other_layout_stops_at_the_first_moved_element(
    recorded: Recorded, sites: Sites
) -> None:
    out = invoke(
        recorded.store,
        "replay",
        recorded.session,
        "--execute",
        "ops",
        "--base",
        sites.b.base,
        "--on-diverge",
        "stop",
        "--settle",
        "0.1",
    )
    assert "child:  error, fail 0.00 (json:" in out, out
    assert "error: stopped at step 1, operation 0: input 'Title' at (" in out, out
    child = _child(recorded.store)
    steps, ops = _rows(
        recorded.store,
        "select steps, (select count(*) from effects e where "
        f"e.session_id = s.session_id) from sessions s where session_id = '{child}'",
    )[0]
    assert (steps, ops) == (1, 0)  # nothing was clicked


def test_the_same_layout_replays_exactly_under_every_policy(
    recorded: Recorded, sites: Sites
) -> None:
    out = invoke(
        recorded.store,
        "replay",
        recorded.session,
        "--execute",
        "ops",
        "--on-diverge",
        "stop",
        "--settle",
        "0.1",
    )
    assert "child:  finished, pass 1.00 (json:" in out, out
    assert "operations: 5 exact, 0 same_target, 0 retargeted, 0 diverged, 0 failed" in out, out


def test_seed_needs_a_miniwob_session(recorded: Recorded) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            str(recorded.store),
            "replay",
            recorded.session,
            "--execute",
            "ops",
            "--seed",
            "3",
        ],
    )
    assert result.exit_code == 1
    assert result.output == (
        f"Error: --seed replays a MiniWoB session on another seed; session {recorded.session} "
        "is from tasks:tasks.json: use --base URL for another deployment\n"
    )
