"""``ownloop serve-model``: an OpenAI-compatible endpoint that answers from a script, not a model.

The server (``ModelServer``) asks a responder for every answer. Responders: the MiniWoB expert
(``ownloop.modelserver.expert``), which answers like a competent model in an agent's own output
grammar, and ``FaultyResponder``, which wraps another one to misbehave on purpose.
"""

from ownloop.modelserver.chat import (
    DropConnection,
    Fault,
    Hang,
    HttpFault,
    RawBody,
    Reply,
    Responder,
    StopListening,
    TaskStatement,
    assistant_turns,
    find_task,
    last_image_size,
    steps_taken,
)
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
    "FAULT_MODES",
    "HOSTILE_MARKER",
    "DropConnection",
    "Fault",
    "FaultPhase",
    "FaultSpecError",
    "FaultyResponder",
    "Hang",
    "HttpFault",
    "ModelServer",
    "RawBody",
    "Reply",
    "Responder",
    "StopListening",
    "TaskStatement",
    "assistant_turns",
    "find_task",
    "last_image_size",
    "parse_faults",
    "steps_taken",
]
