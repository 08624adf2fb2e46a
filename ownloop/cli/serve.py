"""Serving: a scripted model endpoint, a test desktop."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ownloop.cli.common import friendly, noise_option, notice, on_miss_option, store_of

if TYPE_CHECKING:
    from ownloop.replay.cassette import OnMiss

__all__ = ["COMMANDS", "serve_desktop", "serve_model"]


@click.command("serve-model")
@click.option("--host", default="127.0.0.1", help="Address to bind.")
@click.option(
    "--port",
    default=0,
    type=int,
    show_default=False,
    help="Port to bind; 0 (default) picks a free one.",
)
@click.option(
    "--expert",
    default="miniwob",
    help="Who answers: miniwob, judge, or desktop (the test desktop suite; uitars, opencua).",
)
@click.option("--agent", default="uitars", help="Whose output grammar.")
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
@on_miss_option("--cassette: when no recorded response matches.")
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
@noise_option
@click.option("--noise-seed", default=0, help="Seed of --noise's draws.")
@click.pass_context
@friendly
def serve_model(
    ctx: click.Context,
    host: str,
    port: int,
    expert: str,
    agent: str,
    faults: str | None,
    quiet: bool,
    cassette: str | None,
    on_miss: OnMiss,
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
    from ownloop.modelserver.endpoint import Serving, make_server
    from ownloop.replay.cassette import make_cassette_server

    log = None if quiet else click.echo
    server = (
        make_cassette_server(
            store_of(ctx, create=False),
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
            serving=Serving(model, api_key, noise, noise_seed),
            log=log,
            notice=None if quiet else notice,
        )
    )
    what = f"cassette of {cassette}" if cassette else f"{expert} expert for {agent}"
    click.echo(f"ownloop serve-model: {what} at {server.start()}")
    server.serve_forever()


@click.command("serve-desktop")
@click.option(
    "--port",
    default=0,
    type=int,
    show_default=False,
    help="Port to bind on 127.0.0.1; 0 picks a free one.",
)
@click.option(
    "--display", "display", type=int, default=None, help="X display number; default: a free one."
)
@click.option(
    "--size",
    default="1920x1080",
    metavar="WxH",
    help="The screen's size (OSWorld's default is 1920x1080).",
)
@click.option(
    "--apps",
    default="",
    metavar="APP,...",
    show_default=False,
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
@friendly
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

        url = serve_recorded(store_of(ctx), cassette, port=port)
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


COMMANDS = (serve_model, serve_desktop)
