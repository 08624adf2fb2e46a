"""Issue 30: ``ownloop export --format inspect`` (real CLI) over the four agents' recorded runs,
read back with Inspect's own reader (``inspect_ai.log.read_eval_log``): a log per run, a sample
per session, its model events with their usage, its browser operations as tool events, its
screenshots as images and its grade as the score."""

from __future__ import annotations

from pathlib import Path

import pytest

from ownloop.store import open_store
from tests.transfer.conftest import invoke_ownloop

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:.*(no clone|not found)"),
]

inspect_log = pytest.importorskip("inspect_ai.log")


def test_every_run_reads_back_in_inspect_with_its_counts_and_scores(
    recorded_store: Path, tmp_path: Path
) -> None:
    from inspect_ai.event import ModelEvent, ToolEvent
    from inspect_ai.model import ChatMessageUser, ContentImage

    out = tmp_path / "inspect"
    result = invoke_ownloop(recorded_store, "export", "--format", "inspect", "--out", str(out))
    assert result.returncode == 0, result.stderr
    store = open_store(recorded_store)
    sessions = {
        row[0]: row[1:]
        for row in store.sql("select session_id, run_id, passed, task_id from sessions").rows
    }
    calls = dict(store.sql("select session_id, count(*) from model_calls group by 1").rows)
    tokens = dict(
        store.sql("select session_id, sum(prompt_tokens) from model_calls group by 1").rows
    )
    ops = dict(
        store.sql(
            "select session_id, count(*) from journal where kind = 'browser_acted' group by 1"
        ).rows
    )
    shots = dict(store.sql("select session_id, count(*) from screenshots group by 1").rows)
    runs = {run for run, _, _ in sessions.values()}
    logs = sorted(out.glob("*.eval"))
    assert len(logs) == len(runs) == 4
    seen = 0
    for path in logs:
        log = inspect_log.read_eval_log(str(path))
        assert log.status == "success" and log.samples
        assert log.eval.run_id in runs
        passed = []
        for sample in log.samples:
            run, ok, task = sessions[str(sample.id)]
            assert run == log.eval.run_id and sample.metadata["task_id"] == task
            models = [e for e in sample.events if isinstance(e, ModelEvent)]
            assert len(models) == calls[sample.id]
            assert sum(e.output.usage.input_tokens for e in models) == tokens[sample.id]
            assert len([e for e in sample.events if isinstance(e, ToolEvent)]) == ops[sample.id]
            images = [
                part
                for message in sample.messages
                if isinstance(message, ChatMessageUser) and isinstance(message.content, list)
                for part in message.content
                if isinstance(part, ContentImage)
            ]
            assert len(images) == shots[sample.id]
            assert sample.scores is not None
            assert sample.scores["ownloop"].value == (1.0 if ok else 0.0)
            passed.append(bool(ok))
            seen += 1
        [score] = log.results.scores
        assert score.metrics["accuracy"].value == sum(passed) / len(passed)
    assert seen == len(sessions)
