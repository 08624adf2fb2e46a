"""What every ``ownloop`` command shares: errors as one line, printing, the store, and the
options declared once for all the commands that take them (as sqlite-utils' ``output_options``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ownloop.errors import OwnloopError
from ownloop.store import DEFAULT_STORE, Store, open_store
from ownloop.store.disk import disk_error
from ownloop.store.extras import missing_extra
from ownloop.store.text import visible

if TYPE_CHECKING:
    from rich.console import Console  # loaded when a command draws a table: not for csv/json

__all__ = [
    "FORMATS",
    "F",
    "agent_option_option",
    "api_key_option",
    "chromium_option",
    "console",
    "desktop_option",
    "echo",
    "echo_lines",
    "exit_interrupted",
    "format_option",
    "friendly",
    "hinted",
    "max_rows_option",
    "noise_option",
    "notice",
    "on_miss_option",
    "print_rows",
    "reading",
    "released_option",
    "repeat_option",
    "remove_if_unused",
    "reset_option",
    "rows_format_option",
    "run_option",
    "settle_option",
    "store_of",
    "table_rows",
    "where_option",
]

F = TypeVar("F", bound=Callable[..., Any])
FORMATS = click.Choice(["table", "csv", "json"])
_PIPE_WIDTH = 100_000  # wider than any table we print: rich sizes a table to its content
_PIPE_ROWS = 1_000  # a table to a pipe or a file shows this many rows unless --max-rows says


def friendly(fn: F) -> F:
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
            raise click.ClickException(hinted(str(exc))) from None
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

    return wrapper  # type: ignore[return-value]


def echo_lines(lines: Iterable[str], *, err: bool = False) -> None:
    """Print lines that carry recorded text (ids, file names, answers) with controls visible."""
    click.echo(hinted("\n".join(visible(line, one_line=True) for line in lines)), err=err)


def echo(text: str) -> None:
    """Print the library's text, its ``ownloop ...`` hints naming the store (see ``hinted``)."""
    click.echo(hinted(text))


def notice(line: str) -> None:
    """A line on stderr (stdout keeps what the command is for)."""
    click.echo(line, err=True)


def hinted(text: str) -> str:
    """``text`` with every ``ownloop COMMAND`` hint in it carrying ``--store DIR`` when the store
    is not the default one, so that pasting the hint works wherever it is pasted.

    A hint is ``ownloop`` then a command's name; ``ownloop sql only reads`` and a server's
    ``ownloop view: URL`` line are prose, not hints.
    """
    ctx = click.get_current_context(silent=True)
    obj = ctx.obj if ctx is not None else None
    store = obj.get("store") if isinstance(obj, dict) else None
    if ctx is None or not store or Path(store).resolve() == Path(DEFAULT_STORE).resolve():
        return text
    root = ctx.find_root().command
    commands = root.commands if isinstance(root, click.Group) else {}
    names = "|".join(re.escape(name) for name in sorted(commands, key=len, reverse=True))
    return re.sub(
        rf"\bownloop (?=(?:{names})(?![\w:-])(?! only\b))",
        f"ownloop --store {shlex.quote(str(store))} ",
        text,
    )


def console(*, soft_wrap: bool = True) -> Console:
    """A console for recorded text (no markup, no highlighting). Written to a pipe or a file, a
    table keeps its full width: rich would otherwise cut it to 80 columns there."""
    from rich.console import Console

    made = Console(soft_wrap=soft_wrap, markup=False, highlight=False)
    if not made.is_terminal:
        made.width = _PIPE_WIDTH
    return made


def table_rows(max_rows: int | None) -> int | None:
    """The rows a table shows (None: all): ``--max-rows``, else what fits the terminal, else
    1,000 to a pipe."""
    if max_rows is not None:
        return max_rows or None
    shown = console()
    # The top rule, header, rule, bottom rule, caption, the line it may wrap to, the prompt.
    return max(shown.height - 7, 5) if shown.is_terminal else _PIPE_ROWS


def print_rows(result: Any, fmt: str, max_rows: int | None = None) -> None:
    """A ``QueryResult`` as a table (at most ``max_rows`` rows: see ``max_rows_option``), CSV
    or a JSON array of objects. A pipe gets plain lines, drawn in time linear in the rows; a
    terminal gets Rich's table, fitted to its width."""
    if fmt == "table":
        shown, out = table_rows(max_rows), console()
        if out.is_terminal:
            out.print(result.to_rich(shown))
        else:
            click.echo("\n".join(result.to_text(shown)))
    else:
        click.echo(result.to_csv() if fmt == "csv" else result.to_json(), nl=fmt == "json")


def exit_interrupted() -> None:
    """Leave at once with 130, as after Ctrl-C: every event is already fsync'd, and skipping the
    interpreter's teardown avoids a crash in it while Playwright's threads wind down."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def store_of(ctx: click.Context, *, create: bool = True) -> Store:
    """The store the command names; ``create=False`` for commands that only use what is there
    (a folder that holds no store is then a one-line error, and is not made into one)."""
    return open_store(ctx.obj["store"], create=create)


@contextlib.contextmanager
def reading(ctx: click.Context) -> Iterator[Store]:
    """The store for a command that only reads, all its queries over one look at the journal
    and one connection to the index (each ``Store.sql`` would take a stat of every stream
    again: a third of a second at 100k streams)."""
    from ownloop.store.kept import KeptIndex

    with KeptIndex(store_of(ctx, create=False), keep=False) as kept, kept.reading() as store:
        yield store


def remove_if_unused(path: Path) -> None:
    """Remove ``path`` if it holds nothing but empty folders (a store a refused command made);
    a single file anywhere keeps it all."""
    for folder, _subfolders, files in os.walk(path, topdown=False):
        if files:
            return
        try:
            os.rmdir(folder)
        except OSError:
            return


# --- options declared once --------------------------------------------------------------------

max_rows_option = click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    metavar="N",
    help="A table shows at most N rows, 0: all (default: what fits the terminal, 1,000 to a "
    "pipe). CSV and JSON print every row.",
)


def rows_format_option(help: str = "How to print the rows.") -> Callable[[F], F]:
    """``--format table|csv|json`` for a command that prints rows (``fmt``)."""
    return click.option("--format", "fmt", type=FORMATS, default="table", help=help)


def format_option(what: str) -> Callable[[F], F]:
    """``--format table|csv|json`` for a command that prints one result (``fmt``)."""
    return rows_format_option(f"How to print {what}: a table, CSV rows or one JSON document.")


def run_option(
    help: str, *, required: bool = False, multiple: bool = False, dest: str = "run_id"
) -> Callable[[F], F]:
    """``--run R`` (``run_id``; ``multiple``: ``run_ids``, a tuple)."""
    return click.option(
        "--run",
        "run_ids" if multiple and dest == "run_id" else dest,
        required=required,
        multiple=multiple,
        help=help,
    )


def repeat_option(help: str | None = None) -> Callable[[F], F]:
    """``--repeat N`` (``repeat``, 1 or more; default 1)."""
    return click.option("--repeat", default=1, type=click.IntRange(min=1), metavar="N", help=help)


def where_option(
    help: str = "A SQL condition over the sessions view, e.g. \"status = 'fail'\".",
) -> Callable[[F], F]:
    """``--where SQL`` over the sessions view."""
    return click.option("--where", help=help)


def settle_option(
    default: float = 1.0, help: str = "Pause after each step, seconds."
) -> Callable[[F], F]:
    """``--settle S`` (``settle``): the pause after each step."""
    return click.option("--settle", default=default, help=help)


def chromium_option(
    help: str = "Path to a Chromium to drive (default: $OWNLOOP_CHROMIUM, else found).",
) -> Callable[[F], F]:
    """``--chromium PATH``."""
    return click.option("--chromium", help=help)


def released_option(
    help: str = "Clones of the model's released code, to read its prompt from.",
) -> Callable[[F], F]:
    """``--released PATH[:PATH...]`` (also $OWNLOOP_PATH)."""
    return click.option("--released", envvar="OWNLOOP_PATH", metavar="PATH[:PATH...]", help=help)


def desktop_option(help: str, *, multiple: bool = False) -> Callable[[F], F]:
    """``--desktop URL``: an OSWorld-protocol desktop server (``multiple``: a tuple of them)."""
    return click.option("--desktop", multiple=multiple, metavar="URL", help=help)


def reset_option(help: str) -> Callable[[F], F]:
    """``--reset CMD``: how a ``--desktop`` is reset (a host command with ``{url}`` in it)."""
    return click.option("--reset", metavar="CMD", help=help)


def api_key_option(help: str) -> Callable[[F], F]:
    """``--api-key KEY`` (also $OPENAI_API_KEY): never recorded."""
    return click.option("--api-key", envvar="OPENAI_API_KEY", help=help)


def agent_option_option(help: str) -> Callable[[F], F]:
    """``-o KEY=VALUE`` (repeatable; ``agent_option``, a tuple of the pairs)."""
    return click.option("--agent-option", "-o", multiple=True, metavar="KEY=VALUE", help=help)


def on_miss_option(help: str) -> Callable[[F], F]:
    """``--on-miss stop|forward|force`` (``ownloop.replay.cassette.OnMiss``; not imported here,
    so that a command that serves no cassette does not load the replay code)."""
    return click.option(
        "--on-miss",
        type=click.Choice(["stop", "forward", "force"]),
        default="stop",
        help=help,
    )


noise_option = click.option(
    "--noise",
    default=0.0,
    type=click.FloatRange(0, 1),
    metavar="P",
    show_default=False,
    help="The expert answers a plausible wrong action with probability P per step.",
)
