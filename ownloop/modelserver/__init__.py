"""``ownloop serve-model``: an OpenAI-compatible endpoint that answers from a script, not a model.

The server (``ModelServer``) asks a responder for every answer. Responders: the MiniWoB expert
(``ownloop.modelserver.expert``), which answers like a competent model in an agent's own output
grammar, and ``FaultyResponder``, which wraps another one to misbehave on purpose.
"""

# The package serves chat's whole contract (what a responder sees and may raise): the star
# import binds its names and the ``__all__`` import tells mypy which they are.
from ownloop.modelserver.chat import *  # noqa: F403
from ownloop.modelserver.chat import __all__ as __all__
from ownloop.modelserver.faults import (
    FAULT_MODES,
    HOSTILE_MARKER,
    FaultPhase,
    FaultSpecError,
    FaultyResponder,
    parse_faults,
)
from ownloop.modelserver.server import ModelServer

__all__ = [
    *__all__,
    "FAULT_MODES",
    "HOSTILE_MARKER",
    "FaultPhase",
    "FaultSpecError",
    "FaultyResponder",
    "ModelServer",
    "parse_faults",
]
