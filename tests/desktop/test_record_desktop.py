"""The desktop suite (tests/desktop/osworld) recorded end to end on the test desktop.

UI-TARS and OpenCUA, answered by the scripted desktop expert (``serve-model --expert desktop``),
record every task through ``ownloop serve-desktop`` with the desktop world: all pass; each
session regrades offline to the same grade with the desktop stopped. One recording per agent,
shared by the module's tests; and one of a single task repeated three times, whose recorder is
killed with -9 mid-run and resumed, for resume, ``--repeat`` and the audits.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver import ModelServer, Reply
from ownloop.modelserver.chat import steps_taken
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


def test_uitars_on_a_desktop_runs_osworlds_loop_settings(recorded: dict[str, Path]) -> None:
    # OSWorld's uitars15_v1: max_tokens 1000, frequency_penalty 1, thoughts in Chinese, at most
    # 5 screenshots, temperature 0 and top_p 0.9 (the browser keeps the user's runner's 500/0).
    store = open_store(recorded["uitars"])
    calls = store.sql(
        "select distinct max_tokens, frequency_penalty, temperature, top_p from model_calls "
        "where attempt = 1"
    ).rows
    assert calls == [(1000, 1.0, 0.0, 0.9)]
    assert store.sql("select max(images) from model_calls").rows[0][0] <= 5
    (prompt,) = store.sql(
        "select messages -> '$[1].parts[0].text' ->> '$' from model_calls limit 1"
    ).rows[0]
    assert "- Use Chinese in `Thought` part." in prompt
    (settings,) = store.sql("select agent_settings from run_started").rows[0]
    recorded_settings = json.loads(settings)
    assert recorded_settings["max_tokens"] == 1000
    assert recorded_settings["language"] == "Chinese"


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
        "select session_id from sessions where task_id = 'term-create-file'"
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
    result.txt per example, as show_result.py reads them), and ``import`` reads it back under
    the same task ids: ``compare`` of the recorded run and the imported one shares every task,
    and ``--by-domain`` lists each domain."""
    from ownloop.replay.fold import fold

    old = open_store(recorded[agent])
    (run_id,) = old.sql("select run_id from runs").rows[0]
    out = tmp_path / "out"
    argv = ["--store", str(recorded[agent]), "export", "--run", run_id, "--format", "osworld"]
    result = CliRunner().invoke(cli, [*argv, "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    scores = [float(p.read_text()) for p in out.glob("pyautogui/screenshot/*/*/*/result.txt")]
    assert scores == [1.0] * len(TASKS)
    # into a copy of the recorded store (its journal and blobs: the index is rebuilt), so the
    # recorded run and the imported one sit side by side
    both = tmp_path / "both"
    shutil.copytree(recorded[agent], both, ignore=shutil.ignore_patterns("index.duckdb*"))
    argv = ["--store", str(both), "import", str(out), "--format", "osworld", "--run", "back"]
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"as {agent} (100%)" in result.output, result.output
    new = open_store(both)
    # recorded and imported alike: task id the example's id, suite osworld:DOMAIN, so the
    # export puts each in OSWorld's DOMAIN/ID folder and the import names it back the same
    query = (
        "select s.suite, u.task_id, u.session_id, u.score from unit_outcomes u "
        "join sessions s using (session_id) where u.run_id = $run order by u.task_id"
    )
    before = old.sql(query, {"run": run_id}).rows  # the run's own sessions, not the replays
    after = new.sql(query, {"run": "back"}).rows
    assert sorted(f"{s.removeprefix('osworld:')}/{t}" for s, t, _, _ in before) == sorted(
        p.parent.relative_to(p.parents[2]).as_posix()
        for p in out.glob("pyautogui/screenshot/*/*/*/result.txt")
    )
    assert [(s, t, x) for s, t, _, x in before] == [(s, t, x) for s, t, _, x in after]
    for (_, _, a, _), (_, _, b, _) in zip(before, after, strict=True):
        one, two = fold(old.session_events(a), a), fold(new.session_events(b), b)
        assert [s.response for s in one.steps] == [s.response for s in two.steps]
        assert [s.actions for s in one.steps] == [s.actions for s in two.steps]
        shots_one = [old.get_blob(s.screenshot.sha256) for s in one.steps if s.screenshot]
        shots_two = [new.get_blob(s.screenshot.sha256) for s in two.steps if s.screenshot]
        assert shots_one == shots_two and shots_one
    argv = ["--store", str(both), "compare", run_id, "back"]
    result = CliRunner().invoke(cli, [*argv, "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    tasks = json.loads(result.output)["tasks"]
    assert sorted(t["task_id"] for t in tasks if t["n_a"] and t["n_b"]) == sorted(
        t.id for t in TASKS
    )
    result = CliRunner().invoke(cli, [*argv, "--by-domain"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("domain ")]
    assert lines == [
        "domain chrome: 1 tasks; A 1/1 1.00; B 1/1 1.00; 0 flipped",
        "domain os: 4 tasks; A 4/4 1.00; B 4/4 1.00; 0 flipped",
        "domain text_editor: 1 tasks; A 1/1 1.00; B 1/1 1.00; 0 flipped",
    ]


# ------------------------------------------------------- kill -9, resume, --repeat, the audits

ONE_TASK = "term-create-file"
_PLAN = next(t for t in TASKS if t.id == ONE_TASK).steps


class _HeldAfterOneEnding:
    """The desktop expert, until it has given a session its last answer; every later answer
    waits for ``release()``: the recorder is killed with a session in flight."""

    def __init__(self, agent: str) -> None:
        self.inner = DesktopExpert(agent)
        self.closed, self.held, self.opened = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )

    def __call__(self, request: dict[str, Any]) -> Reply:
        if self.closed.is_set():
            self.held.set()
            self.opened.wait(300)
        reply = self.inner(request)
        if steps_taken(request) >= len(_PLAN) - 1:  # the plan's ending: one session done
            self.closed.set()
        return reply

    def release(self) -> None:
        self.opened.set()


class Repeated(NamedTuple):
    store: Path
    first: str  # the killed recorder's output
    again: str  # the same command's, run again


def _journal_count(store: Path, marker: bytes) -> int:
    return sum(p.read_bytes().count(marker) for p in (store / "journal").glob("*.jsonl"))


def _until(what: str, ready: Any, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > end:
            raise AssertionError(f"no {what} after {seconds:g} s")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def repeated(desktop_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Repeated]:
    """One task, ``--repeat 3`` on two desktops (repeats of one task at once): the recorder
    (a process of its own) is killed with -9 once a session ended and another waits for its
    model's answer, then the same command runs again."""
    from ownloop.desktopserver import Desktop, DesktopServer

    store = tmp_path_factory.mktemp("desktop-repeat")
    gate = _HeldAfterOneEnding("opencua")
    with DesktopServer(Desktop(DESKTOP_SIZE)) as second, ModelServer(gate) as model:
        command = ["record", "opencua", "--suite", f"osworld:{SUITE}#os/{ONE_TASK}"]
        command += ["--desktop", desktop_server.url, "--desktop", second, "--reset", "server"]
        command += ["--endpoint", model, "--model", "m", "--run", "k", "--repeat", "3"]
        command += ["--settle", "0.3", "--max-steps", "8"]
        log = store.parent / "killed.log"
        with log.open("w") as output:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ownloop", "--store", str(store), *command],
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                _until("ended session", lambda: _journal_count(store, b'"session_ended"') >= 1)
                _until("held model call", gate.held.is_set)
            finally:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                gate.release()
        again = CliRunner().invoke(cli, ["--store", str(store), *command], catch_exceptions=False)
    assert again.exit_code == 0, again.output
    yield Repeated(store, log.read_text(), again.output)


def test_kill_9_mid_run_on_desktops_then_the_same_command_records_every_repeat_once(
    repeated: Repeated,
) -> None:
    store = open_store(repeated.store)
    rows = store.sql(
        "select repeat, status, counted from sessions where run_id = 'k' "
        "and parent_session_id is null order by repeat, started_at"
    ).rows
    statuses = {r: [s for q, s, _ in rows if q == r] for r in (1, 2, 3)}
    assert "crashed" in sum(statuses.values(), []), rows  # the session in flight at the kill
    assert all(s.count("finished") == 1 and s[-1] == "finished" for s in statuses.values()), rows
    assert [r for r, _, counted in rows if counted] == [1, 2, 3], rows
    assert "tasks were done already" in repeated.again, repeated.again


def test_each_repeat_is_its_own_session_on_a_reset_desktop_and_the_scores_count_repeats(
    repeated: Repeated,
) -> None:
    store = open_store(repeated.store)
    units = store.sql(
        "select task_id, repeat, passed from scored_units where run_id = 'k' order by repeat"
    ).rows
    assert units == [(ONE_TASK, 1, True), (ONE_TASK, 2, True), (ONE_TASK, 3, True)]
    # each counted session reset its desktop first, and ran its own setup (never another's:
    # two repeats of the task ran at once, one on each desktop)
    evidence = store.sql(
        "select e.session_id, e.name, e.value::varchar from evidence e join scored_units u "
        "using (session_id) where u.run_id = 'k' and e.name in ('desktop_reset', 'osworld_setup')"
    ).rows
    resets = [json.loads(v) for _, n, v in evidence if n == "desktop_reset"]
    assert len(resets) == 3
    assert all(r["command"] == "server" and '"success"' in r["answer"] for r in resets)
    setups = [json.loads(v) for _, n, v in evidence if n == "osworld_setup"]
    config = json.loads((SUITE / "examples" / "os" / f"{ONE_TASK}.json").read_text())["config"]
    assert [len([s for s in setup if s["where"] == "config"]) for setup in setups] == [
        len(config)
    ] * 3
    scores = store.sql(
        "select tasks, sessions, score from run_scores where run_id = 'k' and method = 'wilson'"
    ).rows
    assert scores == [(1, 3, 1.0)]
    pass_k = store.sql(
        "select n, k, pass_at_k from task_outcomes where run_id = 'k' and k = 3"
    ).rows
    assert pass_k == [(3, 3, 1.0)]


def test_audit_noop_grades_the_untouched_desktop_and_audit_blind_replays_the_ops(
    repeated: Repeated, desktop_server: Any
) -> None:
    where = ["--store", str(repeated.store), "audit"]
    desktop = ["--run", "k", "--desktop", desktop_server.url, "--reset", "server"]
    refused = CliRunner().invoke(cli, [*where, "noop", "--run", "k"])
    assert refused.output.strip().splitlines()[-1] == (
        "Error: run k has desktop tasks: give --desktop URL (and --reset CMD) to set them up on"
    )
    result = CliRunner().invoke(cli, [*where, "noop", *desktop], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"{ONE_TASK} untouched: score 0" in result.output
    assert "1 null-agent replays run now; pass untouched (score > 0.2 or passed with no " in (
        result.output
    )
    assert "action): none" in result.output
    result = CliRunner().invoke(cli, [*where, "blind", *desktop], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"{ONE_TASK} blind on the reset desktop: pass" in result.output
    # a desktop task has one start state: the recorded operations replayed blind solve it
    assert f"1 blind replays run now; non-discriminative: {ONE_TASK}" in result.output
    store = open_store(repeated.store)
    children = store.sql(
        "select c.audit, s.steps, s.status, s.passed from session_started c join sessions s "
        "using (session_id) where c.parent_session_id is not null order by c.audit"
    ).rows
    assert children == [("blind", len(_PLAN), "finished", True), ("noop", 0, "no_action", False)]
    again = CliRunner().invoke(cli, [*where, "blind", *desktop], catch_exceptions=False)
    assert "0 blind replays run now" in again.output  # the verdict is in the store


def test_the_dashboard_shows_a_desktop_session_at_desktop_size_with_its_pointer_marks(
    recorded: dict[str, Path], chromium: Any
) -> None:
    from ownloop.view.server import ViewServer
    from tests.view.dashboard import wait_until

    store = open_store(recorded["uitars"])
    (session_id,) = store.sql(
        "select session_id from sessions where task_id = $t and parent_session_id is null",
        {"t": ONE_TASK},
    ).rows[0]
    width, height = DESKTOP_SIZE
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        with ViewServer(store, port=0) as url:
            page.goto(f"{url}session/{session_id}")
            figure = page.locator("#step-1 figure.shot")
            assert (figure.get_attribute("data-width"), figure.get_attribute("data-height")) == (
                str(width),
                str(height),
            )
            page.locator("#step-1 .frame img").scroll_into_view_if_needed()
            wait_until(page, "document.querySelector('#step-1 .frame img')?.complete")
            natural = page.evaluate(
                "(() => { const i = document.querySelector('#step-1 .frame img');"
                " return [i.naturalWidth, i.naturalHeight]; })()"
            )
            assert natural == [width, height]
            # the expert clicks the middle of the screen: the ring sits there at natural size
            assert page.locator("#step-1 .mark-click").count() == 1
            page.click("#step-1 button.zoom")
            wait_until(page, "document.querySelector('div.zoomed img')?.complete")
            box = page.locator("div.zoomed img").bounding_box()
            assert (box["width"], box["height"]) == (width, height)
            ring = page.locator("div.zoomed .mark .ring").first.bounding_box()
            assert ring["x"] + ring["width"] / 2 == pytest.approx(box["x"] + width / 2, abs=2)
            assert ring["y"] + ring["height"] / 2 == pytest.approx(box["y"] + height / 2, abs=2)
            page.keyboard.press("Escape")
            # the typed command is labelled on step 2, where the pointer last was
            assert "greeting.txt" in (page.locator("#step-2 .mark-type").text_content() or "")
    finally:
        context.close()


def test_a_desktop_run_exports_seals_and_verifies_like_a_browser_run(
    recorded: dict[str, Path], tmp_path: Path
) -> None:
    """Everything downstream of a recording takes a desktop run (issue 27, item 7): its
    pyautogui effects and kept trees in SQL, the harness folders, ATIF, SFT records, ``show``,
    then ``seal`` and ``verify --run`` of the sealed run (on a copy: the module's store stays
    unsealed)."""
    root = tmp_path / "store"
    shutil.copytree(recorded["uitars"], root)
    store = open_store(root)
    (run_id,) = store.sql("select run_id from runs").rows[0]
    n = len(TASKS)
    kept = store.sql(
        "select count(distinct e.session_id), count(distinct s.a11y) from effects e "
        "join screenshots s using (session_id) join recorded r using (session_id) "
        "where e.op = 'pyautogui' and r.run_id = ?",
        [run_id],
    ).rows[0]
    # every session's kept trees; operations in all but the infeasible task's (it answers FAIL)
    assert kept[0] == n - 1 and kept[1] >= n - 1
    base = ["--store", str(root)]

    def ok(*argv: str) -> str:
        result = CliRunner().invoke(cli, [*base, *argv], catch_exceptions=False)
        assert result.exit_code == 0, (argv, result.output)
        return result.output

    ok("export", "--run", run_id, "--format", "session-dir", "--out", str(tmp_path / "dirs"))
    assert len([p for p in (tmp_path / "dirs").rglob("*") if p.is_dir()]) >= n
    ok("export", "--run", run_id, "--format", "atif", "--out", str(tmp_path / "atif"))
    trajectories = list((tmp_path / "atif").rglob("*.json"))
    assert len(trajectories) >= n
    steps = [json.loads(p.read_text()).get("steps", []) for p in trajectories]
    assert sum(1 for s in steps if s) >= n
    ok("export", "--run", run_id, "--format", "sft", "--out", str(tmp_path / "sft"))
    records = [
        line for p in (tmp_path / "sft").rglob("*.jsonl") for line in p.read_text().splitlines()
    ]
    assert len(records) >= n  # one a step of every passed session
    (session_id,) = store.sql(
        "select session_id from sessions where task_id = 'term-create-file'"
    ).rows[0]
    assert "pyautogui" in ok("show", session_id)
    sealed = ok("seal", "--run", run_id)
    assert "fingerprint" in sealed.lower(), sealed
    assert "0 errors" in ok("verify", "--run", run_id)


def test_a_desktop_sessions_actions_reexecuted_on_a_reset_desktop_reproduce_its_reward(
    recorded: dict[str, Path], desktop_server: Any
) -> None:
    # --execute actions: the recorded agent-neutral actions rendered again into pyautogui calls.
    store = open_store(recorded["opencua"])
    (session_id,) = store.sql(
        "select session_id from sessions where task_id = 'term-create-file'"
    ).rows[0]
    argv = ["--store", str(recorded["opencua"]), "replay", session_id, "--execute", "actions"]
    argv += ["--desktop", desktop_server.url, "--reset", "server", "--settle", "0.3"]
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "child:  finished, pass 1.00 (osworld)" in result.output
