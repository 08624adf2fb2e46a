"""Guarded replay on another MiniWoB seed (``--seed``): the focus-text textbox moves with the
seed, so acting at the recorded point misses it, re-finding it hits it, and a fork at the first
divergence lets the expert finish the task. Real Chromium, the real CLI, the expert over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.store import open_store
from tests.replay.conftest import Live, Recorded, invoke

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SEED = 2  # focus-text is recorded on its default seed; on seed 2 its textbox is elsewhere


def _child(store: Path) -> tuple[str, str, int | None, str]:
    return (
        open_store(store)
        .sql(
            "select session_id, task_id, seed, model from sessions s join (select session_id, "
            "(task ->> 'seed')::int as seed from session_started) using (session_id) "
            "where parent_session_id is not null order by started_at desc limit 1"
        )
        .rows[0]
    )


@pytest.mark.parametrize(
    ("policy", "grade", "rung"),
    [("ignore", "fail 0.00", "1 diverged"), ("retarget", "pass 1.00", "1 retargeted")],
)
def test_another_seed_earns_the_reward_only_when_retargeted(
    recorded: Recorded, store_copy: Path, policy: str, grade: str, rung: str
) -> None:
    out = invoke(
        store_copy,
        "replay",
        recorded.sessions["focus-text"],
        "--execute",
        "ops",
        "--seed",
        str(SEED),
        "--on-diverge",
        policy,
        "--settle",
        "0.1",
    )
    assert f"child:  finished, {grade} (miniwob)" in out, out
    assert rung in out, out
    _, task_id, seed, _ = _child(store_copy)
    assert (task_id, seed) == (f"focus-text-{SEED}", SEED)


def test_retarget_is_the_default_on_another_seed(recorded: Recorded, store_copy: Path) -> None:
    out = invoke(
        store_copy,
        "replay",
        recorded.sessions["focus-text"],
        "--execute",
        "actions",
        "--seed",
        str(SEED),
        "--settle",
        "0.1",
    )
    assert "child:  finished, pass 1.00 (miniwob)" in out and "re-targeted" in out, out


def test_fork_at_the_first_divergence_hands_the_step_to_the_expert(
    recorded: Recorded, store_copy: Path, expert: Live
) -> None:
    before = expert.calls()
    out = invoke(
        store_copy,
        "replay",
        recorded.sessions["focus-text"],
        "--execute",
        "ops",
        "--seed",
        str(SEED),
        "--on-diverge",
        "fork",
        "--endpoint",
        expert.url,
        "--model",
        "expert-live",
        "--settle",
        "0.1",
    )
    assert "child:  finished, pass 1.00 (miniwob)" in out, out
    assert "step 1 op 0: input" in out and "forked to the live model" in out, out
    child, _, _, model = _child(store_copy)
    assert model == "expert-live"
    steps = (
        open_store(store_copy)
        .sql(f"select step from model_calls where session_id = '{child}' order by step")
        .rows
    )
    assert steps == [(1,), (2,)]  # every step from the divergence on was the expert's
    assert expert.calls() - before == 2


def test_fork_needs_the_live_model(recorded: Recorded, store_copy: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "--store",
            str(store_copy),
            "replay",
            recorded.sessions["focus-text"],
            "--execute",
            "ops",
            "--on-diverge",
            "fork",
        ],
    )
    assert result.exit_code == 1
    assert result.output.endswith(
        "Error: --on-diverge fork needs the live model: pass --endpoint URL and --model NAME\n"
    )
