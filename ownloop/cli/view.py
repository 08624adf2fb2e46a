"""Seeing trajectories: view, report (ownloop/view/)."""

from __future__ import annotations

import click

from ownloop.cli.common import echo, friendly, run_option, store_of

__all__ = ["COMMANDS", "report", "view"]


@click.command()
@click.option("--host", default="127.0.0.1", help="Address to bind.")
@click.option("--port", default=8765, help="Port to bind; 0 picks a free one.")
@click.pass_context
@friendly
def view(ctx: click.Context, host: str, port: int) -> None:
    """Browse runs and sessions in a local web app until Ctrl-C (works while recordings run).

    Example: ownloop view --port 8765, then open http://127.0.0.1:8765/
    """
    from ownloop.view.server import ViewServer

    server = ViewServer(store_of(ctx, create=False), host, port)
    click.echo(f"ownloop view: {server.url} (Ctrl-C to stop)")
    server.serve_forever()


@click.command()
@click.argument("target")
@click.option(
    "--out", type=click.Path(dir_okay=False), help="Write one self-contained HTML file here."
)
@click.option(
    "--gif", type=click.Path(dir_okay=False), help="Write an animated GIF here, one frame per step."
)
@run_option("Look for TARGET's task in this run (default: the latest).")
@click.pass_context
@friendly
def report(
    ctx: click.Context, target: str, out: str | None, gif: str | None, run_id: str | None
) -> None:
    """A session (TARGET: a session id or task id) as one HTML file to attach to a bug report.

    Example: ownloop report click-button --out bug.html --gif bug.gif
    """
    from ownloop.view.report import write_reports

    echo("\n".join(write_reports(store_of(ctx, create=False), target, run_id, out, gif).lines()))


COMMANDS = (view, report)
