"""Seeing and re-running sessions: show, replay, diff (ownloop/replay/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ownloop.cli.common import (
    agent_option_option,
    api_key_option,
    chromium_option,
    console,
    desktop_option,
    echo_lines,
    exit_interrupted,
    format_option,
    friendly,
    on_miss_option,
    print_rows,
    reading,
    released_option,
    reset_option,
    run_option,
    settle_option,
    store_of,
    where_option,
)

if TYPE_CHECKING:
    from ownloop.replay.cassette import OnMiss
    from ownloop.replay.fold import Session
    from ownloop.replay.options import ReplayOptions
    from ownloop.store import Store

__all__ = ["COMMANDS", "diff", "replay", "show"]


def _print_session(session: Any, fmt: str) -> None:
    from ownloop.replay.render import session_view
    from ownloop.replay.tables import session_rows

    if fmt == "json":
        click.echo(session.to_json())
    elif fmt == "csv":
        click.echo(session_rows(session).to_csv(), nl=False)
    else:
        console().print(session_view(session))


@click.command()
@click.argument("target")
@run_option("Look for TARGET's task in this run (default: the latest).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the rebuilt session as JSON (--format json)."
)
@format_option("the session (CSV: a row per step)")
@click.pass_context
@friendly
def show(ctx: click.Context, target: str, run_id: str | None, as_json: bool, fmt: str) -> None:
    """Rebuild a session (TARGET: a session id, or a task id) offline and print it step by step.

    Example: ownloop show click-button --run r1
    """
    from ownloop.replay.target import load_session

    with reading(ctx) as store:
        session = load_session(store, target, run_id)
    _print_session(session, "json" if as_json else fmt)


@click.command()
@click.argument("target", required=False)
@run_option(
    "TARGET's run (default: the latest that has it); alone "
    "with --reparse: every session of the run."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (--format json).")
@format_option("the session or the re-execution's summary (CSV: a row per step)")
@click.option(
    "--reparse",
    is_flag=True,
    help="Parse the recorded responses again with today's "
    "parser and translator; list the steps that change. Writes nothing.",
)
@click.option(
    "--execute",
    type=click.Choice(["ops", "actions", "responses"]),
    help="Re-run in a fresh browser: recorded ops, re-translated actions, or the agent "
    "loop on recorded responses.",
)
@click.option("--fork-at", type=int, metavar="K", help="Replay steps before K, then go live.")
@click.option("--endpoint", help="Live OpenAI-compatible endpoint for --fork-at.")
@click.option("--model", help="The live model's name for --fork-at.")
@api_key_option("Key for --endpoint (never recorded).")
@settle_option()
@chromium_option()
@agent_option_option("Agent option over the recorded ones, e.g. -o notch_px=50.")
@released_option()
@on_miss_option("When no recorded response matches a request.")
@click.option(
    "--on-diverge",
    type=click.Choice(["stop", "retarget", "fork", "ignore"]),
    help="--execute ops|actions: when a pointer op meets another element than "
    "recorded: stop, re-find the element, hand over to --endpoint, or act anyway "
    "(default: ignore; retarget for ops|actions with --seed/--base).",
)
@click.option(
    "--seed",
    type=int,
    metavar="S",
    help="--execute: replay a MiniWoB session on seed S of its task.",
)
@click.option(
    "--base",
    metavar="URL",
    help="--execute: replay a tasks-file session against another deployment at URL.",
)
@desktop_option("--execute: the desktop server to re-execute a desktop session on.")
@reset_option("--desktop: reset it first (a host command with {url}, or 'server').")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=2,
    help="--run R --execute without TARGET: sessions at once, each worker reusing one browser.",
)
@where_option("--run R --execute without TARGET: a SQL condition over sessions.")
@click.pass_context
@friendly
def replay(
    ctx: click.Context,
    target: str | None,
    run_id: str | None,
    as_json: bool,
    fmt: str,
    reparse: bool,
    execute: str | None,
    fork_at: int | None,
    endpoint: str | None,
    model: str | None,
    api_key: str | None,
    settle: float,
    chromium: str | None,
    agent_option: tuple[str, ...],
    released: str | None,
    on_miss: OnMiss,
    on_diverge: str | None,
    seed: int | None,
    base: str | None,
    desktop: str | None,
    reset: str | None,
    workers: int,
    where: str | None,
) -> None:
    """Rebuild a session offline and print it, re-parse it, or re-execute it in a browser.

    Examples: ownloop replay click-button; ownloop replay --run r1 --reparse -o scroll_notches=3;
    ownloop replay click-button --execute ops --seed 7 --on-diverge retarget;
    ownloop replay --run r1 --execute ops --workers 2 (every recorded session of r1)
    """
    from ownloop.replay.options import ReplayOptions
    from ownloop.replay.target import load_session
    from ownloop.world.pool import DesktopTarget

    store = store_of(ctx, create=False)
    fmt = "json" if as_json else fmt
    if reparse:
        from ownloop.replay.reparse import reparse_target

        report = reparse_target(store, target, run_id, agent_option)
        if fmt == "json":
            click.echo(report.to_json())
        else:
            echo_lines(report.lines())
        return
    options = ReplayOptions(
        fork_at=fork_at,
        endpoint=endpoint,
        model=model,
        api_key=api_key,
        settle_s=settle,
        chromium=chromium,
        agent_options=agent_option,
        on_miss=on_miss,
        run_id=run_id,
        released=released,
        on_diverge=on_diverge,
        seed=seed,
        base=base,
        desktop=DesktopTarget(desktop, reset or None) if desktop else None,
    )
    if not target and run_id and execute:
        _replay_run(store, run_id, execute, options, workers, where, fmt)
        return
    session = load_session(store, target, run_id)
    if execute or fork_at is not None:
        _replay_session(store, session, execute, options, fmt)
        return
    _print_session(session, fmt)


def _replay_run(
    store: Store,
    run_id: str,
    execute: str,
    options: ReplayOptions,
    workers: int,
    where: str | None,
    fmt: str,
) -> None:
    """``replay --run R --execute MODE``: every recorded session of the run, a row each."""
    from ownloop.replay import batch

    batched = batch.replay_run(store, run_id, execute, options, workers=workers, where=where)
    if fmt == "json":
        click.echo(batch.batch_document(batched))
    else:
        print_rows(batch.batch_rows(batched), fmt, max_rows=0)
        if fmt == "table":
            echo_lines([batch.batch_totals(batched)])
    if batched.interrupted:
        exit_interrupted()


def _replay_session(
    store: Store, session: Session, execute: str | None, options: ReplayOptions, fmt: str
) -> None:
    """``replay TARGET --execute MODE`` or ``--fork-at K``: one re-execution and its summary."""
    from ownloop.replay.execute import replay_session
    from ownloop.replay.summary import summary_text
    from ownloop.replay.tables import replay_document, replay_rows
    from ownloop.replay.target import check_replayable

    check_replayable(session, "fork" if options.fork_at is not None else str(execute))
    done = replay_session(store, session, execute, options)
    if fmt == "table":
        echo_lines(summary_text(done).splitlines())
    else:
        click.echo(
            replay_rows(done.parent, done.child).to_csv()
            if fmt == "csv"
            else replay_document(done.parent, done.child),
            nl=fmt == "json",
        )


@click.command()
@click.argument("a")
@click.argument("b")
@run_option("Look for task ids in this run (default: the latest).")
@format_option("the comparison (CSV: a row per step)")
@click.pass_context
@friendly
def diff(ctx: click.Context, a: str, b: str, run_id: str | None, fmt: str) -> None:
    """Two sessions (or tasks' latest sessions) side by side: actions, URLs, screenshots, outcome.

    Exit status 0 when they are identical, 1 when they differ.
    Example: ownloop diff 3f2a9c8b1d0e 3f2a9c8b1d0f
    """
    from ownloop.replay.diff import diff_sessions, diff_view
    from ownloop.replay.tables import diff_document, diff_rows
    from ownloop.replay.target import load_session

    store = store_of(ctx, create=False)
    result = diff_sessions(load_session(store, a, run_id), load_session(store, b, run_id))
    if fmt == "table":
        console(soft_wrap=False).print(diff_view(result))
    else:
        click.echo(
            diff_rows(result).to_csv() if fmt == "csv" else diff_document(result), nl=fmt == "json"
        )
    ctx.exit(0 if result.identical else 1)


COMMANDS = (show, replay, diff)
