"""``ownloop record --repeat N``: each task N times, each repeat its own scored unit; the noisy
expert (``--noise``) makes repeats disagree; a resume records only the repeats that are missing.
Real Chromium, MiniWoB pages, the expert over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver.endpoint import Serving, make_server
from ownloop.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _record(store: Path, *args: str, status: int = 0) -> str:
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            str(store),
            "record",
            "uitars",
            "--model",
            "expert",
            "--settle",
            "0.1",
            "--workers",
            "1",
            *args,
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == status, result.output
    return result.output


def _rows(store: Path, sql: str) -> list[tuple]:
    return open_store(store).sql(sql).rows


def test_repeats_of_a_noisy_expert_flip_and_each_repeat_counts_once(tmp_path: Path) -> None:
    with make_server("miniwob", "uitars", serving=Serving(noise=0.5, noise_seed=3)) as noisy:
        _record(
            tmp_path,
            "--suite",
            "miniwob:click-button,enter-text",
            "--endpoint",
            noisy,
            "--run",
            "n",
            "--repeat",
            "4",
        )
    units = _rows(
        tmp_path,
        "select task_id, repeat, count(*), count(*) filter (where counted) "
        "from sessions where run_id = 'n' group by all order by all",
    )
    assert [(t.rsplit("-", 1)[0], r, n, c) for t, r, n, c in units] == [
        (task, repeat, 1, 1) for task in ("click-button", "enter-text") for repeat in (1, 2, 3, 4)
    ]
    assert _rows(tmp_path, "select repeats from runs where run_id = 'n'") == [(4,)]
    passed = _rows(tmp_path, "select count(*) filter (where passed), count(*) from scored_units")
    assert 0 < passed[0][0] < passed[0][1] == 8  # the noise failed some sessions, not all
    flips = _rows(tmp_path, "select task_id, n, outcomes from flips where run_id = 'n'")
    assert flips and all(n == 4 and any(o) and not all(o) for _, n, o in flips)
    pass_hat = _rows(
        tmp_path,
        "select k, pass_hat_k from task_outcomes where k in (1, 4) "
        f"and task_id = '{flips[0][0]}' order by k",
    )
    assert pass_hat[0][1] > 0 and pass_hat[1] == (4, 0.0)


def test_a_resume_records_only_the_missing_repeats_and_repeat_is_in_the_contract(
    tmp_path: Path,
) -> None:
    # Two good answers (repeat 1: click, finish), then the endpoint is down for good.
    with make_server("miniwob", "uitars", "ok:2,down") as flaky:
        out = _record(
            tmp_path,
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            flaky,
            "--run",
            "r",
            "--repeat",
            "3",
            "--retries",
            "0",
            status=3,
        )
    assert "1 finished" in out and "2 endpoint_error" in out
    with make_server("miniwob", "uitars") as expert:
        out = _record(
            tmp_path,
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            expert,
            "--run",
            "r",
            "--repeat",
            "3",
        )
        assert "2 finished" in out and "1 tasks were done already" in out
        rows = _rows(
            tmp_path,
            "select repeat, attempt, status, counted from sessions "
            "where run_id = 'r' order by repeat, attempt",
        )
        assert rows == [
            (1, 1, "finished", True),
            (2, 1, "endpoint_error", None),
            (2, 2, "finished", True),
            (3, 1, "endpoint_error", None),
            (3, 2, "finished", True),
        ]
        assert "nothing to do" in _record(
            tmp_path,
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            expert,
            "--run",
            "r",
            "--repeat",
            "3",
        )
        refused = _record(
            tmp_path,
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            expert,
            "--run",
            "r",
            "--repeat",
            "4",
            status=1,
        )
    assert "repeats=3" in refused and "repeats=4" in refused
