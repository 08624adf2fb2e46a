"""The desktop suite (tests/desktop/osworld) recorded end to end on the test desktop.

UI-TARS and OpenCUA, answered by the scripted desktop expert (``serve-model --expert desktop``),
record every task through ``ownloop serve-desktop`` with the desktop world: all pass; each
session regrades offline to the same grade with the desktop stopped. One recording per agent,
shared by the module's tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver import ModelServer
from ownloop.modelserver.desktop_expert import TASKS, DesktopExpert
from ownloop.store import open_store
from ownloop.world.cassette import CassetteDesktop, cassette_blob
from tests.desktop.fixtures import DESKTOP_SIZE

SUITE = Path(__file__).with_name("osworld")
pytestmark = [pytest.mark.desktop, pytest.mark.slow]


@pytest.fixture(scope="module")
def recorded(
    desktop_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Path]]:
    # Two desktops, one worker each: the session's and one of the module's own, so each run's
    # tasks go two at a time (and the desktop pool hands both out).
    from ownloop.desktopserver import Desktop, DesktopServer

    stores = {}
    with DesktopServer(Desktop(DESKTOP_SIZE)) as second:
        for agent in ("uitars", "opencua"):
            store = tmp_path_factory.mktemp(f"desktop-{agent}")
            with ModelServer(DesktopExpert(agent)) as model:
                argv = ["--store", str(store), "record", agent, "--suite", f"osworld:{SUITE}"]
                argv += ["--desktop", desktop_server.url, "--desktop", second]
                argv += ["--reset", "server", "--a11y", "--endpoint", model, "--model", "m"]
                argv += ["--settle", "0.3", "--max-steps", "8"]
                result = CliRunner().invoke(cli, argv, catch_exceptions=False)
            assert result.exit_code == 0, result.output
            stores[agent] = store
    yield stores


@pytest.mark.parametrize("agent", ["uitars", "opencua"])
def test_every_desktop_task_passes(recorded: dict[str, Path], agent: str) -> None:
    store = open_store(recorded[agent])
    rows = store.sql("select task_id, status, passed from sessions order by task_id").rows
    assert len(rows) == len(TASKS)
    assert [r for r in rows if not r[2]] == []
    ops = store.sql("select count(*) from effects where op = 'pyautogui' and ok").rows[0][0]
    assert ops >= len(TASKS)
    shots = store.sql("select count(*) from screenshots where a11y is null").rows[0][0]
    assert shots == 0  # --a11y: every step's tree kept


@pytest.mark.parametrize("agent", ["uitars", "opencua"])
def test_each_session_regrades_offline_to_the_same_grade(
    recorded: dict[str, Path], agent: str
) -> None:
    # The desktop is not asked: regrade reads the getters' recorded output only.
    argv = ["--store", str(recorded[agent]), "regrade", "--dry-run"]
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"would regrade {len(TASKS)} of {len(TASKS)} sessions" in result.output
    assert (
        f"passed before: {len(TASKS)}   passed after: {len(TASKS)}   would flip: 0" in result.output
    )


def test_replaying_the_recorded_ops_on_a_reset_desktop_reproduces_every_reward(
    recorded: dict[str, Path], desktop_server: Any
) -> None:
    store = recorded["uitars"]
    (run_id,) = open_store(store).sql("select run_id from runs").rows[0]
    argv = ["--store", str(store), "replay", "--run", run_id, "--execute", "ops"]
    argv += ["--desktop", desktop_server.url, "--reset", "server", "--workers", "1"]
    argv += ["--settle", "0.3"]
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    n = len(TASKS)
    assert f"{n} sessions, {n} rewards reproduced, 0 not, 0 ungraded, 0 failed" in result.output


def test_a_session_replayed_against_its_own_cassette_reproduces_its_reward(
    recorded: dict[str, Path],
) -> None:
    # No desktop: the recorded exchanges answer (serve-desktop --cassette SESSION).
    store = open_store(recorded["opencua"])
    (session_id,) = store.sql(
        "select session_id from sessions where task_id = 'os/term-create-file'"
    ).rows[0]
    events = list(store.read_stream(session_id))
    cassette = CassetteDesktop(store.get_blob(cassette_blob(events, session_id)), store.get_blob)
    url = cassette.start()
    try:
        argv = ["--store", str(recorded["opencua"]), "replay", session_id]
        argv += ["--execute", "responses", "--desktop", url, "--settle", "0"]
        result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    finally:
        cassette.stop()
    assert result.exit_code == 0, result.output
    assert "child:  finished, pass 1.00 (osworld)" in result.output
    assert cassette.counts["missed"] == 0 and cassette.counts["exact"] > 0


@pytest.mark.parametrize("agent", ["uitars", "opencua"])
def test_a_desktop_run_exported_for_osworld_comes_back_with_its_steps_screens_and_scores(
    recorded: dict[str, Path], agent: str, tmp_path: Path
) -> None:
    """``export --format osworld`` of a desktop run writes OSWorld's result layout (one
    result.txt per example, as show_result.py reads them), and ``import`` reads it back."""
    from ownloop.replay.fold import fold

    old = open_store(recorded[agent])
    (run_id,) = old.sql("select run_id from runs").rows[0]
    out = tmp_path / "out"
    argv = ["--store", str(recorded[agent]), "export", "--run", run_id, "--format", "osworld"]
    result = CliRunner().invoke(cli, [*argv, "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    scores = [float(p.read_text()) for p in out.glob("pyautogui/screenshot/*/*/*/result.txt")]
    assert scores == [1.0] * len(TASKS)
    back = tmp_path / "back"
    argv = ["--store", str(back), "import", str(out), "--format", "osworld", "--run", "back"]
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"as {agent} (100%)" in result.output, result.output
    new = open_store(back)
    # a recorded task is DOMAIN/ID; it goes out in OSWorld's DOMAIN/ID folders and comes back
    # as task ID of suite osworld:DOMAIN, as every imported OSWorld run names its tasks
    before = old.sql(  # the run's own sessions: not the replays the module's other tests made
        "select task_id, session_id, score from unit_outcomes where run_id = $run order by task_id",
        {"run": run_id},
    ).rows
    after = new.sql(
        "select split_part(suite, ':', 2) || '/' || task_id, session_id, score from sessions "
        "where run_id = $run order by 1",
        {"run": "back"},
    ).rows
    assert [(t, s) for t, _, s in before] == [(t, s) for t, _, s in after]
    for (_, a, _), (_, b, _) in zip(before, after, strict=True):
        one, two = fold(old.session_events(a), a), fold(new.session_events(b), b)
        assert [s.response for s in one.steps] == [s.response for s in two.steps]
        assert [s.actions for s in one.steps] == [s.actions for s in two.steps]
        shots_one = [old.get_blob(s.screenshot.sha256) for s in one.steps if s.screenshot]
        shots_two = [new.get_blob(s.screenshot.sha256) for s in two.steps if s.screenshot]
        assert shots_one == shots_two and shots_one
