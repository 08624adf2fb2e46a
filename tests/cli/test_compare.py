"""``ownloop compare``: two runs built with the store's test helpers (no browser), compared by
the library, through CliRunner, and once through the real CLI in a subprocess."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.replay.compare import compare_runs
from ownloop.scoring.stats import mcnemar_exact, paired_bootstrap
from ownloop.store import Store
from tests.store.conftest import record_session, store  # noqa: F401  (fixtures)

# task -> (A's outcomes over repeats, B's), and the elements B's failing session clicks
_OUTCOMES = {
    "t1": ([1, 1, 1], [1, 1, 1]),
    "t2": ([1, 1, 0], [0, 0, 1]),  # solved by A only: B's failing repeat 1 clicks "cancel"
    "t3": ([0, 0, 0], [0, 0, 0]),
    "t4": ([1, 0, 1], [1, 0, 0]),  # solved by A only: B's repeat 2 takes an extra step
    "t5": ([0, 0, 1], [1, 1, 0]),  # solved by B only
}
_A_HITS = ["name", "ok", "submit"]
_B_HITS = {("t2", 1): ["name", "cancel", "submit"], ("t4", 2): ["name", "help", "ok", "submit"]}


@pytest.fixture
def two_runs(store: Store, record_session: Callable[..., str]) -> Store:  # noqa: F811
    t = 0.0
    for task, sides in _OUTCOMES.items():
        for run, outcomes in zip(("A", "B"), sides, strict=True):
            for repeat, passed in enumerate(outcomes, start=1):
                hits = _B_HITS.get((task, repeat), _A_HITS) if run == "B" else _A_HITS
                record_session(
                    f"{run}-{task}-{repeat}",
                    run_id=run,
                    task=task,
                    repeat=repeat,
                    counted=True,
                    score=float(passed),
                    hits=hits,
                    t=t,
                )
                t += 10
    return store


def test_compare_pairs_tasks_and_finds_each_flip_and_its_first_divergent_step(
    two_runs: Store,
) -> None:
    result = compare_runs(two_runs, "A", "B")
    assert [t.task_id for t in result.flipped] == ["t2", "t4", "t5"]
    assert (result.only_a, result.only_b) == (2, 1)
    # repeats: the sign-flip test of the differences -1/3, -1/3, +1/3 (every sign pattern
    # reaches |sum| >= 1/3), not McNemar's on the majorities (which throws the repeats away)
    assert (result.test, result.p_value, result.exact) == ("sign_flip", 1.0, True)
    assert mcnemar_exact(2, 1) == 1.0
    pairs = [([bool(x) for x in a], [bool(x) for x in b]) for a, b in _OUTCOMES.values()]
    assert result.difference == paired_bootstrap(pairs)
    assert result.difference.estimate == pytest.approx((0 - 1 / 3 + 0 - 1 / 3 + 1 / 3) / 5)
    assert (result.flip_rate_a, result.flip_rate_b) == (3 / 5, 3 / 5)

    t2, t4, t5 = (t.divergence for t in result.flipped)
    assert t2 is not None and t4 is not None and t5 is not None
    # A's first passing repeat against B's first failing one; step 2 clicks another element
    assert (t2.session_a, t2.session_b, t2.step_a, t2.step_b) == ("A-t2-1", "B-t2-1", 2, 2)
    assert t2.did_a == "click button#ok 'OK' [role=button]"
    assert t2.did_b == "click button#cancel 'CANCEL' [role=button]"
    assert t2.rejoined == (3, 3)
    # an extra step in B: aligned on what the steps did, A's step 2 is B's step 3
    assert (t4.session_b, t4.step_a, t4.step_b, t4.did_a) == ("B-t4-2", None, 2, "")
    assert t4.did_b == "click button#help 'HELP' [role=button]"
    assert (t4.rejoined, t4.same_before) == ((2, 3), 1)
    assert t4.line() == (
        "first divergent step B step 2 has no counterpart in A: click button#help 'HELP' "
        "[role=button]; they agree again from A step 2 / B step 3 (A-t4-1 vs B-t4-2)"
    )
    # same steps, different outcome
    assert (t5.step_a, t5.step_b, t5.same_before) == (None, None, 3)
    assert "only the outcome differs" in t5.line()
    assert result.worse_than(0.0) == (result.difference.high < 0)


def test_a_run_without_graded_sessions_is_a_one_line_error(two_runs: Store) -> None:
    result = CliRunner().invoke(cli, ["--store", str(two_runs.root), "compare", "A", "nope"])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: run 'nope' has no graded scored sessions in {two_runs.root}. List runs with: "
        f'ownloop --store {two_runs.root} sql "select run_id, sessions from runs"\n'
    )


def test_compare_formats(two_runs: Store) -> None:
    def run(*args: str) -> str:
        result = CliRunner().invoke(
            cli, ["--store", str(two_runs.root), "compare", "A", "B", *args]
        )
        assert result.exit_code == 0, result.output
        return result.output

    table = run()
    assert "t2" in table and "A 2 / B 2" in table
    assert "3 tasks solved by one run only (expected with no change: 3.0)" in table
    assert "sign-flip permutation test over the tasks' differences (exact): p = 1" in table
    assert "over the 5 shared tasks (mean of the tasks' pass rates): A 0.533, B 0.467" in table
    rows = list(csv.DictReader(io.StringIO(run("--format", "csv"))))
    assert [r["task_id"] for r in rows] == ["t1", "t2", "t3", "t4", "t5"]
    assert rows[1]["flipped"] == "True" and rows[1]["session_b"] == "B-t2-1"
    assert rows[1]["did_b"] == "click button#cancel 'CANCEL' [role=button]"
    data = json.loads(run("--format", "json"))
    assert data["flipped"] == ["t2", "t4", "t5"] and data["seed"] == 0
    assert data["tasks"][3]["divergence"]["step_b"] == 2


def test_fail_if_worse_trips_only_when_b_is_confidently_worse(
    store: Store,  # noqa: F811 - the fixtures imported above
    record_session: Callable[..., str],  # noqa: F811
) -> None:
    # A passes all 8 tasks, B fails all: B - A = -1 in every replicate
    for number in range(8):
        record_session(
            f"a{number}", run_id="A", task=f"t{number}", counted=True, score=1.0, t=number
        )
        record_session(
            f"b{number}", run_id="B", task=f"t{number}", counted=True, score=0.0, t=number + 100
        )
    base = ["--store", str(store.root), "compare"]
    worse = CliRunner().invoke(cli, [*base, "A", "B", "--fail-if-worse", "0.1"])
    assert worse.exit_code == 1
    assert "B is worse than A by more than 0.1 with confidence" in worse.output
    assert CliRunner().invoke(cli, [*base, "B", "A", "--fail-if-worse", "0.1"]).exit_code == 0
    assert CliRunner().invoke(cli, [*base, "A", "B"]).exit_code == 0


def test_compare_through_the_real_cli(two_runs: Store, tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "ownloop",
        "--store",
        str(two_runs.root),
        "compare",
        "A",
        "B",
        "--format",
        "json",
        "--fail-if-worse",
        "0.9",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["flipped"] == ["t2", "t4", "t5"]


def test_compare_into_a_pipe_keeps_its_table_whole(
    two_runs: Store,
    record_session: Callable[..., str],  # noqa: F811
) -> None:
    task = "a-task-id-as-long-as-the-ones-people-write-" + "x" * 60  # the table passes 80 columns
    for run, passed in (("A", 1.0), ("B", 0.0)):
        record_session(f"{run}-long", run_id=run, task=task, counted=True, score=passed, t=1e4)
    argv = [sys.executable, "-m", "ownloop", "--store", str(two_runs.root), "compare", "A", "B"]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert len({len(line) for line in table}) == 1, table  # every row one line, none wrapped
    assert any(task in line for line in table), table
    rows = [line for line in table if line.startswith("│")]
    assert len(rows) == len(_OUTCOMES) + 1, rows  # a row a task, none folded onto a second line
