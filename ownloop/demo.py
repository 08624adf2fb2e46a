"""``ownloop demo``: the whole loop offline, on built-in tasks and a built-in model.

It serves MiniWoB++ pages from the ``miniwob`` package, starts the scripted expert endpoint (an
OpenAI-compatible HTTP server that answers in UI-TARS's grammar) on a free local port, records the
``uitars`` agent on the tasks with real headless Chromium, then shows the sessions and a query.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

from ownloop.modelserver.endpoint import Serving, make_server
from ownloop.recorder.command import summary_text
from ownloop.recorder.episode import EpisodeLimits
from ownloop.recorder.progress import RunProgress
from ownloop.recorder.runner import RecordOptions, record
from ownloop.store import Store, new_id
from ownloop.store.queries import sql_command
from ownloop.world.suites import load_suite

__all__ = ["DEMO_TASKS", "run_demo"]

DEMO_TASKS = (
    "click-button",
    "click-link",
    "enter-text",
    "focus-text",
    "click-checkboxes",
    "login-user",
)

_SESSIONS_QUERY = (
    "select task_id, status, steps, round(seconds, 1) as seconds, score, answer "
    "from sessions where run_id = $run order by task_id, repeat"
)

_EXAMPLE_QUERY = (
    "select e.op, e.element_tag, count(*) as n, round(avg(e.duration_ms)) as ms "
    "from effects e join sessions s using (session_id) where s.run_id = $run "
    "group by all order by n desc"
)


def run_demo(
    store: Store,
    *,
    tasks: int = 6,
    workers: int = 2,
    echo: Callable[[str], None] = print,
    repeats: int = 1,
    noise: float = 0.0,
    judge: bool = False,
) -> str:
    """Record uitars against the expert on ``tasks`` MiniWoB tasks, each ``repeats`` times,
    the expert wrong with probability ``noise`` per step; with ``judge``, then judge the run with
    the scripted judge (three repeats and controls) and print the judge's report. Returns the
    run id."""
    names = DEMO_TASKS[: max(1, min(tasks, len(DEMO_TASKS)))]
    pattern = "miniwob:" + ",".join(names)
    run_id = f"demo-{new_id(8)}"
    console = Console(highlight=False)
    progress = RunProgress(console)
    server = make_server("miniwob", "uitars", serving=Serving(noise=noise))
    with load_suite(suite=pattern) as suite, server as endpoint:
        echo(f"MiniWoB pages served locally; scripted expert model at {endpoint}")
        options = RecordOptions(
            agent="uitars",
            endpoint=endpoint,
            model="expert-uitars",
            run_id=run_id,
            workers=workers,
            limits=EpisodeLimits(max_steps=12, timeout_s=120.0),
            settle_s=0.2,
            argv=("ownloop", "demo"),
            repeats=repeats,
        )
        try:
            summary = record(
                store, suite, options, on_start=progress.on_start, on_result=progress.on_result
            )
        finally:
            progress.close()
    echo(summary_text(summary, store))
    console.print(store.sql(_SESSIONS_QUERY, {"run": run_id}).to_rich())
    echo("\n" + sql_command(_EXAMPLE_QUERY, run=run_id))
    console.print(store.sql(_EXAMPLE_QUERY, {"run": run_id}).to_rich())
    if judge:
        _judge_demo(store, run_id, echo)
    echo(
        f"\nThe store is in {store.root.resolve()}; replay a task with: "
        f"ownloop replay {names[0]} --run {run_id}"
    )
    return run_id


def _judge_demo(store: Store, run_id: str, echo: Callable[[str], None]) -> None:
    """Judge the demo's run with the scripted judge (a little noisy, so repeats disagree)."""
    from ownloop.modelserver import ModelServer
    from ownloop.modelserver.judge import ScriptedJudge
    from ownloop.replay.judging import JudgeOptions
    from ownloop.replay.judging import judge as judge_run

    with ModelServer(ScriptedJudge(noise=0.1), models=("scripted-judge",)) as endpoint:
        echo(f"\nThe scripted judge at {endpoint} judges the run (ownloop judge):")
        options = JudgeOptions(
            run_id=run_id, endpoint=endpoint, model="scripted-judge", repeat=3, controls=True
        )
        for line in judge_run(store, options).lines():
            echo(line)
