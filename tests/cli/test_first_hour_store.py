"""A researcher's first hour, through the real ``ownloop`` in a subprocess: ``--store`` anywhere,
hints that paste, no store made by a command that only reads, exit codes, output that pipes.

The store is written with the replay builders (real journal, real DuckDB index); no browser.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.store import open_store
from ownloop.testing.synthetic import Session, agent_step, click, finish, write_sessions

LONG_ANSWER = "an answer long enough that an eighty column table would have to cut it " * 2


def ownloop(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The installed ``ownloop`` as a user runs it: a pipe for stdout, no terminal width."""
    base = {k: v for k, v in os.environ.items() if k not in ("OWNLOOP_STORE", "COLUMNS")}
    return subprocess.run(
        [sys.executable, "-m", "ownloop", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("first-hour") / "runs"
    write_sessions(
        open_store(root),
        Session(
            session_id="s-one",
            task_id="click-button-7",
            steps=[agent_step(actions=[click()]), agent_step(actions=[finish("done")])],
        ),
        Session(
            session_id="s-two",
            task_id="click-button-8",
            start=5.0,
            steps=[agent_step(actions=[click(10, 20)]), agent_step(actions=[finish("done")])],
        ),
        Session(
            session_id="s-long",
            task_id="enter-text-1",
            start=9.0,
            answer=LONG_ANSWER,
            status="fail",
            steps=[agent_step(actions=[finish(LONG_ANSWER)])],
        ),
    )
    open_store(root).sync()
    return root


@pytest.fixture
def store(built: Path, tmp_path: Path) -> Path:
    shutil.copytree(built, tmp_path / "runs")
    return tmp_path / "runs"


COUNT = "select count(*) as n from sessions"


@pytest.mark.slow
def test_store_goes_before_or_after_the_command_or_in_the_environment(
    store: Path, tmp_path: Path
) -> None:
    before = ownloop("--store", str(store), "sql", "--format", "csv", COUNT)
    after = ownloop("sql", "--store", str(store), "--format", "csv", COUNT)
    env = ownloop("sql", "--format", "csv", COUNT, env={"OWNLOOP_STORE": str(store)})
    assert [r.stdout for r in (before, after, env)] == ["n\n3\n"] * 3, (before, after, env)
    # after the command wins over before it and over $OWNLOOP_STORE
    elsewhere = tmp_path / "elsewhere"
    both = ownloop(
        "--store",
        str(elsewhere),
        "sessions",
        "--store",
        str(store),
        "--format",
        "csv",
        env={"OWNLOOP_STORE": str(elsewhere)},
    )
    assert both.returncode == 0 and both.stdout.count("\n") == 4, both.stderr
    assert not elsewhere.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("sessions",),
        ("sql", "select 1"),
        ("show", "x"),
        ("replay", "x"),
        ("diff", "a", "b"),
        ("verify",),
        ("index",),
        ("regrade",),
        ("report", "x", "--out", "r.html"),
        ("export", "--run", "r1", "--out", "out"),
    ],
    ids=lambda a: a[0],
)
@pytest.mark.slow
def test_a_command_that_reads_does_not_make_a_store(tmp_path: Path, args: tuple[str, ...]) -> None:
    missing = ownloop("--store", "nowhere", *args, cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (1, ""), missing.stderr
    assert missing.stderr == (
        "Error: there is no store at nowhere. Pass --store DIR (or set "
        "$OWNLOOP_STORE) naming one, or record one there with: ownloop "
        "--store nowhere demo\n"
    )
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "notes.txt").write_text("mine")
    folder = ownloop(*args, "--store", "papers", cwd=tmp_path)
    assert (folder.returncode, folder.stderr) == (
        1,
        (
            "Error: papers is not an ownloop store (it has no journal folder). Pass --store "
            "DIR (or "
            "set $OWNLOOP_STORE) naming one\n"
        ),
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["papers"]
    assert [p.name for p in (tmp_path / "papers").iterdir()] == ["notes.txt"]


@pytest.mark.slow
def test_a_hint_carries_the_store_and_pasting_it_works(store: Path, tmp_path: Path) -> None:
    wrong = ownloop("show", "no-such-task", "--store", str(store), "--run", "r1")
    hint = f"ownloop --store {store} sessions --run r1"
    assert wrong.returncode == 1 and wrong.stderr.endswith(f"List them with: {hint}\n"), (
        wrong.stderr
    )
    pasted = ownloop(*shlex.split(hint)[1:], cwd=tmp_path)
    assert pasted.returncode == 0 and "s-one" in pasted.stdout, pasted.stderr
    # prose that names a command is not a hint; a store path with a space is quoted
    spaced = tmp_path / "my runs"
    shutil.copytree(store, spaced)
    refused = ownloop("--store", str(spaced), "sql", "delete from sessions")
    assert refused.stderr.startswith("Error: ownloop sql only reads: DELETE"), refused.stderr
    wrong = ownloop("--store", str(spaced), "show", "no-such-task")
    assert wrong.stderr.endswith(f"ownloop --store '{spaced}' sessions\n"), wrong.stderr


def test_the_default_store_is_not_named_in_hints(store: Path, tmp_path: Path) -> None:
    shutil.copytree(store, tmp_path / "ownloop-data")
    wrong = ownloop("show", "no-such-task", cwd=tmp_path)
    assert wrong.stderr.endswith("List them with: ownloop sessions\n"), wrong.stderr


@pytest.mark.slow
def test_diff_exits_1_when_the_sessions_differ_and_0_when_they_do_not(store: Path) -> None:
    same = ownloop("--store", str(store), "diff", "s-one", "s-one")
    differ = ownloop("--store", str(store), "diff", "s-one", "s-two")
    assert (same.returncode, differ.returncode) == (0, 1), (same.stderr, differ.stderr)
    assert "identical" in same.stdout and "different: 1 of 2 steps differ" in differ.stdout


def test_an_unknown_status_is_an_error_that_names_the_statuses(store: Path) -> None:
    bogus = ownloop("--store", str(store), "sessions", "--status", "bogus")
    assert bogus.returncode == 2 and bogus.stdout == ""
    assert (
        "Error: Invalid value for '--status': 'bogus' is not one of 'finished', 'call_user', "
        "'fail', 'max_steps', 'timeout', 'parse_error', 'no_action', 'endpoint_error', "
        "'error', 'interrupted', 'crashed', 'env_error'."
    ) in bogus.stderr
    fail = ownloop("--store", str(store), "sessions", "--status", "fail", "--format", "csv")
    assert [row["session_id"] for row in csv.DictReader(io.StringIO(fail.stdout))] == ["s-long"]


@pytest.mark.slow
def test_sessions_show_and_diff_print_csv_and_json(store: Path) -> None:
    rows = json.loads(ownloop("--store", str(store), "sessions", "--format", "json").stdout)
    assert [r["session_id"] for r in rows] == ["s-long", "s-two", "s-one"]
    assert rows[0]["answer"] == LONG_ANSWER
    steps = list(
        csv.DictReader(
            io.StringIO(ownloop("--store", str(store), "show", "s-one", "--format", "csv").stdout)
        )
    )
    assert [(s["step"], s["actions"]) for s in steps] == [
        ("1", "click(x=640, y=400)"),
        ("2", "finish(answer='done')"),
    ]
    as_json = ownloop("--store", str(store), "show", "s-one", "--format", "json").stdout
    assert as_json == ownloop("--store", str(store), "show", "s-one", "--json").stdout
    assert json.loads(as_json)["session_id"] == "s-one"
    diff = ownloop("--store", str(store), "diff", "s-one", "s-two", "--format", "json")
    document = json.loads(diff.stdout)
    assert (diff.returncode, document["identical"], document["first_difference"]) == (1, False, 1)
    assert [s["same_actions"] for s in document["steps"]] == [False, True]
    diff_csv = ownloop("--store", str(store), "diff", "s-one", "s-two", "--format", "csv")
    assert [r["same_actions"] for r in csv.DictReader(io.StringIO(diff_csv.stdout))] == [
        "False",
        "True",
    ]


def test_regrade_dry_run_prints_the_flips_and_appends_nothing(store: Path) -> None:
    grades = "select count(*) from grades"
    before = open_store(store).sql(grades).rows
    dry = ownloop(
        "--store",
        str(store),
        "regrade",
        "--grader",
        "answer:exact:nothing",
        "--dry-run",
        "--format",
        "json",
    )
    result = json.loads(dry.stdout)
    assert (dry.returncode, result["dry_run"], result["stream"]) == (0, True, None), dry.stderr
    assert sorted(f["session_id"] for f in result["flips"]) == ["s-long", "s-one", "s-two"]
    assert open_store(store).sql(grades).rows == before
    text = ownloop(
        "--store", str(store), "regrade", "--grader", "answer:exact:nothing", "--dry-run"
    ).stdout
    assert "would flip: 3" in text and text.rstrip().endswith("dry run: no grade was appended")
    flips = ownloop(
        "--store", str(store), "regrade", "--grader", "answer:exact:nothing", "--format", "csv"
    )
    assert [r["passed_after"] for r in csv.DictReader(io.StringIO(flips.stdout))] == ["False"] * 3
    assert open_store(store).sql(grades).rows != before


@pytest.mark.parametrize(
    "args",
    [("sessions",), ("sql", "select * from sessions"), ("diff", "s-long", "s-one")],
    ids=lambda a: a[0],
)
def test_a_table_to_a_pipe_is_never_cut_to_80_columns(store: Path, args: tuple[str, ...]) -> None:
    out = ownloop("--store", str(store), *args).stdout
    assert LONG_ANSWER.strip()[:150] in out and "…" not in out
    assert max(len(line) for line in out.splitlines()) > 150
