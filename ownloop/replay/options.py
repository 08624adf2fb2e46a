"""How a re-execution runs: ``ownloop replay``'s options as one frozen Struct.

The command builds a ``ReplayOptions`` from its flags; a single replay (``execute_session``), a
batch (``execute_batch``) and an audit's replays (``SerialReplays``) take the same Struct, so a
flag means the same thing wherever it goes.
"""

from __future__ import annotations

import msgspec

from ownloop.replay.cassette import OnMiss
from ownloop.world.pool import DesktopTarget

__all__ = ["ReplayOptions"]


class ReplayOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What a replay does beyond its mode (``ops``, ``actions``, ``responses``, ``fork``).

    Attributes:
        fork_at: (``fork``) the first step the live model answers.
        endpoint: the live model's base URL (``fork``, ``on_miss="forward"``,
            ``on_diverge="fork"``).
        model: the live model's name.
        api_key: the live endpoint's key (never recorded).
        settle_s: the pause after each step, seconds.
        chromium: a Chromium executable overriding discovery.
        agent_options: ``KEY=VALUE`` agent options over the ones the parent's run recorded.
        on_miss: what a cassette miss does: ``stop``, ``forward`` or ``force``.
        run_id: the parents' run the children join (default: each parent's own).
        released: clones of the model's released code to read its prompt texts from.
        on_diverge: (``ops``, ``actions``) what a changed element does: ``stop``, ``retarget``,
            ``fork`` (the live model from that step) or ``ignore``; None: ``ignore``, or
            ``retarget`` on another seed or base.
        seed: replay a MiniWoB session on this seed of its task.
        base: replay a tasks-file session against this base URL (another deployment).
        desktop: (a desktop session) the desktop to re-execute on, and its reset.
        audit: the audit the replay is run for (``blind``, ``noop``), recorded with the child.
    """

    fork_at: int | None = None
    endpoint: str | None = None
    model: str | None = None
    api_key: str | None = None
    settle_s: float = 1.0
    chromium: str | None = None
    agent_options: tuple[str, ...] = ()
    on_miss: OnMiss = "stop"
    run_id: str | None = None
    released: str | None = None
    on_diverge: str | None = None
    seed: int | None = None
    base: str | None = None
    desktop: DesktopTarget | None = None
    audit: str = ""
