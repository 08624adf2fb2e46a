"""The ``ownloop`` command: thin click commands, each one call into the library."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import click

from ownloop.store import DEFAULT_STORE, Store, open_store
from ownloop.store.disk import disk_error
from ownloop.store.errors import OwnloopError
from ownloop.store.events import Status
from ownloop.store.extras import missing_extra
from ownloop.store.text import visible
from ownloop.version import __version__

if TYPE_CHECKING:
    from rich.console import Console  # loaded when a command draws a table: not for csv/json

__all__ = ["cli", "main"]


def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the library's one-line errors into click errors (no traceback).

    A read-only store, a full disk or a file in the way that the library did not already explain
    is still one line naming the path and the fix; any other OSError is a bug and shows as one.
    A package that only an install extra brings (Playwright for ``record``) names the extra.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OwnloopError as exc:
            raise click.ClickException(_hinted(str(exc))) from None
        except OSError as exc:
            explained = disk_error(exc)
            if explained is None:
                raise
            raise click.ClickException(str(explained)) from None
        except ModuleNotFoundError as exc:  # a package of an install extra the user left out
            missing = missing_extra(exc, click.get_current_context().command_path)
            if missing is None:
                raise
            raise click.ClickException(str(missing)) from None

    return wrapper


def _echo_lines(lines: Iterable[str]) -> None:
    """Print lines that carry recorded text (ids, file names, answers) with controls visible."""
    click.echo(_hinted("\n".join(visible(line, one_line=True) for line in lines)))


def _echo(text: str) -> None:
    """Print the library's text, its ``ownloop ...`` hints naming the store (see ``_hinted``)."""
    click.echo(_hinted(text))


def _hinted(text: str) -> str:
    """``text`` with every ``ownloop COMMAND`` hint in it carrying ``--store DIR`` when the store
    is not the default one, so that pasting the hint works wherever it is pasted.

    A hint is ``ownloop`` then a command's name; ``ownloop sql only reads`` and a server's
    ``ownloop view: URL`` line are prose, not hints.
    """
    ctx = click.get_current_context(silent=True)
    obj = ctx.obj if ctx is not None else None
    store = obj.get("store") if isinstance(obj, dict) else None
    if not store or Path(store).resolve() == Path(DEFAULT_STORE).resolve():
        return text
    names = "|".join(re.escape(name) for name in sorted(cli.commands, key=len, reverse=True))
    return re.sub(
        rf"\bownloop (?=(?:{names})(?![\w:-])(?! only\b))",
        f"ownloop --store {shlex.quote(str(store))} ",
        text,
    )


def _console(*, soft_wrap: bool = True) -> Console:
    """A console for recorded text (no markup, no highlighting). Written to a pipe or a file, a
    table keeps its full width: rich would otherwise cut it to 80 columns there."""
    from rich.console import Console

    console = Console(soft_wrap=soft_wrap, markup=False, highlight=False)
    if not console.is_terminal:
        console.width = _PIPE_WIDTH
    return console


_PIPE_WIDTH = 100_000  # wider than any table we print: rich sizes a table to its content
_FORMATS = click.Choice(["table", "csv", "json"])


_PIPE_ROWS = 1_000  # a table to a pipe or a file shows this many rows unless --max-rows says
_max_rows_option = click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    metavar="N",
    help="A table shows at most N rows, 0: all (default: what fits the terminal, 1,000 to a "
    "pipe). CSV and JSON print every row.",
)


def _table_rows(max_rows: int | None) -> int | None:
    """The rows a table shows (None: all): ``--max-rows``, else what fits the terminal, else
    1,000 to a pipe."""
    if max_rows is not None:
        return max_rows or None
    console = _console()
    # The top rule, header, rule, bottom rule, caption, the line it may wrap to, the prompt.
    return max(console.height - 7, 5) if console.is_terminal else _PIPE_ROWS


def _print_rows(result: Any, fmt: str, max_rows: int | None = None) -> None:
    """A ``QueryResult`` as a table (at most ``max_rows`` rows: see ``_max_rows_option``), CSV
    or a JSON array of objects. A pipe gets plain lines, drawn in time linear in the rows; a
    terminal gets Rich's table, fitted to its width."""
    if fmt == "table":
        shown, console = _table_rows(max_rows), _console()
        if console.is_terminal:
            console.print(result.to_rich(shown))
        else:
            click.echo("\n".join(result.to_text(shown)))
    else:
        click.echo(result.to_csv() if fmt == "csv" else result.to_json(), nl=fmt == "json")


def _exit_interrupted() -> None:
    """Leave at once with 130, as after Ctrl-C: every event is already fsync'd, and skipping the
    interpreter's teardown avoids a crash in it while Playwright's threads wind down."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def _store(ctx: click.Context, *, create: bool = True) -> Store:
    """The store the command names; ``create=False`` for commands that only use what is there
    (a folder that holds no store is then a one-line error, and is not made into one)."""
    return open_store(ctx.obj["store"], create=create)


@contextlib.contextmanager
def _reading(ctx: click.Context) -> Iterator[Store]:
    """The store for a command that only reads, all its queries over one look at the journal
    and one connection to the index (each ``Store.sql`` would take a stat of every stream
    again: a third of a second at 100k streams)."""
    from ownloop.store.kept import KeptIndex

    with KeptIndex(_store(ctx, create=False), keep=False) as kept, kept.reading() as store:
        yield store


def _remove_if_unused(path: Path) -> None:
    """Remove ``path`` if it holds nothing but empty folders (a store a refused command made);
    a single file anywhere keeps it all."""
    for folder, _subfolders, files in os.walk(path, topdown=False):
        if files:
            return
        try:
            os.rmdir(folder)
        except OSError:
            return


def _remember_store(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:  # after the command wins over before it, and over $OWNLOOP_STORE
        ctx.ensure_object(dict)["store"] = value


class _Commands(click.Group):
    """The ``ownloop`` group: every command also takes ``--store DIR`` after its name."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.params.append(
            click.Option(
                ["--store"],
                type=click.Path(),
                expose_value=False,
                callback=_remember_store,
                help="The store directory (as before the command; default $OWNLOOP_STORE or "
                "ownloop-data).",
            )
        )
        super().add_command(cmd, name)


@click.group(cls=_Commands)
@click.version_option(__version__, prog_name="ownloop")
@click.option(
    "--store",
    "store",
    envvar="OWNLOOP_STORE",
    default=DEFAULT_STORE,
    show_default=True,
    # Not click.Path(file_okay=False): open_store says what is wrong with a path in one line,
    # exit status 1, like every other store error.
    type=click.Path(),
    help="The store directory (also $OWNLOOP_STORE).",
)
@click.pass_context
def cli(ctx: click.Context, store: str) -> None:
    """Record computer-use agents, query their trajectories in SQL, replay them offline."""
    ctx.ensure_object(dict)
    ctx.obj["store"] = store


# --- commands go below; keep each one thin --------------------------------------------------


def _notice(line: str) -> None:
    """A line on stderr (stdout keeps what the command is for)."""
    click.echo(line, err=True)


@cli.command("serve-model")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=0, type=int, help="Port to bind; 0 (default) picks a free one.")
@click.option(
    "--expert",
    default="miniwob",
    show_default=True,
    help="Who answers: miniwob, judge, or desktop (the test desktop suite; uitars, opencua).",
)
@click.option("--agent", default="uitars", show_default=True, help="Whose output grammar.")
@click.option(
    "--faults",
    default=None,
    metavar="MODE[=ARG][:N],...",
    help="Misbehave on purpose, e.g. 500:2 or hang=8:1 (see docs/serve-model.md).",
)
@click.option("--quiet", is_flag=True, help="Do not print a line per request.")
@click.option(
    "--cassette",
    metavar="TARGET",
    help="Serve the recorded responses of a session, task or run instead.",
)
@click.option(
    "--on-miss",
    type=click.Choice(["stop", "forward", "force"]),
    default="stop",
    show_default=True,
    help="--cassette: when no recorded response matches.",
)
@click.option("--forward", metavar="URL", help="--on-miss forward: the live endpoint (.../v1).")
@click.option(
    "--model",
    "model",
    metavar="NAME",
    help="Serve only this model name (others get 404); default: any name.",
)
@click.option(
    "--api-key",
    "api_key",
    metavar="KEY",
    help="Answer 401 unless requests send this key (default: no key needed).",
)
@click.option(
    "--noise",
    default=0.0,
    type=click.FloatRange(0, 1),
    metavar="P",
    help="The expert answers a plausible wrong action with probability P per step.",
)
@click.option("--noise-seed", default=0, show_default=True, help="Seed of --noise's draws.")
@click.pass_context
@_friendly
def serve_model(
    ctx: click.Context,
    host: str,
    port: int,
    expert: str,
    agent: str,
    faults: str | None,
    quiet: bool,
    cassette: str | None,
    on_miss: str,
    forward: str | None,
    model: str | None,
    api_key: str | None,
    noise: float,
    noise_seed: int,
) -> None:
    """Serve a scripted OpenAI-compatible model endpoint until Ctrl-C.

    Example: ownloop serve-model --expert miniwob --agent uitars --faults 500:2;
    ownloop serve-model --cassette RUN --on-miss forward --forward http://127.0.0.1:8000/v1
    """
    from ownloop.modelserver.endpoint import make_server
    from ownloop.replay.cassette import make_cassette_server

    log = None if quiet else click.echo
    server = (
        make_cassette_server(
            _store(ctx, create=False),
            cassette,
            on_miss,
            forward,
            faults=faults,
            host=host,
            port=port,
            log=log,
        )
        if cassette
        else make_server(
            expert,
            agent,
            faults,
            host=host,
            port=port,
            log=log,
            model=model,
            api_key=api_key,
            notice=None if quiet else _notice,
            noise=noise,
            noise_seed=noise_seed,
        )
    )
    what = f"cassette of {cassette}" if cassette else f"{expert} expert for {agent}"
    click.echo(f"ownloop serve-model: {what} at {server.start()}")
    server.serve_forever()


@cli.command("serve-desktop")
@click.option("--port", default=0, type=int, help="Port to bind on 127.0.0.1; 0 picks a free one.")
@click.option(
    "--display", "display", type=int, default=None, help="X display number; default: a free one."
)
@click.option(
    "--size",
    default="1920x1080",
    show_default=True,
    metavar="WxH",
    help="The screen's size (OSWorld's default is 1920x1080).",
)
@click.option(
    "--apps",
    default="",
    metavar="APP,...",
    help="Apps a fresh desktop runs (after start and each reset): xterm, mousepad, chromium.",
)
@click.option("--quiet", is_flag=True, help="Do not print a line per request.")
@click.option(
    "--reset",
    "reset_url",
    metavar="URL",
    help="Reset the desktop served at URL (POST URL/reset) and exit, e.g. as record --reset.",
)
@click.option(
    "--cassette",
    metavar="SESSION",
    help="Serve a recorded desktop session's exchanges back (no X display, no apps).",
)
@click.pass_context
@_friendly
def serve_desktop(
    ctx: click.Context,
    port: int,
    display: int | None,
    size: str,
    apps: str,
    quiet: bool,
    reset_url: str | None,
    cassette: str | None,
) -> None:
    """Serve a real X test desktop over OSWorld's VM server protocol until Ctrl-C.

    pyautogui code sent to /execute is performed as X input events by ownloop's whitelist
    interpreter, never run as Python; other commands (task setup steps, getters) run on the
    desktop as on a VM. POST /reset restores a clean desktop.

    Example: ownloop serve-desktop --size 1280x720 --apps xterm;
    ownloop record ... --desktop URL --reset "ownloop serve-desktop --reset {url}"
    """
    if cassette:
        import threading

        from ownloop.world.cassette import serve_recorded

        url = serve_recorded(_store(ctx), cassette, port=port)
        click.echo(f"ownloop serve-desktop: session {cassette}'s recorded desktop at {url}")
        sys.stdout.flush()
        threading.Event().wait()
    from ownloop.desktopserver import Desktop, DesktopServer
    from ownloop.desktopserver.display import parse_size
    from ownloop.desktopserver.server import reset_remote

    if reset_url is not None:
        click.echo(f"ownloop serve-desktop: {reset_url} reset in {reset_remote(reset_url):.2f} s")
        return
    desktop = Desktop(parse_size(size), [a for a in apps.split(",") if a], display)
    server = DesktopServer(desktop, port=port, log=None if quiet else click.echo)
    url = server.start()
    click.echo(f"ownloop serve-desktop: {size} desktop at {url}")
    sys.stdout.flush()  # whoever started us may read the URL line through a pipe
    server.serve_forever()


@cli.command()
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="How to print the rows.",
)
@_max_rows_option
@click.pass_context
@_friendly
def sql(ctx: click.Context, query: str, fmt: str, max_rows: int | None) -> None:
    """Bring the index up to date, then run a read-only QUERY (DuckDB SQL).

    Example: ownloop sql "select status, count(*), avg(score) from recorded group by all"
    """
    from ownloop.store.queries import user_query

    # A table fetches only the rows it shows (the others are counted, not converted).
    first = _table_rows(max_rows) if fmt == "table" else None
    _print_rows(user_query(_store(ctx, create=False), query, first), fmt, max_rows)


@cli.command()
@click.option("--strict", is_flag=True, help="Exit with status 1 on warnings (torn tails) too.")
@click.option("--run", "run_id", help="Check this sealed run against its seal as well.")
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
@_friendly
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
    report = _store(ctx, create=False).verify(
        run_id=run_id, fingerprint=fingerprint, incremental=not full
    )
    for problem in report.problems:
        click.echo(problem.line())
    click.echo(report.summary())
    ctx.exit(report.exit_code(strict=strict))


@cli.command()
@click.option("--run", "run_id", required=True, help="The run to audit and seal.")
@click.option("--archive", "then_archive", is_flag=True, help="Then archive it (see archive).")
@click.pass_context
@_friendly
def seal(ctx: click.Context, run_id: str, then_archive: bool) -> None:
    """Audit a run and, only if the audit passes, seal it: print its fingerprint to cite.

    Exit status 1, with each reason, when the audit fails (nothing is sealed).
    Example: ownloop seal --run r1
    """
    from ownloop.store.archive import archive_runs
    from ownloop.store.seal import seal_run

    store = _store(ctx, create=False)
    result = seal_run(store, run_id)
    _echo_lines(result.lines())
    if result.seal is not None and then_archive:
        _echo_lines(archived.line() for archived in archive_runs(store, [run_id]))
    ctx.exit(0 if result.seal is not None else 1)


@cli.command()
@click.option("--run", "run_ids", multiple=True, help="A sealed run to archive (repeatable).")
@click.option("--all-sealed", is_flag=True, help="Archive every sealed run not archived yet.")
@click.pass_context
@_friendly
def archive(ctx: click.Context, run_ids: tuple[str, ...], all_sealed: bool) -> None:
    """Move sealed runs out of the DuckDB index into Parquet files (archive/<run>/) that the
    index reads through views: every query answers the same, the index file stays small and
    `index --rebuild` reads only the other runs' streams.
    Example: ownloop archive --run r1
    """
    from ownloop.store.archive import archive_runs

    if bool(run_ids) == all_sealed:
        raise click.UsageError("give --run R (one or more) or --all-sealed")
    results = archive_runs(_store(ctx, create=False), None if all_sealed else list(run_ids))
    _echo_lines(result.line() for result in results)


@cli.command("index")
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
@_friendly
def index_command(ctx: click.Context, rebuild: bool, drop: bool, accept_damaged: bool) -> None:
    """Bring the DuckDB index up to date with the journal, or rebuild it from nothing.

    Damaged lines (an edited line, a removed one) are quarantined: not projected, listed in the
    damage view. Example: ownloop index --rebuild
    """
    if accept_damaged and not rebuild:
        raise click.UsageError("--accept-damaged goes with --rebuild")
    if drop and rebuild:
        raise click.UsageError("--drop and --rebuild: one or the other")
    store = _store(ctx, create=False)
    if drop:
        freed = store.index().drop()
        _echo(f"index: dropped ({freed / 1e6:.1f} MB); the next query builds it from the journal")
        return
    _echo(
        (store.rebuild_index(accept_damaged=accept_damaged) if rebuild else store.sync()).summary()
    )


@cli.command()
@click.option("--keep-png", is_flag=True, help="Keep each PNG's exact bytes beside its WebP.")
@click.pass_context
@_friendly
def compact(ctx: click.Context, keep_png: bool) -> None:
    """Re-encode PNG blobs as lossless WebP (pixel-identical, checked by decoding both).

    Blobs keep their names; the exact PNG bytes are not kept unless --keep-png. Safe to stop
    and run again. Example: ownloop compact
    """
    from ownloop.store.compact import compact_blobs

    blobs = _store(ctx, create=False).blobs
    if not sys.stderr.isatty():  # a log: a line every 1,000 blobs

        def line(done: int, todo: int) -> None:
            if done % 1000 == 0:
                click.echo(f"compact: {done} of {todo} blobs", err=True)

        _echo(compact_blobs(blobs, keep_png=keep_png, progress=line).summary())
        return
    with click.progressbar(length=1, label="compact", file=sys.stderr) as bar:

        def progress(done: int, todo: int) -> None:
            bar.length = todo
            bar.update(done - bar.pos)

        report = compact_blobs(blobs, keep_png=keep_png, progress=progress)
    _echo(report.summary())


@cli.command()
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
@click.option("--api-key", envvar="OPENAI_API_KEY", help="Key for the endpoint (never recorded).")
@click.option("--run", "run_id", help="The run's name; the same name resumes it.")
@click.option("--workers", default=2, show_default=True, help="Tasks at once, each with a browser.")
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Run each task N times (repeats sample the agent; attempts retry errors).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Only the suite's first N tasks (as inspect eval --limit).",
)
@click.option(
    "--max-steps",
    default=40,
    show_default=True,
    type=click.IntRange(min=1),
    help="The step budget: policy turns (model decisions) per session.",
)
@click.option(
    "--timeout",
    default=1800.0,
    show_default=True,
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
@click.option("--settle", default=1.0, show_default=True, help="Pause after each step, seconds.")
@click.option(
    "--chromium", help="Path to a Chromium to drive (default: $OWNLOOP_CHROMIUM, else found)."
)
@click.option("--frequency-penalty", type=float, help="uitars: sampling option (OSWorld sends 1).")
@click.option("--agent-option", "-o", multiple=True, metavar="KEY=VALUE", help="Agent setting.")
@click.option(
    "--released",
    envvar="OWNLOOP_PATH",
    metavar="PATH[:PATH...]",
    help="Clones of the model's released code, to read its prompt from.",
)
@click.option("--retries", default=3, show_default=True, help="Retries of a failed model call.")
@click.option("--retry-wait", default=5.0, show_default=True, help="Seconds between retries.")
@click.option("--call-timeout", default=120.0, show_default=True, help="Seconds per model call.")
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
    show_default=True,
    help="Where sessions run: threads here, or Ray actors on a "
    "cluster (needs ownloop[ray] and a store every node mounts).",
)
@click.option(
    "--ray-address",
    metavar="auto|HOST:PORT",
    help="--executor ray: the cluster (default: $RAY_ADDRESS, else a Ray started on this machine).",
)
@click.option(
    "--desktop",
    multiple=True,
    metavar="URL",
    help="An OSWorld-protocol desktop server, e.g. http://127.0.0.1:5000 (repeatable: one "
    "worker per desktop); for --suite osworld:DIR.",
)
@click.option(
    "--reset",
    metavar="CMD",
    help="A host command run before each desktop task, e.g. a snapshot revert; {url} in it is "
    "the desktop's URL.",
)
@click.option("--a11y", is_flag=True, help="Keep each desktop step's accessibility tree.")
@click.option(
    "--keep-png", is_flag=True, help="Keep screenshots as the browser's PNG bytes (no WebP)."
)
@click.option(
    "--max-endpoint-errors",
    default=3,
    show_default=True,
    type=click.IntRange(min=0),
    help="Stop the run after this many sessions in a row end endpoint_error (0: never).",
)
@click.pass_context
@_friendly
def record(ctx: click.Context, agent: str, **options: Any) -> None:
    """Run AGENT on every task and record everything it does.

    Example: ownloop record uitars --suite 'miniwob:click-*' --endpoint http://127.0.0.1:8000/v1
    --model uitars15-7b. Exit status: 0 done, 1 refused, 3 a session ended error, endpoint_error
    or crashed, 4 stopped early, 130 interrupted.
    """
    from ownloop.recorder.command import exit_code, record_from_options, summary_text

    path = Path(ctx.obj.get("store") or os.environ.get("OWNLOOP_STORE") or DEFAULT_STORE)
    made_here = not path.exists()
    store = _store(ctx)
    try:
        summary = record_from_options(
            store,
            agent,
            options,
            argv=tuple(sys.argv),
            notify=lambda line: click.echo(line, err=True),
        )
    except Exception:
        if made_here:  # refused before writing anything: leave no empty store behind
            _remove_if_unused(path)
        raise
    _echo(summary_text(summary, store))  # its query hint names --store when it is not the default
    if summary.interrupted:
        _exit_interrupted()
    ctx.exit(exit_code(summary))


@cli.command()
@click.option("--run", "run_id", help="Only this run.")
@click.option(
    "--status",
    type=click.Choice(get_args(Status)),
    metavar="STATUS",
    help=f"Only sessions with this status: {', '.join(get_args(Status))}.",
)
@click.option(
    "--passed",
    type=click.Choice(["yes", "no"]),
    help="Only sessions whose latest grade passed (yes) or failed (no).",
)
@click.option(
    "--failed",
    is_flag=True,
    help="Only sessions that did not pass: a failed grade, or an end with an error.",
)
@click.option("--limit", default=50, show_default=True)
@click.option(
    "--format",
    "fmt",
    type=_FORMATS,
    default="table",
    show_default=True,
    help="How to print the rows.",
)
@_max_rows_option
@click.pass_context
@_friendly
def sessions(
    ctx: click.Context,
    run_id: str | None,
    status: str | None,
    passed: str | None,
    failed: bool,
    limit: int,
    fmt: str,
    max_rows: int | None,
) -> None:
    """List sessions, newest first, each failed one with its reason (the grader's failed check
    or the error). Example: ownloop sessions --run demo --failed"""
    from ownloop.store.scores import score_line
    from ownloop.store.sessions import budget_notes, sessions_table

    if failed and passed:
        raise click.UsageError("give --failed or --passed, not both")
    with _reading(ctx) as store:
        rows = sessions_table(
            store, run_id=run_id, status=status, limit=limit, passed="failed" if failed else passed
        )
        notes = budget_notes(store, run_id)
        if run_id and fmt == "table":  # how the run did, errors counted as the scores count them
            notes = [
                f"run {run_id}: {line}" for line in [score_line(store, run_id)] if line
            ] + notes
    _print_rows(rows, fmt, max_rows)
    if notes:  # on stderr when the rows are CSV or JSON, which a note would corrupt
        click.echo(_hinted("\n".join(visible(n, one_line=True) for n in notes)), err=fmt != "table")


@cli.command()
@click.option("--tasks", "count", default=6, show_default=True, help="How many MiniWoB tasks.")
@click.option("--workers", default=2, show_default=True)
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Run each task N times.",
)
@click.option(
    "--noise",
    default=0.0,
    type=click.FloatRange(0, 1),
    metavar="P",
    help="The expert answers a plausible wrong action with probability P per step.",
)
@click.option("--judge", is_flag=True, help="Then judge the run with the scripted judge.")
@click.pass_context
@_friendly
def demo(
    ctx: click.Context, count: int, workers: int, repeat: int, noise: float, judge: bool
) -> None:
    """The whole loop offline: MiniWoB tasks, the scripted expert model, a real Chromium.

    Example: ownloop demo --repeat 5 --noise 0.3 (then: ownloop sql "select * from flips")
    """
    from ownloop.demo import run_demo

    run_demo(
        _store(ctx),
        tasks=count,
        workers=workers,
        echo=_echo,
        repeats=repeat,
        noise=noise,
        judge=judge,
    )


@cli.command()
@click.argument("name", required=False)
@click.option(
    "--released",
    envvar="OWNLOOP_PATH",
    metavar="PATH[:PATH...]",
    help="Clones of the models' released code, to say which prompt texts are found.",
)
@_friendly
def agents(name: str | None, released: str | None) -> None:
    """The agents; with NAME, its options (-o KEY=VALUE) with defaults and meanings, where its
    prompt comes from, and where it deviates from the released loop. Example: ownloop agents fara7b
    """
    from ownloop.agents.describe import agent_lines, agents_lines

    _echo_lines(agent_lines(name, released) if name else agents_lines(released))


# --- replay: show, replay, regrade, diff (ownloop/replay/) -----------------------------------


def _print_session(session: Any, fmt: str) -> None:
    from ownloop.replay.render import session_view
    from ownloop.replay.tables import session_rows

    if fmt == "json":
        click.echo(session.to_json())
    elif fmt == "csv":
        click.echo(session_rows(session).to_csv(), nl=False)
    else:
        _console().print(session_view(session))


def _format_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--format",
        "fmt",
        type=_FORMATS,
        default="table",
        show_default=True,
        help=f"How to print {what}: a table, CSV rows or one JSON document.",
    )


@cli.command()
@click.argument("target")
@click.option("--run", "run_id", help="Look for TARGET's task in this run (default: the latest).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the rebuilt session as JSON (--format json)."
)
@_format_option("the session (CSV: a row per step)")
@click.pass_context
@_friendly
def show(ctx: click.Context, target: str, run_id: str | None, as_json: bool, fmt: str) -> None:
    """Rebuild a session (TARGET: a session id, or a task id) offline and print it step by step.

    Example: ownloop show click-button --run r1
    """
    from ownloop.replay.target import load_session

    with _reading(ctx) as store:
        session = load_session(store, target, run_id)
    _print_session(session, "json" if as_json else fmt)


@cli.command()
@click.argument("target", required=False)
@click.option(
    "--run",
    "run_id",
    help="TARGET's run (default: the latest that has it); alone "
    "with --reparse: every session of the run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (--format json).")
@_format_option("the session or the re-execution's summary (CSV: a row per step)")
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
@click.option("--api-key", envvar="OPENAI_API_KEY", help="Key for --endpoint (never recorded).")
@click.option("--settle", default=1.0, show_default=True, help="Pause after each step, seconds.")
@click.option(
    "--chromium", help="Path to a Chromium to drive (default: $OWNLOOP_CHROMIUM, else found)."
)
@click.option(
    "--agent-option",
    "-o",
    multiple=True,
    metavar="KEY=VALUE",
    help="Agent option over the recorded ones, e.g. -o notch_px=50.",
)
@click.option(
    "--released",
    envvar="OWNLOOP_PATH",
    metavar="PATH[:PATH...]",
    help="Clones of the model's released code, to read its prompt from.",
)
@click.option(
    "--on-miss",
    type=click.Choice(["stop", "forward", "force"]),
    default="stop",
    show_default=True,
    help="When no recorded response matches a request.",
)
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
@click.option(
    "--desktop",
    metavar="URL",
    help="--execute: the desktop server to re-execute a desktop session on.",
)
@click.option(
    "--reset",
    metavar="CMD",
    help="--desktop: reset it first (a host command with {url}, or 'server').",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="--run R --execute without TARGET: sessions at once, each worker reusing one browser.",
)
@click.option("--where", help="--run R --execute without TARGET: a SQL condition over sessions.")
@click.pass_context
@_friendly
def replay(
    ctx: click.Context,
    target: str | None,
    run_id: str | None,
    as_json: bool,
    fmt: str,
    reparse: bool,
    **options: Any,
) -> None:
    """Rebuild a session offline and print it, re-parse it, or re-execute it in a browser.

    Examples: ownloop replay click-button; ownloop replay --run r1 --reparse -o scroll_notches=3;
    ownloop replay click-button --execute ops --seed 7 --on-diverge retarget;
    ownloop replay --run r1 --execute ops --workers 2 (every recorded session of r1)
    """
    from ownloop.replay.reparse import reparse_target
    from ownloop.replay.target import check_replayable, load_session

    store = _store(ctx, create=False)
    fmt = "json" if as_json else fmt
    if reparse:
        report = reparse_target(store, target, run_id, options["agent_option"])
        if fmt == "json":
            click.echo(report.to_json())
        else:
            _echo_lines(report.lines())
        return
    if not target and run_id and options["execute"]:
        from ownloop.replay import batch

        batched = batch.batch_from_options(store, run_id, options)
        if fmt == "json":
            click.echo(batch.batch_document(batched))
        else:
            _print_rows(batch.batch_rows(batched), fmt, max_rows=0)
            if fmt == "table":
                _echo_lines([batch.batch_totals(batched)])
        if batched.interrupted:
            _exit_interrupted()
        return
    session = load_session(store, target, run_id)
    if options["execute"] or options["fork_at"] is not None:
        from ownloop.replay.execute import replay_from_options, summary_text
        from ownloop.replay.tables import replay_document, replay_rows

        check_replayable(session, "fork" if options["fork_at"] is not None else options["execute"])
        done = replay_from_options(store, session, {**options, "run_id": run_id})
        if fmt == "table":
            _echo_lines(summary_text(done).splitlines())
        else:
            click.echo(
                replay_rows(done.parent, done.child).to_csv()
                if fmt == "csv"
                else replay_document(done.parent, done.child),
                nl=fmt == "json",
            )
        return
    _print_session(session, fmt)


@cli.command()
@click.argument("target", required=False)
@click.option("--run", "run_id", help="The run whose sessions to judge (or TARGET's run).")
@click.option("--where", help="A SQL condition over the sessions view, e.g. \"status = 'fail'\".")
@click.option(
    "--judge",
    "judge_name",
    default="final",
    show_default=True,
    metavar="NAME|FILE",
    help="final, webjudge, or a judge file (JSON: name, system, prompt, verdict, pass).",
)
@click.option("--endpoint", metavar="URL", help="The judge model's OpenAI-compatible endpoint.")
@click.option("--model", default="", metavar="M", help="The judge model's name.")
@click.option("--api-key", envvar="OPENAI_API_KEY", help="Sent as a Bearer token; never recorded.")
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(min=1), metavar="N")
@click.option(
    "--controls", is_flag=True, help="Also judge each session blanked and answer-swapped."
)
@click.option("--replay", is_flag=True, help="Answer from the recorded judge calls, no model.")
@click.option(
    "--report", "report_only", is_flag=True, help="Judge nothing: report what was judged."
)
@click.pass_context
@_friendly
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
    _echo_lines(judge(_store(ctx, create=False), options).lines())


@cli.command()
@click.option("--run", "run_id", help="Only this run's sessions.")
@click.option("--task", "task_id", help="Only this task's sessions.")
@click.option("--where", help="A SQL condition over the sessions view, e.g. \"status = 'fail'\".")
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
@_format_option("the result (CSV: a row per flipped session)")
@click.pass_context
@_friendly
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
        _store(ctx, create=False),
        run_id=run_id,
        task_id=task_id,
        where=where,
        grader=grader,
        tasks=tasks,
        dry_run=dry_run,
    )
    if fmt == "table":
        _echo_lines(result.lines())
    else:
        click.echo(
            regrade_rows(result).to_csv() if fmt == "csv" else regrade_document(result),
            nl=fmt == "json",
        )


@cli.command()
@click.argument("a")
@click.argument("b")
@click.option("--run", "run_id", help="Look for task ids in this run (default: the latest).")
@_format_option("the comparison (CSV: a row per step)")
@click.pass_context
@_friendly
def diff(ctx: click.Context, a: str, b: str, run_id: str | None, fmt: str) -> None:
    """Two sessions (or tasks' latest sessions) side by side: actions, URLs, screenshots, outcome.

    Exit status 0 when they are identical, 1 when they differ.
    Example: ownloop diff 3f2a9c8b1d0e 3f2a9c8b1d0f
    """
    from ownloop.replay.diff import diff_sessions, diff_view
    from ownloop.replay.tables import diff_document, diff_rows
    from ownloop.replay.target import load_session

    store = _store(ctx, create=False)
    result = diff_sessions(load_session(store, a, run_id), load_session(store, b, run_id))
    if fmt == "table":
        _console(soft_wrap=False).print(diff_view(result))
    else:
        click.echo(
            diff_rows(result).to_csv() if fmt == "csv" else diff_document(result), nl=fmt == "json"
        )
    ctx.exit(0 if result.identical else 1)


@cli.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)
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
    show_default=True,
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
    show_default=True,
    metavar="rule|judge:NAME",
    help="Whose grades score the units: the rule graders, or a model judge's verdicts "
    "(ownloop judge; the majority of its repeats). The two are never mixed.",
)
@click.pass_context
@_friendly
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
        _store(ctx), run_a, run_b, errors=policy, min_tasks=min_tasks, grader=grader
    )
    if fmt == "table":
        _console(soft_wrap=False).print(comparison_view(result))  # a pipe gets its full width
        _echo_lines(result.score_lines())  # whole lines, never wrapped
        if by_domain:
            from ownloop.replay.domains import domain_report

            _echo_lines(domain_report(_store(ctx), result))
    else:
        click.echo(result.to_csv() if fmt == "csv" else result.to_json(), nl=fmt == "json")
    if delta is not None:
        reasons = result.gate(delta, check_complete=errors != "exclude")
        for reason in reasons:
            click.echo(visible(reason, one_line=True), err=True)
        if reasons:
            ctx.exit(1)


def _audit_desktop_options(command: Any) -> Any:
    """``--desktop URL`` and ``--reset CMD``: where an audit replays a desktop run's tasks."""
    command = click.option(
        "--reset",
        metavar="CMD",
        help="--desktop: reset it before each replay (a host command with {url}, or 'server').",
    )(command)
    return click.option(
        "--desktop",
        metavar="URL",
        help="A desktop run's tasks: the desktop server to replay them on.",
    )(command)


def _audit_desktop(desktop: str | None, reset: str | None) -> Any:
    from ownloop.world.pool import DesktopTarget

    return DesktopTarget(desktop, reset or None) if desktop else None


@cli.group()
def audit() -> None:
    """Audit a benchmark with what a run recorded. Example: ownloop audit blind --run r1;
    ownloop audit noop --run r1"""


@audit.command("blind")
@click.option("--run", "run_id", required=True, help="The run whose passing sessions to replay.")
@click.option(
    "--seeds",
    help="MiniWoB seeds to replay on: N, N-M or a comma list (default: 1-3, "
    "the task's own left out).",
)
@click.option("--settle", default=0.2, show_default=True, help="Pause after each step, seconds.")
@click.option("--chromium", help="Path to a Chromium to drive.")
@_audit_desktop_options
@_format_option("the audit (a row per task)")
@click.pass_context
@_friendly
def audit_blind_command(
    ctx: click.Context,
    run_id: str,
    seeds: str | None,
    settle: float,
    chromium: str | None,
    desktop: str | None,
    reset: str | None,
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
        _store(ctx, create=False),
        run_id,
        seeds,
        settle_s=settle,
        chromium=chromium,
        on_replay=lambda task, seed, passed: click.echo(
            f"{task} blind on {'the reset desktop' if seed is None else f'seed {seed}'}: "
            f"{'ungraded' if passed is None else 'pass' if passed else 'fail'}",
            err=True,
        ),
        desktop=_audit_desktop(desktop, reset),
    )
    _print_rows(result.rows, fmt)
    if fmt == "table":
        _echo_lines(result.lines())


@audit.command("noop")
@click.option("--run", "run_id", required=True, help="The run whose tasks to grade untouched.")
@click.option(
    "--threshold",
    default=0.2,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Flag a task whose untouched start state scores above this (or passes).",
)
@click.option("--settle", default=0.2, show_default=True, help="Pause after setup, seconds.")
@click.option("--chromium", help="Path to a Chromium to drive.")
@_audit_desktop_options
@_format_option("the audit (a row per task)")
@click.pass_context
@_friendly
def audit_noop_command(
    ctx: click.Context,
    run_id: str,
    threshold: float,
    settle: float,
    chromium: str | None,
    desktop: str | None,
    reset: str | None,
    fmt: str,
) -> None:
    """Grade each task's untouched start state (its setup on the episode the run used, no
    action, its graders): a task that scores above --threshold with no action is flagged
    (views noop_audit, passes_untouched; seal lists them).

    Example: ownloop audit noop --run r1; ownloop audit noop --run r2 --desktop URL --reset server
    """
    from ownloop.replay.noop import audit_noop

    result = audit_noop(
        _store(ctx, create=False),
        run_id,
        threshold=threshold,
        settle_s=settle,
        chromium=chromium,
        on_replay=lambda task, score: click.echo(
            f"{task} untouched: {'ungraded' if score is None else f'score {score:g}'}", err=True
        ),
        desktop=_audit_desktop(desktop, reset),
    )
    _print_rows(result.rows, fmt)
    if fmt == "table":
        _echo_lines(result.lines())


# --- import and export (ownloop/transfer/) ---------------------------------------------------


@cli.command("import")
@click.argument("directory", type=click.Path())
@click.option(
    "--agent",
    help="Whose steps.jsonl form: uitars, molmoweb, fara7b or opencua (its "
    "parser fills the parsed actions when it loads); default: told from the lines.",
)
@click.option(
    "--run",
    "run_id",
    help="The run to import into (default: import-<DIR name>, "
    "atif-<name>); folders already in it are skipped.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["harness", "atif", "osworld"]),
    default="harness",
    show_default=True,
    help="Harness result folders, ATIF trajectories (a .json file or a folder of them), or "
    "an OSWorld result_dir (one run per action space, observation type and model).",
)
@click.option("--model", help="osworld: import only this model's folders.")
@click.option(
    "--tasks-dir",
    type=click.Path(file_okay=False),
    help="osworld: OSWorld's evaluation_examples, to attach each example's task file.",
)
@click.pass_context
@_friendly
def import_command(
    ctx: click.Context,
    directory: str,
    agent: str | None,
    run_id: str | None,
    fmt: str,
    model: str | None,
    tasks_dir: str | None,
) -> None:
    """Import result folders written by a plain harness (one per task), ATIF trajectories, or
    OSWorld's result folders.

    Example: ownloop import results/uitars-0611 --agent uitars --run uitars-0611
    """
    from ownloop.transfer import import_dir

    if fmt == "osworld":
        from ownloop.transfer.osworld_import import import_osworld

        found = import_osworld(
            _store(ctx),
            directory,
            agent=agent,
            run_id=run_id,
            model=model,
            tasks_dir=tasks_dir,
            argv=tuple(sys.argv),
        )
        _echo_lines(found.lines())
        return
    if fmt == "atif":
        from ownloop.transfer.trajectories import import_atif

        _echo_lines(import_atif(_store(ctx), directory, run_id, argv=tuple(sys.argv)).lines())
        return
    result = import_dir(_store(ctx), directory, agent, run_id, argv=tuple(sys.argv))
    _echo_lines(result.lines())
    for warning in result.warnings:
        click.echo(warning, err=True)


@cli.command("export")
@click.option(
    "--run",
    "run_id",
    help="The run (required for session-dir and osworld; the others: all runs when left out).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(
        ["session-dir", "parquet", "sft", "sft-parquet", "atif", "otlp", "osworld", "inspect"]
    ),
    default="session-dir",
    show_default=True,
    help="Harness folders, Parquet views, SFT records (JSONL or Parquet), ATIF "
    "trajectories, OTLP traces, OSWorld's result layout (traj.jsonl, result.txt), "
    "or Inspect .eval logs (one per run).",
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder to write.")
@click.option(
    "--where",
    help="sft, atif, otlp, inspect: an SQL condition over the sessions view "
    "(sft's default: passed and coalesce(counted, true)).",
)
@click.option(
    "--agent-format",
    type=click.Choice(["native", "chat"]),
    default="chat",
    show_default=True,
    help="sft: the request as sent (native) or as chat messages.",
)
@click.option("--per-session", is_flag=True, help="sft: one record per session, not per step.")
@click.option(
    "--endpoint",
    help="otlp: send to this OTLP/HTTP collector (its base URL) instead "
    "of writing traces.jsonl; images and long texts still go under --out.",
)
@click.option(
    "--otlp-encoding",
    type=click.Choice(["protobuf", "json"]),
    default="protobuf",
    show_default=True,
    help="otlp --endpoint: post application/x-protobuf or OTLP/JSON.",
)
@click.pass_context
@_friendly
def export_command(
    ctx: click.Context,
    run_id: str | None,
    fmt: str,
    out: str,
    where: str | None,
    agent_format: str,
    per_session: bool,
    endpoint: str | None,
    otlp_encoding: str,
) -> None:
    """Write runs as harness folders, Parquet views, SFT records, ATIF or OTLP traces.

    Example: ownloop export --run r1 --format sft --agent-format native --out sft/r1
    """
    from ownloop.transfer import export_run

    _echo_lines(
        export_run(
            _store(ctx, create=False),
            run_id,
            fmt,
            out,
            where=where,
            agent_format=agent_format,
            per_session=per_session,
            endpoint=endpoint,
            otlp_encoding=otlp_encoding,
        ).lines()
    )


# --- seeing trajectories: view, report (ownloop/view/) ---------------------------------------


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, help="Port to bind; 0 picks a free one.")
@click.pass_context
@_friendly
def view(ctx: click.Context, host: str, port: int) -> None:
    """Browse runs and sessions in a local web app until Ctrl-C (works while recordings run).

    Example: ownloop view --port 8765, then open http://127.0.0.1:8765/
    """
    from ownloop.view.server import ViewServer

    server = ViewServer(_store(ctx, create=False), host, port)
    click.echo(f"ownloop view: {server.url} (Ctrl-C to stop)")
    server.serve_forever()


@cli.command()
@click.argument("target")
@click.option(
    "--out", type=click.Path(dir_okay=False), help="Write one self-contained HTML file here."
)
@click.option(
    "--gif", type=click.Path(dir_okay=False), help="Write an animated GIF here, one frame per step."
)
@click.option("--run", "run_id", help="Look for TARGET's task in this run (default: the latest).")
@click.pass_context
@_friendly
def report(
    ctx: click.Context, target: str, out: str | None, gif: str | None, run_id: str | None
) -> None:
    """A session (TARGET: a session id or task id) as one HTML file to attach to a bug report.

    Example: ownloop report click-button --out bug.html --gif bug.gif
    """
    from ownloop.view.report import write_reports

    _echo("\n".join(write_reports(_store(ctx, create=False), target, run_id, out, gif).lines()))


def main() -> None:
    # Agents compile model text with ast.parse (never run it); Python may warn about it (an
    # invalid escape such as "\\d", "1if") on stderr, through a progress bar. The application,
    # not the agents, sets this filter: only code compiled from a string without a file name.
    for category in (SyntaxWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=r"<unknown>\Z")
    cli(prog_name="ownloop")
