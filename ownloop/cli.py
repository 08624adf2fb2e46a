"""The ``ownloop`` command: thin click commands, each one call into the library."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from ownloop import __version__
from ownloop.store import Store, open_store
from ownloop.store.errors import OwnloopError

__all__ = ["cli", "main"]


def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the library's one-line errors into click errors (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OwnloopError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper


def _store(ctx: click.Context) -> Store:
    return open_store(ctx.obj["store"])


@click.group()
@click.version_option(__version__, prog_name="ownloop")
@click.option(
    "--store", "store", envvar="OWNLOOP_STORE", default="ownloop-data", show_default=True,
    type=click.Path(file_okay=False), help="The store directory (also $OWNLOOP_STORE).",
)
@click.pass_context
def cli(ctx: click.Context, store: str) -> None:
    """Record computer-use agents, query their trajectories in SQL, replay them offline."""
    ctx.ensure_object(dict)
    ctx.obj["store"] = store


# --- commands go below; keep each one thin --------------------------------------------------


def main() -> None:
    cli(prog_name="ownloop")
