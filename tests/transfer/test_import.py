"""``import_dir`` on hand-made result folders of all four agents' forms, damaged ones included."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.agents import make_agent
from ownloop.replay.fold import fold
from ownloop.store import Store, open_store
from ownloop.store.events import Click, Finish
from ownloop.transfer import import_dir
from ownloop.transfer.statuses import harness_status, ownloop_status
from tests.transfer.conftest import RAWS, VIEWPORTS, png, step_lines, summary, write_folder

AGENTS = ("uitars", "molmoweb", "fara7b", "opencua")


def _available(agent: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make_agent(agent)
    except Exception:  # noqa: BLE001 - an agent another helper has not finished yet
        return False
    return True


def _rows(store: Store, sql: str) -> list[tuple]:
    return store.sql(sql).rows


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(tmp_path / "store")


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.slow
def test_every_form_becomes_sessions_steps_calls_and_screens(
    tmp_path: Path, store: Store, agent_folder: Callable[..., Path], agent: str
) -> None:
    folder = agent_folder(tmp_path / "results", agent, harness_version="3.1")
    result = import_dir(store, tmp_path / "results", agent, argv=("ownloop", "import"))
    assert result.lines() == [
        "imported 1 session from 1 folder into run import-results: 1 finished"
    ]
    runs = _rows(store, "select run_id, agent, suite, argv from runs")
    assert runs == [("import-results", agent, "import:results", '["ownloop","import"]')]
    started = _rows(store, "select agent_settings from run_started")
    assert json.loads(started[0][0]) == {"imported": True}
    sessions = _rows(
        store,
        "select task_id, status, agent_status, answer, steps, seconds, "
        "parse_failures, score, passed, grader, start_url, viewport from sessions",
    )
    width, height = VIEWPORTS[agent]
    assert sessions == [
        (
            "task-1",
            "finished",
            "done",
            "42",
            2,
            12.5,
            1,
            1.0,
            True,
            "import",
            "http://127.0.0.1:8312",
            f"[{width},{height}]",
        )
    ]
    assert _rows(store, "select source from grades") == [("import",)]
    # Every screen, the one after the last step too, byte for byte, with the line's URL.
    session_id = _rows(store, "select session_id from sessions")[0][0]
    shots = _rows(store, "select step, sha256, width, height, url from screenshots order by step")
    assert [s[0] for s in shots] == [1, 2, 3]
    for step, sha, w, h, url in shots:
        assert store.get_blob(sha) == (folder / "screens" / f"step_{step:02d}.png").read_bytes()
        assert (w, h) == (width, height)
        has_url = agent != "fara7b" and step < 3
        assert url == ("http://127.0.0.1:8312/shop" if has_url else "")
    # One model call per response, marked as imported, without messages.
    calls = _rows(
        store,
        "select step, attempt, purpose, response, served_by, images "
        "from model_calls order by step, attempt",
    )
    first, last = RAWS[agent]
    expected = [(1, 1, "step", first, "import", 0), (2, 1, "step", last, "import", 0)]
    if agent == "uitars":  # its fails came before the raw that parsed
        expected = [
            (1, 1, "step", "I am not sure what to do.", "import", 0),
            (1, 2, "resample", first, "import", 0),
            (2, 1, "step", last, "import", 0),
        ]
    assert calls == expected
    assert _rows(store, "select step, response from steps where step < 3 order by step") == [
        (1, first),
        (2, last),
    ]
    # Fields it does not map are evidence: session fields by name, step lines whole.
    evidence = dict(
        _rows(store, "select name, cast(value as varchar) from evidence where name like 'import:%'")
    )
    assert json.loads(evidence["import:record"]) == [{"order": 7, "total": 42}]
    assert json.loads(evidence["import:log"]) == [{"path": "/cart", "method": "POST"}]
    assert json.loads(evidence["import:harness_version"]) == "3.1"
    kept = [
        json.loads(v)
        for (v,) in _rows(
            store,
            "select cast(value as varchar) from evidence where name = 'imported_step' "
            "order by source",
        )
    ]
    originals = step_lines(agent, "http://127.0.0.1:8312/shop")
    for line, original in zip(kept, originals, strict=True):
        assert line["keys"] == list(original)
        unmapped = {k: v for k, v in original.items() if k not in ("step", "url", "raw", "fails")}
        assert line["kept"] == unmapped
    # Parsed with today's agent when it loads here; else the reason is kept.
    session = fold(store.session_events(session_id), session_id)
    parses = [step.parsed for step in session.steps if step.parsed is not None]
    assert len(parses) == 2
    if _available(agent):
        assert [p.error for p in parses] == [None, None]
        click, finish = parses[0].actions[0], parses[1].actions[-1]
        assert isinstance(click, Click) and isinstance(finish, Finish)
        assert abs(click.x - width / 2) <= 2 and abs(click.y - height / 2) <= 2
        assert finish.answer is not None and "42" in finish.answer
    else:
        assert all(
            p.error.startswith(f"not parsed: agent '{agent}' is not available here") for p in parses
        )


def test_a_damaged_folder_is_imported_as_far_as_it_goes(tmp_path: Path, store: Store) -> None:
    root = tmp_path / "results"
    lines = step_lines("uitars", "http://x.test/")
    write_folder(
        root / "broken",
        summary("broken"),
        [lines[0], '{"step": 2, "raw": "Thought: cut', {**lines[1], "step": 3}],
        {1: png((1, 2, 3)), 2: png((4, 5, 6)), 4: png((7, 8, 9))},
    )
    write_folder(root / "no-summary", None, [lines[0]], {1: png((9, 9, 9))})
    (root / "no-summary" / "session.json").write_text("{not json")
    (root / "notes").mkdir()
    result = import_dir(store, root, "uitars", run_id="r")
    assert result.lines() == [
        "notes: skipped (no session.json, session_failed.json, steps.jsonl or screens/)",
        "broken: skipped steps.jsonl line 2 (not JSON), screens/step_03.png (missing)",
        "no-summary: skipped session.json (not JSON)",
        "imported 2 sessions from 2 folders into run r: 1 crashed, 1 finished",
    ]
    shots = _rows(
        store,
        "select s.task_id, step from screenshots join sessions s using (session_id) order by all",
    )
    assert shots == [("broken", 1), ("broken", 2), ("broken", 4), ("no-summary", 1)]
    steps = _rows(
        store,
        "select s.task_id, step, response is not null from steps "
        "join sessions s using (session_id) order by all",
    )
    assert steps == [
        ("broken", 1, True),
        ("broken", 2, False),
        ("broken", 3, True),
        ("broken", 4, False),
        ("no-summary", 1, True),
    ]
    ended = _rows(store, "select status, error from sessions where task_id = 'no-summary'")
    assert ended == [
        ("crashed", "imported without a readable summary (session.json or attempt.json)")
    ]


def test_error_attempts_come_first_in_order(
    tmp_path: Path, store: Store, agent_folder: Callable[..., Path]
) -> None:
    folder = agent_folder(
        tmp_path / "results",
        "fara7b",
        error_attempts=[
            {
                "status": "error",
                "rounds": 1,
                "error": "page crashed",
                "seconds": 3.0,
                "parse_fails": 0,
                "action_errors": 1,
            },
            {
                "status": "parse_error",
                "rounds": 1,
                "error": "no tool call",
                "seconds": 2.0,
                "parse_fails": 5,
                "action_errors": 0,
            },
        ],
    )
    attempt = write_folder(
        folder / "error_attempt_1",
        None,
        step_lines("fara7b", "u")[:1],
        {1: png((1, 1, 1)), 2: png((2, 2, 2))},
    )
    (attempt / "attempt.json").write_text(
        json.dumps(
            {
                "status": "error",
                "rounds": 1,
                "error": "page crashed",
                "seconds": 3.0,
                "parse_fails": 0,
                "action_errors": 1,
            }
        )
    )
    import_dir(store, tmp_path / "results", "fara7b")
    rows = _rows(
        store,
        "select attempt, status, agent_status, error, steps, parse_failures "
        "from sessions order by attempt",
    )
    assert rows == [
        (1, "error", "error", "page crashed", 1, 0),
        (2, "parse_error", "parse_error", "no tool call", 1, 5),
        (3, "finished", "done", None, 2, 1),
    ]
    shots = _rows(
        store,
        "select s.attempt, count(*) from screenshots join sessions s "
        "using (session_id) group by all order by all",
    )
    assert shots == [(1, 2), (3, 3)]


def test_session_failed_json_keeps_the_word_and_maps_the_status(
    tmp_path: Path, store: Store
) -> None:
    write_folder(
        tmp_path / "results" / "t",
        summary("t", status="endpoint_error", answer=None),
        [],
        {1: png((5, 5, 5))},
        summary_file="session_failed.json",
    )
    write_folder(
        tmp_path / "results" / "u",
        summary("u", status="crash"),
        [],
        {},
        summary_file="session_failed.json",
    )
    import_dir(store, tmp_path / "results", "molmoweb")
    rows = _rows(store, "select task_id, status, agent_status from sessions order by task_id")
    assert rows == [("t", "endpoint_error", "endpoint_error"), ("u", "crashed", "crash")]


@pytest.mark.slow
def test_reimporting_the_same_folders_adds_nothing(
    tmp_path: Path, store: Store, agent_folder: Callable[..., Path]
) -> None:
    root = tmp_path / "results"
    agent_folder(root, "uitars", "a")
    changed = agent_folder(root, "uitars", "b")
    import_dir(store, root, "uitars", run_id="r")
    streams = len(list(store.journal_dir.glob("*.jsonl")))
    again = import_dir(store, root, "uitars", run_id="r")
    assert again.lines() == [
        "imported 0 sessions from 0 folders into run r; 2 folders already imported"
    ]
    assert len(list(store.journal_dir.glob("*.jsonl"))) == streams  # nothing written
    # A folder the harness wrote again is new: it comes in as the task's next attempt.
    (changed / "steps.jsonl").write_text((changed / "steps.jsonl").read_text() + "\n")
    third = import_dir(store, root, "uitars", run_id="r")
    assert third.lines() == [
        "imported 1 session from 1 folder into run r: 1 finished; 1 folder already imported"
    ]
    rows = _rows(store, "select task_id, attempt from sessions order by all")
    assert rows == [("a", 1), ("b", 1), ("b", 2)]
    # Another run is another import.
    assert import_dir(store, root, "uitars", run_id="other").folders == 2


@pytest.mark.parametrize(
    ("word", "status"),
    [
        ("done", "finished"),
        ("DONE", "finished"),
        ("finished", "finished"),
        ("success", "finished"),
        ("terminate:success", "finished"),
        ("crash", "crashed"),
        ("endpoint_error", "endpoint_error"),
        ("max_rounds", "max_steps"),
        ("max_steps", "max_steps"),
        ("parse_error", "parse_error"),
        ("timeout", "timeout"),
        ("error", "error"),
        ("call_user", "call_user"),
        ("fail", "fail"),
        ("terminate:failure", "fail"),
        ("no_action", "no_action"),
        ("interrupted", "interrupted"),
        ("gave up", "error"),
    ],
)
def test_status_words_map_and_come_back(word: str, status: str) -> None:
    assert ownloop_status(word) == status
    assert harness_status(status, word) == word


def test_export_words_for_statuses_without_a_harness_word() -> None:
    assert harness_status("crashed", "") == "crash"
    assert harness_status("finished", "call_user") == "finished"
    assert ownloop_status(None) == "error"
    assert ownloop_status(None, default="crashed") == "crashed"
