"""Grading what was recorded: judge, regrade, compare, audit."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import click

from ownloop.cli.common import (
    F,
    api_key_option,
    chromium_option,
    console,
    desktop_option,
    echo_lines,
    format_option,
    friendly,
    print_rows,
    repeat_option,
    reset_option,
    rows_format_option,
    run_option,
    settle_option,
    store_of,
    where_option,
)
from ownloop.store.text import visible

if TYPE_CHECKING:  # the audits are imported when one runs
    from ownloop.replay.audit import BlindAudit
    from ownloop.replay.noop import NoopAudit
    from ownloop.world.pool import DesktopTarget

__all__ = ["COMMANDS", "audit", "compare", "judge", "regrade"]


@click.command()
@click.argument("target", required=False)
@run_option("The run whose sessions to judge (or TARGET's run).")
@where_option()
@click.option(
    "--judge",
    "judge_name",
    default="final",
    metavar="NAME|FILE",
    help="final, webjudge, or a judge file (JSON: name, system, prompt, verdict, pass).",
)
@click.option("--endpoint", metavar="URL", help="The judge model's OpenAI-compatible endpoint.")
@click.option(
    "--model", default="", metavar="M", show_default=False, help="The judge model's name."
)
@api_key_option("Sent as a Bearer token; never recorded.")
@repeat_option()
@click.option(
    "--controls", is_flag=True, help="Also judge each session blanked and answer-swapped."
)
@click.option("--replay", is_flag=True, help="Answer from the recorded judge calls, no model.")
@click.option(
    "--report", "report_only", is_flag=True, help="Judge nothing: report what was judged."
)
@click.pass_context
@friendly
def judge(
    ctx: click.Context,
    target: str | None,
    run_id: str | None,
    where: str | None,
    judge_name: str,
    endpoint: str | None,
    model: str,
    api_key: str | None,
    repeat: int,
    controls: bool,
    replay: bool,
    report_only: bool,
) -> None:
    """Judge recorded sessions with a model, offline; report the judge's agreement with the rule
    graders, with itself over repeats, and on controls.

    Example: ownloop judge --run r1 --endpoint http://127.0.0.1:8000/v1 --model qwen --repeat 3
    """
    from ownloop.replay.judging import JudgeOptions, judge

    if target is None and run_id is None:
        raise click.UsageError("name the sessions to judge: a TARGET or --run R")
    options = JudgeOptions(
        judge=judge_name,
        run_id=run_id,
        target=target,
        where=where,
        endpoint=endpoint,
        model=model,
        api_key=api_key,
        repeat=repeat,
        controls=controls,
        replay=replay,
        report_only=report_only,
    )
    echo_lines(judge(store_of(ctx, create=False), options).lines())


@click.command()
@run_option("Only this run's sessions.")
@click.option("--task", "task_id", help="Only this task's sessions.")
@where_option()
@click.option(
    "--grader",
    help="One grader spec for all, e.g. answer:contains:42 (default: each "
    "session's own task grader).",
)
@click.option(
    "--tasks",
    "tasks_file",
    type=click.Path(dir_okay=False),
    help="Take each task's grader from this tasks file.",
)
@click.option("--dry-run", is_flag=True, help="Print what would flip; append no grade.")
@format_option("the result (CSV: a row per flipped session)")
@click.pass_context
@friendly
def regrade(
    ctx: click.Context,
    run_id: str | None,
    task_id: str | None,
    where: str | None,
    grader: str | None,
    tasks_file: str | None,
    dry_run: bool,
    fmt: str,
) -> None:
    """Grade sessions again offline; append the new grades, print what flipped.

    Example: ownloop regrade --run r1 --grader "answer:exact:42" --dry-run
    """
    from ownloop.replay.regrade import graders_from_tasks_file, regrade
    from ownloop.replay.tables import regrade_document, regrade_rows

    tasks = graders_from_tasks_file(tasks_file) if tasks_file else None
    result = regrade(
        store_of(ctx, create=False),
        run_id=run_id,
        task_id=task_id,
        where=where,
        grader=grader,
        tasks=tasks,
        dry_run=dry_run,
    )
    if fmt == "table":
        echo_lines(result.lines())
    else:
        click.echo(
            regrade_rows(result).to_csv() if fmt == "csv" else regrade_document(result),
            nl=fmt == "json",
        )


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@rows_format_option("Output format.")
@click.option(
    "--fail-if-worse",
    "delta",
    type=click.FloatRange(min=0),
    metavar="DELTA",
    help="Exit 1 when B is worse than A by more than DELTA with confidence, when fewer than "
    "--min-tasks tasks are shared, or when a run would fail the seal's completeness audit "
    "(unless --errors exclude).",
)
@click.option(
    "--errors",
    type=click.Choice(["fail", "exclude", "refuse"]),
    help="Units with no graded session (endpoint_error, crashed, missing...): count them as "
    "failures (fail, the default), leave them out (exclude), or refuse to compare (refuse).",
)
@click.option(
    "--min-tasks",
    default=5,
    type=click.IntRange(min=1),
    help="--fail-if-worse refuses to pass over fewer shared tasks than this.",
)
@click.option(
    "--by-domain",
    is_flag=True,
    help="table: also each domain's pass rates (OSWorld's chrome, gimp, ...) and every shared "
    "task's first divergent step.",
)
@click.option(
    "--grader",
    default="rule",
    metavar="rule|judge:NAME",
    help="Whose grades score the units: the rule graders, or a model judge's verdicts "
    "(ownloop judge; the majority of its repeats). The two are never mixed.",
)
@click.pass_context
@friendly
def compare(
    ctx: click.Context,
    run_a: str,
    run_b: str,
    fmt: str,
    delta: float | None,
    errors: str | None,
    min_tasks: int,
    by_domain: bool,
    grader: str,
) -> None:
    """Run B against run A per task: pass rates (errored units counted as failures), B - A with
    the paired t interval and a paired bootstrap, a test of no difference, the tasks solved by
    one run only and where each first diverged.

    Example: ownloop compare baseline candidate --fail-if-worse 0.05
    """
    from ownloop.replay.compare import compare_runs, comparison_view

    policy: Any = errors or "fail"
    result = compare_runs(
        store_of(ctx), run_a, run_b, errors=policy, min_tasks=min_tasks, grader=grader
    )
    if fmt == "table":
        console(soft_wrap=False).print(comparison_view(result))  # a pipe gets its full width
        echo_lines(result.score_lines())  # whole lines, never wrapped
        if by_domain:
            from ownloop.replay.domains import domain_report

            echo_lines(domain_report(store_of(ctx), result))
    else:
        click.echo(result.to_csv() if fmt == "csv" else result.to_json(), nl=fmt == "json")
    if delta is not None:
        reasons = result.gate(delta, check_complete=errors != "exclude")
        for reason in reasons:
            click.echo(visible(reason, one_line=True), err=True)
        if reasons:
            ctx.exit(1)


def _audit_options(command: F) -> F:
    """What every audit that replays takes: ``--chromium``, where it replays a desktop run's
    tasks (``--desktop URL`` and ``--reset CMD``, given to the command as one ``desktop``, a
    ``DesktopTarget`` or None) and ``--format``."""

    @functools.wraps(command)
    def on_desktop(*args: Any, desktop: str | None, reset: str | None, **kwargs: Any) -> Any:
        from ownloop.world.pool import DesktopTarget

        target = DesktopTarget(desktop, reset or None) if desktop else None
        return command(*args, desktop=target, **kwargs)

    wrapped: Any = on_desktop
    for option in (  # bottom up: --help lists them top down
        format_option("the audit (a row per task)"),
        reset_option(
            "--desktop: reset it before each replay (a host command with {url}, or 'server')."
        ),
        desktop_option("A desktop run's tasks: the desktop server to replay them on."),
        chromium_option("Path to a Chromium to drive."),
    ):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[no-any-return]


def _print_audit(result: BlindAudit | NoopAudit, fmt: str) -> None:
    """An audit's rows, then (as a table) its summary lines."""
    print_rows(result.rows, fmt)
    if fmt == "table":
        echo_lines(result.lines())


@click.group()
def audit() -> None:
    """Audit a benchmark with what a run recorded. Example: ownloop audit blind --run r1;
    ownloop audit noop --run r1"""


@audit.command("blind")
@run_option("The run whose passing sessions to replay.", required=True)
@click.option(
    "--seeds",
    help="MiniWoB seeds to replay on: N, N-M or a comma list (default: 1-3, "
    "the task's own left out).",
)
@settle_option(0.2)
@_audit_options
@click.pass_context
@friendly
def audit_blind_command(
    ctx: click.Context,
    run_id: str,
    seeds: str | None,
    settle: float,
    chromium: str | None,
    desktop: DesktopTarget | None,
    fmt: str,
) -> None:
    """Replay each passing task's recorded operations blind (no model, no screenshot read) on
    other seeds (a desktop task: on a reset desktop); a task a blind replay passes is
    non_discriminative.

    Example: ownloop audit blind --run r1 --seeds 1-5;
    ownloop audit blind --run r2 --desktop URL --reset server
    """
    from ownloop.replay.audit import audit_blind

    result = audit_blind(
        store_of(ctx, create=False),
        run_id,
        seeds,
        settle_s=settle,
        chromium=chromium,
        on_replay=lambda task, seed, passed: click.echo(
            f"{task} blind on {'the reset desktop' if seed is None else f'seed {seed}'}: "
            f"{'ungraded' if passed is None else 'pass' if passed else 'fail'}",
            err=True,
        ),
        desktop=desktop,
    )
    _print_audit(result, fmt)


@audit.command("noop")
@run_option("The run whose tasks to grade untouched.", required=True)
@click.option(
    "--threshold",
    default=0.2,
    type=click.FloatRange(0, 1),
    help="Flag a task whose untouched start state scores above this (or passes).",
)
@settle_option(0.2, "Pause after setup, seconds.")
@_audit_options
@click.pass_context
@friendly
def audit_noop_command(
    ctx: click.Context,
    run_id: str,
    threshold: float,
    settle: float,
    chromium: str | None,
    desktop: DesktopTarget | None,
    fmt: str,
) -> None:
    """Grade each task's untouched start state (its setup on the episode the run used, no
    action, its graders): a task that scores above --threshold with no action is flagged
    (views noop_audit, passes_untouched; seal lists them).

    Example: ownloop audit noop --run r1; ownloop audit noop --run r2 --desktop URL --reset server
    """
    from ownloop.replay.noop import audit_noop

    result = audit_noop(
        store_of(ctx, create=False),
        run_id,
        threshold=threshold,
        settle_s=settle,
        chromium=chromium,
        on_replay=lambda task, score: click.echo(
            f"{task} untouched: {'ungraded' if score is None else f'score {score:g}'}", err=True
        ),
        desktop=desktop,
    )
    _print_audit(result, fmt)


COMMANDS = (judge, regrade, compare, audit)
