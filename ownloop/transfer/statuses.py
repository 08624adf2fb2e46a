"""Status words: a plain harness's vocabulary to ownloop's, and back.

Harnesses end a session with their own word (``done``, ``max_rounds``, ``crash`` ...). Import maps
it to one of ownloop's statuses (DESIGN §5) and keeps the word as ``agent_status``; export writes
the session's own word back when it still means the same status, else the harness word for it.
"""

from __future__ import annotations

from ownloop.store.events import Status

__all__ = ["FAILED_FOLDER_STATUSES", "harness_status", "ownloop_status"]

# Lower-cased harness words (and ownloop's own statuses) -> ownloop status.
_TO_OWNLOOP: dict[str, Status] = {
    "finished": "finished",
    "done": "finished",
    "success": "finished",
    "succeeded": "finished",
    "complete": "finished",
    "completed": "finished",
    "terminate:success": "finished",
    "call_user": "call_user",
    "calluser": "call_user",
    "fail": "fail",
    "failed": "fail",
    "failure": "fail",
    "infeasible": "fail",
    "terminate:failure": "fail",
    "max_steps": "max_steps",
    "max_rounds": "max_steps",
    "max_turns": "max_steps",
    "timeout": "timeout",
    "timed_out": "timeout",
    "parse_error": "parse_error",
    "no_action": "no_action",
    "endpoint_error": "endpoint_error",
    "env_error": "env_error",
    "error": "error",
    "action_error": "error",
    "browser_error": "error",
    "interrupted": "interrupted",
    "crash": "crashed",
    "crashed": "crashed",
}

# The word export writes for an ownloop status when the session's own word does not map back.
_TO_HARNESS = {"crashed": "crash"}

FAILED_FOLDER_STATUSES = frozenset({"crashed", "endpoint_error", "env_error", "interrupted"})
"""Statuses a harness leaves to be re-run: written as ``session_failed.json``."""


def ownloop_status(word: object, *, default: Status = "error") -> Status:
    """ownloop's status for a harness's status word; ``default`` when it is missing or unknown.

    Args:
        word: the harness's word, e.g. ``"done"``, ``"max_rounds"``, ``"DONE"``.
        default: the status for a missing or unknown word.
    """
    if not isinstance(word, str):
        return default
    return _TO_OWNLOOP.get(_normal(word), default)


def _normal(word: str) -> str:
    return word.strip().lower().replace("-", "_").replace(" ", "_")


def harness_status(status: str, agent_status: str) -> str:
    """The word to write for a session: its own word when that maps back to ``status`` (or to
    nothing known, which an import reads as ``status`` again)."""
    if agent_status and _TO_OWNLOOP.get(_normal(agent_status), status) == status:
        return agent_status
    return _TO_HARNESS.get(status, status)
