"""Which sessions failed and why (issue 29), and the null-agent audit's verdict (issue 24), on a
store built with the store's test helpers (no browser): ``sessions --failed`` / ``--passed`` with
the ``reason`` column, the dashboard's sessions page with the same reasons and no failed session
drawn as a green ``finished``, ``audit noop`` over replays already in the store, and ``seal``
listing the tasks that pass untouched."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from ownloop.cli import cli
from ownloop.store import Store
from ownloop.store import events as E
from ownloop.view.server import ViewServer
from tests.store.conftest import at, record_session, store  # noqa: F401  (fixtures)


@pytest.fixture
def failed(store: Store, record_session: Callable[..., str]) -> Store:  # noqa: F811
    """Run r1: ok passed, wrong failed its answer check, down ended endpoint_error; a
    null-agent replay of each graded task: ok's start state passes untouched, wrong's does not."""
    record_session("ok", task="t-ok", counted=True, score=1.0, t=0)
    record_session("wrong", task="t-wrong", counted=True, score=None, t=10)
    record_session("down", task="t-down", status=None, score=None, t=20)
    with store.stream("later") as stream:
        stream.append(
            [
                E.SessionGraded(
                    at=at(30),
                    run_id="r1",
                    session_id="wrong",
                    grader="answer",
                    score=0.0,
                    passed=False,
                    checks=(E.Check(name="answer", expected="'42'", actual="'41'"),),
                ),
                E.SessionEnded(
                    at=at(31),
                    run_id="r1",
                    session_id="down",
                    status="endpoint_error",
                    error="InternalServerError: Error code: 500",
                ),
            ]
        )
    for n, (parent, task, passed) in enumerate((("ok", "t-ok", True), ("wrong", "t-wrong", False))):
        child = f"noop-{parent}"
        with store.stream(child) as stream:
            stream.append(
                [
                    E.SessionStarted(
                        at=at(40 + n),
                        run_id="r1",
                        session_id=child,
                        parent_session_id=parent,
                        replay_mode="ops",
                        task=E.Task(task_id=task, prompt="do it", start_url="http://x/"),
                    ),
                    E.SessionEnded(
                        at=at(40.5 + n), run_id="r1", session_id=child, status="no_action"
                    ),
                    E.SessionGraded(
                        at=at(40.7 + n),
                        run_id="r1",
                        session_id=child,
                        grader="answer",
                        score=float(passed),
                        passed=passed,
                    ),
                ]
            )
    return store


def _ownloop(at_store: Store, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", str(at_store.root), *args])


def test_sessions_failed_lists_each_failure_with_its_reason(failed: Store) -> None:
    rows = json.loads(
        _ownloop(failed, "sessions", "--run", "r1", "--failed", "--format", "json").stdout
    )
    reasons = {row["session_id"]: row["reason"] for row in rows}
    assert reasons == {
        "wrong": "answer: expected '42', got '41'",
        "down": "endpoint_error: InternalServerError: Error code: 500",
        "noop-wrong": "failed (answer)",
    }
    passed = json.loads(_ownloop(failed, "sessions", "--passed", "yes", "--format", "json").stdout)
    assert {row["session_id"] for row in passed} == {"ok", "noop-ok"}
    assert all(row["reason"] is None for row in passed)
    graded_failures = _ownloop(failed, "sessions", "--passed", "no", "--format", "json").stdout
    assert {row["session_id"] for row in json.loads(graded_failures)} == {"wrong", "noop-wrong"}
    table = _ownloop(failed, "sessions", "--run", "r1").output
    assert "run r1: passed 1/3 units: 0.333 (95% task-clustered interval " in table
    assert "over 3 tasks; 1 endpoint_error counted as failures)" in table
    both = _ownloop(failed, "sessions", "--failed", "--passed", "no")
    assert both.exit_code == 2 and "give --failed or --passed, not both" in both.output


def test_the_sessions_page_gives_the_reason_and_never_a_green_finished_failure(
    failed: Store,
) -> None:
    with ViewServer(failed, port=0) as url:
        with urllib.request.urlopen(url + "sessions?run=r1", timeout=30) as response:
            html = response.read().decode()
        with urllib.request.urlopen(url + "static/view.css", timeout=30) as response:
            css = response.read().decode()
    wrong = html.split('data-session="wrong"', 1)[1].split("</tr>", 1)[0]
    assert "answer: expected &#39;42&#39;, got &#39;41&#39;" in wrong
    row_class = html.split('data-session="wrong"', 1)[0].rsplit("<tr class=", 1)[1]
    assert row_class.startswith('"status-finished outcome-fail"')
    ok_class = html.split('data-session="ok"', 1)[0].rsplit("<tr class=", 1)[1]
    assert ok_class.startswith('"status-finished"')
    # green only for a finished session that did not fail; a failed one is drawn as bad
    assert "tr.status-finished:not(.outcome-fail) td.status" in css
    assert "tr.outcome-fail td.status, dd.outcome-fail { color: var(--bad); }" in css


def test_audit_noop_reads_its_replays_and_seal_lists_the_flagged_task(failed: Store) -> None:
    done = _ownloop(failed, "audit", "noop", "--run", "r1")
    assert done.exit_code == 0, done.output
    assert (
        "run r1: 2 tasks audited, 0 null-agent replays run now; pass untouched (score > 0.2 or "
        "passed with no action): t-ok"
    ) in done.output
    flagged = failed.sql("select run_id, task_id, replays, passes from passes_untouched").rows
    assert flagged == [("r1", "t-ok", 1, 1)]
    sealed = _ownloop(failed, "seal", "--run", "r1")
    assert "tasks that pass with no action at all (audit noop): t-ok" in sealed.output
    # the replays are children: the run's scores do not move (down is an errored unit)
    assert failed.sql(
        "select sessions, errored, score from run_scores where run_id = 'r1' and method = 'wilson'"
    ).rows == [(3, 1, 1 / 3)]
