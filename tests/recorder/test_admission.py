"""Admission and the step budget: a run declares its contract before any browser starts, a
refusal writes nothing, a resume with another contract is refused with the diff, a session never
takes more policy turns than its budget, and a run that mixes budgets says so."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver import FaultyResponder, ModelServer, Reply
from ownloop.modelserver.endpoint import make_server
from ownloop.recorder.admission import source_state
from ownloop.store import open_store
from ownloop.store.events import RunStarted, SessionEnded, SessionStarted, Task, now

DEAD = "http://127.0.0.1:9/v1"  # discard port: nothing listens


@pytest.fixture(scope="module")
def failing() -> Iterator[str]:
    """An endpoint that lists its models but drops every call: sessions end endpoint_error."""
    with ModelServer(FaultyResponder(lambda request: Reply(""), "drop")) as url:
        yield url


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git checkout with one committed file."""
    path = tmp_path / "checkout"
    path.mkdir()
    _git(path, "init", "-q")
    (path / "code.py").write_text("x = 1\n")
    _git(path, "add", "code.py")
    _git(path, "commit", "-q", "-m", "one")
    return path


def _tasks(tmp_path: Path, grader: str = "none") -> Path:
    path = tmp_path / "tasks.json"
    path.write_text(
        json.dumps(
            [
                {
                    "task_id": "form-1",
                    "prompt": "Fill the form",
                    "start": "{BASE}/form",
                    "grader": grader,
                }
            ]
        )
    )
    return path


def _record(store: Path, *args: str, env: dict[str, str] | None = None):  # noqa: ANN202
    return CliRunner().invoke(
        cli,
        ["--store", str(store), "record", "uitars", "--model", "m", "--settle", "0", *args],
        env=env,
        catch_exceptions=False,
    )


def _written(store: Path) -> list[str]:
    """Every file in the store but the index (a projection)."""
    return sorted(
        str(p.relative_to(store))
        for p in store.rglob("*")
        if p.is_file() and not p.name.startswith("index.")
    )


def test_source_state_of_a_clean_a_dirty_and_a_non_checkout(repo: Path, tmp_path: Path) -> None:
    clean = source_state(repo)
    assert clean.dirty is False and len(clean.commit) == 40
    (repo / "code.py").write_text("x = 2\n")
    assert source_state(repo).dirty is True
    (repo / "code.py").write_text("x = 1\n")
    (repo / "new.py").write_text("")  # an untracked file is a change too
    assert source_state(repo).dirty is True
    plain = tmp_path / "plain"
    plain.mkdir()
    assert source_state(plain) == (str(plain), "", None)


def test_require_clean_refuses_a_dirty_checkout_and_writes_nothing(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "code.py").write_text("x = 2\n")
    store = tmp_path / "store"
    result = _record(
        store,
        "--tasks",
        str(_tasks(tmp_path)),
        "--base",
        "http://127.0.0.1:1",
        "--endpoint",
        DEAD,
        "--require-clean",
        env={"OWNLOOP_SOURCE_DIR": str(repo)},
    )
    assert result.exit_code == 1
    assert result.output == (
        f"Error: the ownloop checkout at {repo} has uncommitted changes (--require-clean): "
        "commit them (git status shows them) or leave out --require-clean\n"
    )
    assert _written(store) == []


def test_expect_suite_refuses_another_hash_and_writes_nothing(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    store = tmp_path / "store"
    result = _record(
        store,
        "--tasks",
        str(tasks),
        "--base",
        "http://127.0.0.1:1",
        "--endpoint",
        DEAD,
        "--expect-suite",
        "ab" * 32,
    )
    assert result.exit_code == 1
    import hashlib

    actual = hashlib.sha256(tasks.read_bytes()).hexdigest()
    assert result.output == (
        f"Error: the suite tasks:tasks.json has sha256 {actual}, not {'ab' * 32} "
        "(--expect-suite): its tasks changed. Check the tasks file or pass its new hash\n"
    )
    assert _written(store) == []


def test_a_bad_grader_spec_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = _record(
        store,
        "--tasks",
        str(_tasks(tmp_path, "answer:number:three")),
        "--base",
        "http://127.0.0.1:1",
        "--endpoint",
        DEAD,
    )
    assert result.exit_code == 1
    assert result.output.startswith(
        "Error: tasks.json: $[0].grader: bad grader spec 'answer:number:three'"
    )
    assert result.output.count("\n") == 1
    assert _written(store) == []


def test_a_budget_outside_one_and_up_is_refused(tmp_path: Path) -> None:
    result = _record(
        tmp_path, "--tasks", str(_tasks(tmp_path)), "--endpoint", DEAD, "--max-steps", "0"
    )
    assert result.exit_code == 2 and "--max-steps" in result.output


@pytest.mark.browser
def test_resume_with_another_contract_is_refused_with_the_diff(
    tmp_path: Path, site, failing: str
) -> None:  # noqa: ANN001
    store = tmp_path / "store"
    tasks = str(_tasks(tmp_path))
    common = [
        "--tasks",
        tasks,
        "--base",
        site.base,
        "--endpoint",
        failing,
        "--retries",
        "0",
        "--run",
        "r1",
    ]
    first = _record(store, *common)
    assert first.exit_code == 3 and "1 endpoint_error" in first.output, first.output
    before = _written(store)
    started = (
        open_store(store)
        .sql(
            "select max_steps, timeout_s, task_ids, config_sha256, suite_version, "
            "versions ->> 'git_dirty' is not null from run_started"
        )
        .rows
    )
    assert started[0][:3] == (40, 1800.0, '["form-1"]') and len(started[0][3]) == 64
    refused = _record(store, *common, "--max-steps", "20")
    assert refused.exit_code == 1
    assert refused.output == (
        "Error: run r1 was started with max_steps=40, this command has max_steps=20; use "
        "another --run or the same settings\n"
    )
    two = _record(store, *common, "--max-steps", "20", "--timeout", "60")
    assert two.output == (
        "Error: run r1 was started with max_steps=40, timeout_s=1800.0, this command has "
        "max_steps=20, timeout_s=60.0; use another --run or the same settings\n"
    )
    assert _written(store) == before  # nothing written by a refusal
    # The same contract resumes: the endpoint_error task runs again as attempt 2.
    again = _record(store, *common)
    assert again.exit_code == 3 and "1 endpoint_error" in again.output, again.output
    rows = (
        open_store(store)
        .sql("select attempt, counted, budget, comparable from sessions order by attempt")
        .rows
    )
    assert rows == [(1, None, 40, True), (2, None, 40, True)]


@pytest.mark.browser
def test_a_session_never_exceeds_its_budget_and_resamples_are_not_turns(tmp_path: Path) -> None:
    # A run recorded before budgets were declared: its RunStarted has no contract hash.
    store = open_store(tmp_path)
    with store.stream() as stream:
        stream.append(
            [
                RunStarted(at=now(), run_id="old", agent="uitars", max_steps=40),
                SessionStarted(
                    at=now(),
                    run_id="old",
                    session_id="old-1",
                    budget=40,
                    task=Task(task_id="older-task", prompt="p", start_url="u"),
                ),
                SessionEnded(at=now(), run_id="old", session_id="old-1", status="fail"),
            ]
        )
    # Two garbage answers: step 1 takes its call and two re-samples, then parses. The budget of
    # one turn ends the session there (login-user needs six).
    with make_server("miniwob", "uitars", "garbage:2") as url:
        result = _record(
            tmp_path,
            "--suite",
            "miniwob:login-user",
            "--endpoint",
            url,
            "--run",
            "old",
            "--max-steps",
            "1",
        )
    assert result.exit_code == 0, result.output
    assert "1 max_steps" in result.output
    assert (
        "mixed step budgets: run old declared 40 steps but its sessions ran under 1 and 40; "
        f"compare only sessions where comparable (ownloop --store {tmp_path} sessions shows it)"
    ) in result.output  # the hint names the store it was given
    rows = store.sql(
        "select status, steps, budget, comparable from sessions where task_id like 'login-user-%'"
    ).rows
    assert rows == [("max_steps", 1, 1, False)]
    calls = store.sql("select step, purpose from model_calls order by time").rows
    assert calls == [(1, "step"), (1, "resample"), (1, "resample")]
    assert store.sql("select budgets from runs where run_id = 'old'").rows == [([1, 40],)]


def test_ownloop_sessions_says_when_a_run_mixes_budgets(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    task = Task(task_id="t", prompt="p", start_url="u")
    with store.stream() as stream:
        stream.append(
            [
                RunStarted(at=now(), run_id="mixed", max_steps=40),
                SessionStarted(at=now(), run_id="mixed", session_id="a", budget=40, task=task),
                SessionStarted(at=now(), run_id="mixed", session_id="b", budget=20, task=task),
                RunStarted(at=now(), run_id="even", max_steps=40),
                SessionStarted(at=now(), run_id="even", session_id="c", budget=40, task=task),
            ]
        )
    result = CliRunner().invoke(cli, ["--store", str(tmp_path), "sessions"], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.output.endswith(
        "mixed step budgets: run mixed declared 40 steps but its sessions ran under 20 and 40; "
        f"compare only sessions where comparable (ownloop --store {tmp_path} sessions shows it)\n"
    )
    assert "run even" not in result.output
    rows = store.sql("select session_id, comparable from sessions order by session_id").rows
    assert rows == [("a", False), ("b", False), ("c", True)]
    quiet = CliRunner().invoke(cli, ["--store", str(tmp_path), "sessions", "--run", "even"])
    assert "mixed" not in quiet.output


@pytest.mark.slow
def test_a_scored_session_left_uncounted_by_a_killed_recorder_wins_on_the_next_start(
    tmp_path: Path, failing: str
) -> None:
    # A recorder killed after writing its session's end, before the session's count: the
    # session ended first with a final outcome, so it is the one that counts; nothing runs again.
    store = open_store(tmp_path / "store")
    task = Task(task_id="form-1", prompt="Fill the form", start_url="http://127.0.0.1:1/form")
    with store.stream("orphan-1") as stream:
        stream.append(
            [
                SessionStarted(
                    at=now(), run_id="orph", session_id="orphan-1", budget=40, task=task
                ),
                SessionEnded(at=now(), run_id="orph", session_id="orphan-1", status="fail"),
            ]
        )
    result = _record(
        tmp_path / "store",
        "--tasks",
        str(_tasks(tmp_path)),
        "--base",
        "http://127.0.0.1:1",
        "--endpoint",
        failing,
        "--run",
        "orph",
    )
    assert result.exit_code == 0, result.output
    assert "nothing to do" in result.output and "1 tasks were done already" in result.output
    assert store.sql("select session_id, counted from sessions").rows == [("orphan-1", True)]
    again = _record(
        tmp_path / "store",
        "--tasks",
        str(_tasks(tmp_path)),
        "--base",
        "http://127.0.0.1:1",
        "--endpoint",
        failing,
        "--run",
        "orph",
    )
    assert "nothing to do" in again.output
    assert store.sql("select count(*) from session_counted").rows == [(1,)]


@pytest.mark.slow
def test_limit_records_only_the_suites_first_tasks_and_declares_them(
    tmp_path: Path, site, failing: str
) -> None:  # noqa: ANN001
    tasks = tmp_path / "three.json"
    tasks.write_text(
        json.dumps(
            [
                {"task_id": f"form-{i}", "prompt": "Fill the form", "start": "{BASE}/form"}
                for i in (1, 2, 3)
            ]
        )
    )
    store = tmp_path / "store"
    args = ["--tasks", str(tasks), "--base", site.base, "--endpoint", failing, "--retries", "0"]
    result = _record(store, *args, "--run", "r1", "--limit", "1")
    assert result.exit_code == 3 and "run r1: 1 endpoint_error" in result.output, result.output
    assert f"query: ownloop --store {store} sql " in result.output  # a hint that pastes as is
    found = open_store(store).sql("select task_ids from run_started").rows
    assert found == [('["form-1"]',)]
    assert _record(store, *args, "--limit", "0").exit_code == 2  # a usage error: N >= 1
