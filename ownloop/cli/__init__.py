"""The ``ownloop`` command: thin click commands, each one call into the library.

One module per concern (inspect_ai's ``_cli/`` way), the options they share declared once in
:mod:`ownloop.cli.common`: ``record`` (record, demo, agents), ``query`` (sql, sessions),
``replay`` (show, replay, diff), ``grading`` (judge, regrade, compare, audit), ``transfer``
(import, export), ``view`` (view, report), ``maintenance`` (verify, seal, archive, index,
compact) and ``serve`` (serve-model, serve-desktop).
"""

from __future__ import annotations

import warnings

import click

from ownloop.cli import grading, maintenance, query, record, replay, serve, transfer, view
from ownloop.store import DEFAULT_STORE
from ownloop.version import __version__

__all__ = ["cli", "main"]


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


# Every option's default is shown in its --help, declared once here for all the commands (their
# contexts inherit it). An option whose default says nothing there (an empty name, no noise) or
# that its help explains (a port's 0) sets show_default=False.
@click.group(cls=_Commands, context_settings={"show_default": True})
@click.version_option(__version__, prog_name="ownloop")
@click.option(
    "--store",
    "store",
    envvar="OWNLOOP_STORE",
    default=DEFAULT_STORE,
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


for _command in (
    *record.COMMANDS,
    *query.COMMANDS,
    *replay.COMMANDS,
    *grading.COMMANDS,
    *transfer.COMMANDS,
    *view.COMMANDS,
    *maintenance.COMMANDS,
    *serve.COMMANDS,
):
    cli.add_command(_command)


def main() -> None:
    # Agents compile model text with ast.parse (never run it); Python may warn about it (an
    # invalid escape such as "\\d", "1if") on stderr, through a progress bar. The application,
    # not the agents, sets this filter: only code compiled from a string without a file name.
    for category in (SyntaxWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=r"<unknown>\Z")
    cli(prog_name="ownloop")
