"""Recording: record, demo, agents."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ownloop.cli.common import (
    agent_option_option,
    api_key_option,
    chromium_option,
    desktop_option,
    echo,
    echo_lines,
    exit_interrupted,
    friendly,
    noise_option,
    notice,
    released_option,
    remove_if_unused,
    repeat_option,
    reset_option,
    run_option,
    settle_option,
    store_of,
)
from ownloop.store import DEFAULT_STORE

__all__ = ["COMMANDS", "agents", "demo", "record"]


@click.command()
@click.argument("agent")
@click.option("--suite", help="A built-in suite, e.g. miniwob or 'miniwob:click-*' (quoted).")
@click.option("--tasks", "tasks_file", type=click.Path(dir_okay=False), help="A JSON tasks file.")
@click.option("--base", help="Replaces {BASE} in the tasks file's URLs.")
@click.option("--seeds", help="MiniWoB seeds: N, N-M or a comma list (default: fixed per task).")
@click.option(
    "--endpoint",
    required=True,
    multiple=True,
    help="OpenAI-compatible base URL, e.g. "
    "http://127.0.0.1:8000/v1; several: a pool the sessions take in turn.",
)
@click.option("--model", required=True, help="The served model's name.")
@api_key_option("Key for the endpoint (never recorded).")
@run_option("The run's name; the same name resumes it.")
@click.option("--workers", default=2, help="Tasks at once, each with a browser.")
@repeat_option("Run each task N times (repeats sample the agent; attempts retry errors).")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Only the suite's first N tasks (as inspect eval --limit).",
)
@click.option(
    "--max-steps",
    default=40,
    type=click.IntRange(min=1),
    help="The step budget: policy turns (model decisions) per session.",
)
@click.option(
    "--timeout",
    default=1800.0,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds per task.",
)
@click.option(
    "--require-clean",
    is_flag=True,
    help="Refuse to start from an ownloop checkout with uncommitted changes.",
)
@click.option(
    "--expect-suite",
    metavar="SHA256",
    help="Refuse to start unless the suite's source hash is this (runs.tasks_sha256).",
)
@click.option("--error-retries", type=int, help="Re-run error/parse_error sessions K times.")
@settle_option()
@chromium_option()
@click.option("--frequency-penalty", type=float, help="uitars: sampling option (OSWorld sends 1).")
@agent_option_option("Agent setting.")
@released_option()
@click.option("--retries", default=3, help="Retries of a failed model call.")
@click.option("--retry-wait", default=5.0, help="Seconds between retries.")
@click.option("--call-timeout", default=120.0, help="Seconds per model call.")
@click.option(
    "--allow-host",
    multiple=True,
    metavar="GLOB",
    help="Confine the model's navigation "
    "to these hosts, e.g. '*.example.com' (repeatable; http(s) only in any case).",
)
@click.option(
    "--executor",
    type=click.Choice(["threads", "ray"]),
    default="threads",
    help="Where sessions run: threads here, or Ray actors on a "
    "cluster (needs ownloop[ray] and a store every node mounts).",
)
@click.option(
    "--ray-address",
    metavar="auto|HOST:PORT",
    help="--executor ray: the cluster (default: $RAY_ADDRESS, else a Ray started on this machine).",
)
@desktop_option(
    "An OSWorld-protocol desktop server, e.g. http://127.0.0.1:5000 (repeatable: one "
    "worker per desktop); for --suite osworld:DIR.",
    multiple=True,
)
@reset_option(
    "A host command run before each desktop task, e.g. a snapshot revert; {url} in it is "
    "the desktop's URL."
)
@click.option("--a11y", is_flag=True, help="Keep each desktop step's accessibility tree.")
@click.option(
    "--keep-png", is_flag=True, help="Keep screenshots as the browser's PNG bytes (no WebP)."
)
@click.option(
    "--max-endpoint-errors",
    default=3,
    type=click.IntRange(min=0),
    help="Stop the run after this many sessions in a row end endpoint_error (0: never).",
)
@click.pass_context
@friendly
def record(
    ctx: click.Context,
    agent: str,
    suite: str | None,
    tasks_file: str | None,
    base: str | None,
    seeds: str | None,
    endpoint: tuple[str, ...],
    model: str,
    api_key: str | None,
    run_id: str | None,
    workers: int,
    repeat: int,
    limit: int | None,
    max_steps: int,
    timeout: float,
    require_clean: bool,
    expect_suite: str | None,
    error_retries: int | None,
    settle: float,
    chromium: str | None,
    frequency_penalty: float | None,
    agent_option: tuple[str, ...],
    released: str | None,
    retries: int,
    retry_wait: float,
    call_timeout: float,
    allow_host: tuple[str, ...],
    executor: str,
    ray_address: str | None,
    desktop: tuple[str, ...],
    reset: str | None,
    a11y: bool,
    keep_png: bool,
    max_endpoint_errors: int,
) -> None:
    """Run AGENT on every task and record everything it does.

    Example: ownloop record uitars --suite 'miniwob:click-*' --endpoint http://127.0.0.1:8000/v1
    --model uitars15-7b. Exit status: 0 done, 1 refused, 3 a session ended error, endpoint_error
    or crashed, 4 stopped early, 130 interrupted.
    """
    from ownloop.agents import released_texts
    from ownloop.recorder.command import (
        agent_options,
        exit_code,
        record_run,
        suite_source,
        summary_text,
    )
    from ownloop.recorder.episode import EpisodeLimits
    from ownloop.recorder.runner import RecordOptions

    path = Path(ctx.obj.get("store") or os.environ.get("OWNLOOP_STORE") or DEFAULT_STORE)
    made_here = not path.exists()
    store = store_of(ctx)
    try:
        options = RecordOptions(  # keyword order is check order: the suite's first
            suite_source=suite_source(suite, tasks_file, base, seeds),
            agent=agent,
            released=released_texts(agent, released),
            endpoint=endpoint[0],
            endpoints=endpoint,
            model=model,
            api_key=api_key,
            agent_options=agent_options(agent, agent_option, frequency_penalty),
            run_id=run_id,
            workers=workers,
            limits=EpisodeLimits(max_steps, timeout),
            error_retries=error_retries,
            settle_s=settle,
            chromium=chromium,
            call_retries=retries,
            call_retry_wait_s=retry_wait,
            call_timeout_s=call_timeout,
            require_clean=require_clean,
            expect_suite=expect_suite,
            argv=tuple(sys.argv),
            allow_hosts=allow_host,
            max_endpoint_errors=max_endpoint_errors,
            repeats=repeat,
            limit=limit,
            executor=executor,
            ray_address=ray_address,
            desktops=desktop,
            reset=reset,
            a11y=a11y,
            keep_png=keep_png,
        )
        summary = record_run(store, options, notify=notice)
    except Exception:
        if made_here:  # refused before writing anything: leave no empty store behind
            remove_if_unused(path)
        raise
    echo(summary_text(summary, store))  # its query hint names --store when it is not the default
    if summary.interrupted:
        exit_interrupted()
    ctx.exit(exit_code(summary))


@click.command()
@click.option("--tasks", "count", default=6, help="How many MiniWoB tasks.")
@click.option("--workers", default=2)
@repeat_option("Run each task N times.")
@noise_option
@click.option("--judge", is_flag=True, help="Then judge the run with the scripted judge.")
@click.pass_context
@friendly
def demo(
    ctx: click.Context, count: int, workers: int, repeat: int, noise: float, judge: bool
) -> None:
    """The whole loop offline: MiniWoB tasks, the scripted expert model, a real Chromium.

    Example: ownloop demo --repeat 5 --noise 0.3 (then: ownloop sql "select * from flips")
    """
    from ownloop.demo import run_demo

    run_demo(
        store_of(ctx),
        tasks=count,
        workers=workers,
        echo=echo,
        repeats=repeat,
        noise=noise,
        judge=judge,
    )


@click.command()
@click.argument("name", required=False)
@released_option("Clones of the models' released code, to say which prompt texts are found.")
@friendly
def agents(name: str | None, released: str | None) -> None:
    """The agents; with NAME, its options (-o KEY=VALUE) with defaults and meanings, where its
    prompt comes from, and where it deviates from the released loop. Example: ownloop agents fara7b
    """
    from ownloop.agents.describe import agent_lines, agents_lines

    echo_lines(agent_lines(name, released) if name else agents_lines(released))


COMMANDS = (record, demo, agents)
