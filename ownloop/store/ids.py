"""Generated ids: the only names ownloop uses for files (never task ids or model text)."""

from __future__ import annotations

import secrets
import time
from typing import TypedDict

__all__ = ["SessionIds", "new_id"]


class SessionIds(TypedDict):
    """The run and session ids every event of a session carries (``Event(**ids, ...)``)."""

    run_id: str
    session_id: str


_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def new_id(length: int = 12) -> str:
    """A short id that sorts by creation time: 8 time characters, then random ones."""
    millis = int(time.time() * 1000)
    head = []
    for _ in range(8):
        head.append(_ALPHABET[millis % 32])
        millis //= 32
    tail = "".join(secrets.choice(_ALPHABET) for _ in range(max(length - 8, 4)))
    return "".join(reversed(head)) + tail
