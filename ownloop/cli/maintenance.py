"""Keeping the store: verify, seal, archive, index, compact."""

from __future__ import annotations

import sys

import click

from ownloop.cli.common import echo, echo_lines, friendly, run_option, store_of

__all__ = ["COMMANDS", "archive", "compact", "index_command", "seal", "verify"]


@click.command()
@click.option("--strict", is_flag=True, help="Exit with status 1 on warnings (torn tails) too.")
@run_option("Check this sealed run against its seal as well.")
@click.option(
    "--fingerprint",
    metavar="SHA256",
    help="With --run: the fingerprint you cite (a prefix will do); another seal is an error.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Read every stream and hash every blob again, even "
    "those unchanged since the last check without an error.",
)
@click.pass_context
@friendly
def verify(
    ctx: click.Context, strict: bool, run_id: str | None, fingerprint: str | None, full: bool
) -> None:
    """Check every journal stream's hash chain, every catalog and seal, and every blob: what
    changed since the last check without an error, or (--full) everything, on every core.

    One line per problem, then a summary. A torn tail (a writer killed mid-write) is a warning;
    anything else is an error and makes the exit status 1. Example: ownloop verify --run r1
    """
    if fingerprint and not run_id:
        raise click.UsageError("--fingerprint goes with --run")
    report = store_of(ctx, create=False).verify(
        run_id=run_id, fingerprint=fingerprint, incremental=not full
    )
    for problem in report.problems:
        click.echo(problem.line())
    click.echo(report.summary())
    ctx.exit(report.exit_code(strict=strict))


@click.command()
@run_option("The run to audit and seal.", required=True)
@click.option("--archive", "then_archive", is_flag=True, help="Then archive it (see archive).")
@click.pass_context
@friendly
def seal(ctx: click.Context, run_id: str, then_archive: bool) -> None:
    """Audit a run and, only if the audit passes, seal it: print its fingerprint to cite.

    Exit status 1, with each reason, when the audit fails (nothing is sealed).
    Example: ownloop seal --run r1
    """
    from ownloop.store.archive import archive_runs
    from ownloop.store.seal import seal_run

    store = store_of(ctx, create=False)
    result = seal_run(store, run_id)
    echo_lines(result.lines())
    if result.seal is not None and then_archive:
        echo_lines(archived.line() for archived in archive_runs(store, [run_id]))
    ctx.exit(0 if result.seal is not None else 1)


@click.command()
@run_option("A sealed run to archive (repeatable).", multiple=True)
@click.option("--all-sealed", is_flag=True, help="Archive every sealed run not archived yet.")
@click.pass_context
@friendly
def archive(ctx: click.Context, run_ids: tuple[str, ...], all_sealed: bool) -> None:
    """Move sealed runs out of the DuckDB index into Parquet files (archive/<run>/) that the
    index reads through views: every query answers the same, the index file stays small and
    `index --rebuild` reads only the other runs' streams.
    Example: ownloop archive --run r1
    """
    from ownloop.store.archive import archive_runs

    if bool(run_ids) == all_sealed:
        raise click.UsageError("give --run R (one or more) or --all-sealed")
    results = archive_runs(store_of(ctx, create=False), None if all_sealed else list(run_ids))
    echo_lines(result.line() for result in results)


@click.command("index")
@click.option("--rebuild", is_flag=True, help="Drop the index and ingest the whole journal again.")
@click.option(
    "--drop", is_flag=True, help="Remove the index (bytes back); the next query builds it again."
)
@click.option(
    "--accept-damaged",
    is_flag=True,
    help="With --rebuild: project lines whose "
    "checksum or chain fails too (they stay listed in the damage view).",
)
@click.pass_context
@friendly
def index_command(ctx: click.Context, rebuild: bool, drop: bool, accept_damaged: bool) -> None:
    """Bring the DuckDB index up to date with the journal, or rebuild it from nothing.

    Damaged lines (an edited line, a removed one) are quarantined: not projected, listed in the
    damage view. Example: ownloop index --rebuild
    """
    if accept_damaged and not rebuild:
        raise click.UsageError("--accept-damaged goes with --rebuild")
    if drop and rebuild:
        raise click.UsageError("--drop and --rebuild: one or the other")
    store = store_of(ctx, create=False)
    if drop:
        freed = store.index().drop()
        echo(f"index: dropped ({freed / 1e6:.1f} MB); the next query builds it from the journal")
        return
    echo(
        (store.rebuild_index(accept_damaged=accept_damaged) if rebuild else store.sync()).summary()
    )


@click.command()
@click.option("--keep-png", is_flag=True, help="Keep each PNG's exact bytes beside its WebP.")
@click.pass_context
@friendly
def compact(ctx: click.Context, keep_png: bool) -> None:
    """Re-encode PNG blobs as lossless WebP (pixel-identical, checked by decoding both).

    Blobs keep their names; the exact PNG bytes are not kept unless --keep-png. Safe to stop
    and run again. Example: ownloop compact
    """
    from ownloop.store.compact import compact_blobs

    blobs = store_of(ctx, create=False).blobs
    if not sys.stderr.isatty():  # a log: a line every 1,000 blobs

        def line(done: int, todo: int) -> None:
            if done % 1000 == 0:
                click.echo(f"compact: {done} of {todo} blobs", err=True)

        echo(compact_blobs(blobs, keep_png=keep_png, progress=line).summary())
        return
    with click.progressbar(length=1, label="compact", file=sys.stderr) as bar:

        def progress(done: int, todo: int) -> None:
            bar.length = todo
            bar.update(done - bar.pos)

        report = compact_blobs(blobs, keep_png=keep_png, progress=progress)
    echo(report.summary())


COMMANDS = (verify, seal, archive, index_command, compact)
