"""Issue 24 (and 29's closing line) through the real CLI with one small recording: a candidate
whose endpoint (``serve-model --faults``) failed on one of two tasks counts it as a failure,
``record`` says so in its closing line, ``compare --fail-if-worse`` fails the gate by default
and passes only with ``--errors exclude``, and ``audit noop`` grades the untouched start states.

The baseline is the session-scoped ``uitars_store`` (run r1: click-button then enter-text, both
passed), copied; the candidate is recorded into the copy with one worker and no retries against
an expert whose first two calls are answered (click-button takes two) and every later call
gets HTTP 500 (enter-text ends endpoint_error).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.modelserver.endpoint import make_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _ownloop(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def gated(uitars_store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The copy with run ``cand`` recorded into it, and ``record``'s output."""
    store = tmp_path_factory.mktemp("gate") / "store"
    shutil.copytree(uitars_store, store)
    with make_server("miniwob", "uitars", "ok:2,500") as url:
        done = _ownloop(
            store,
            "record",
            "uitars",
            "--suite",
            "miniwob:click-button,enter-text",
            "--endpoint",
            url,
            "--model",
            "expert",
            "--run",
            "cand",
            "--workers",
            "1",
            "--retries",
            "0",
            "--settle",
            "0.1",
        )
    assert done.returncode == 3, done.stdout + done.stderr  # a session ended endpoint_error
    return store, done.stdout


def test_record_closes_with_the_pass_rate_counting_the_error_as_a_failure(
    gated: tuple[Path, str],
) -> None:
    store, out = gated
    assert "run cand: 1 endpoint_error, 1 finished in " in out
    assert "passed 1/2 units: 0.500 (95% task-clustered interval " in out
    assert "over 2 tasks; 1 endpoint_error counted as failures)" in out
    # the query hint names the store, so pasting it works
    assert f"query: ownloop --store {store} sql " in out


def test_the_gate_fails_the_errored_candidate_unless_errors_are_excluded(
    gated: tuple[Path, str],
) -> None:
    store, _ = gated
    base = ("compare", "r1", "cand", "--min-tasks", "1", "--fail-if-worse", "0")
    failed = _ownloop(store, *base)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "B: 1 of 2 units ended endpoint_error, counted as failures" in failed.stdout
    assert "B cand would fail the seal's completeness audit: task enter-text-" in failed.stderr
    excluded = _ownloop(store, *base, "--errors", "exclude")
    assert excluded.returncode == 0, excluded.stdout + excluded.stderr
    assert "B: 1 of 2 units ended endpoint_error, left out (--errors exclude)" in excluded.stdout
    assert _ownloop(store, "seal", "--run", "cand").returncode == 1  # the seal agrees


def test_audit_noop_grades_each_untouched_start_state(gated: tuple[Path, str]) -> None:
    store, _ = gated
    done = _ownloop(store, "audit", "noop", "--run", "r1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "run r1: 2 tasks audited, 2 null-agent replays run now; pass untouched" in done.stdout
    assert done.stdout.rstrip().splitlines()[-2].endswith("passed with no action): none")
    rows = _ownloop(
        store,
        "sql",
        "select r.task_id, s.steps, s.answer is null, s.status, r.score from noop_replays r "
        "join sessions s using (session_id) order by 1",
        "--format",
        "csv",
    )
    lines = rows.stdout.strip().splitlines()[1:]
    assert [line.split(",")[1:] for line in lines] == [["0", "True", "no_action", "0.0"]] * 2
    again = _ownloop(store, "audit", "noop", "--run", "r1")
    assert "0 null-agent replays run now" in again.stdout  # already in the store
