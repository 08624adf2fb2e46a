"""What ``ownloop serve-model`` serves: a responder chosen by name, wrapped in faults if asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ownloop.errors import OwnloopError
from ownloop.modelserver.chat import Responder
from ownloop.modelserver.faults import FaultyResponder, parse_faults
from ownloop.modelserver.noise import Noise
from ownloop.modelserver.server import ModelServer

__all__ = ["EXPERTS", "Serving", "UnknownExpert", "make_responder", "make_server"]

EXPERTS = ("miniwob", "judge", "desktop")
"""The scripted experts ``--expert`` can name (recorded responses: ``--cassette``, served by
``ownloop.replay.cassette``)."""


class UnknownExpert(OwnloopError):
    pass


def make_responder(
    expert: str,
    agent: str,
    faults: str | None = None,
    notice: Callable[[str], None] | None = None,
    noise: float = 0.0,
    noise_seed: int = 0,
) -> Responder:
    """The responder for ``--expert NAME --agent NAME [--faults SPEC]``.

    Args:
        expert: which scripted expert answers: "miniwob", "judge", or "desktop" (the test desktop
            suite's tasks, ``ownloop.modelserver.desktop_expert``; agents uitars, opencua).
        agent: whose output grammar it answers in (an ownloop agent name, e.g. "uitars").
        faults: a fault plan (see ``ownloop.modelserver.faults``), or None for none.
        notice: told in a line when the expert makes its first plan (seconds), and when done.
        noise: the chance that a step answers a plausible wrong action (seeded by
            ``noise_seed``; see ``ownloop.modelserver.noise``).

    Raises:
        UnknownExpert: the expert name is not one of EXPERTS.
        FaultSpecError: the fault plan does not parse.
    """
    phases = parse_faults(faults) if faults else ()  # a bad spec fails before a browser starts
    errors = Noise(noise, noise_seed) if noise else None
    if expert not in EXPERTS:
        raise UnknownExpert(f"no expert {expert!r}. Use one of: {', '.join(EXPERTS)}")
    responder: Responder
    if expert == "judge":  # ownloop judge's requests: verdicts, --noise flips them
        from ownloop.modelserver.judge import ScriptedJudge

        responder = ScriptedJudge(noise, noise_seed)
    elif expert == "desktop":
        from ownloop.modelserver.desktop_expert import DESKTOP_AGENTS, DesktopExpert

        if agent not in DESKTOP_AGENTS:
            raise UnknownExpert(
                f"the desktop expert answers as {' or '.join(DESKTOP_AGENTS)}, not {agent!r}"
            )
        responder = DesktopExpert(agent)
    else:
        from ownloop.modelserver.expert import MiniwobExpert  # no browser until first asked

        responder = MiniwobExpert(agent, notice=notice, noise=errors)
    return FaultyResponder(responder, phases) if phases else responder


class Serving(NamedTuple):
    """How an expert endpoint serves, beyond its answers.

    Args:
        model: serve only this model name (others get 404, as from vLLM); None: any name is
            accepted and ``ownloop-EXPERT-AGENT`` is listed.
        api_key: the key requests must send (else 401); None: none needed.
        noise: the chance that a step answers a plausible wrong action (seeded by
            ``noise_seed``; see ``ownloop.modelserver.noise``).
    """

    model: str | None = None
    api_key: str | None = None
    noise: float = 0.0
    noise_seed: int = 0


_SERVING = Serving()  # any model name, no key, no noise


def make_server(
    expert: str,
    agent: str,
    faults: str | None = None,
    *,
    serving: Serving = _SERVING,
    host: str = "127.0.0.1",
    port: int = 0,
    log: Callable[[str], None] | None = None,
    notice: Callable[[str], None] | None = None,
) -> ModelServer:
    """A not-yet-started ModelServer for ``serve-model``'s options (see ``make_responder``)."""
    return ModelServer(
        make_responder(expert, agent, faults, notice, serving.noise, serving.noise_seed),
        host,
        port,
        models=(serving.model or f"ownloop-{expert}-{agent}",),
        any_model=serving.model is None,
        api_key=serving.api_key,
        log=log,
    )
