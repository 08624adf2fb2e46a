"""Reading captured end-state evidence the way graders need it: the latest piece by name."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ownloop.store.events import EvidenceCaptured

__all__ = ["final_url", "latest_evidence", "read_value"]

_decode = msgspec.json.decode


def latest_evidence(evidence: Sequence[EvidenceCaptured], name: str) -> EvidenceCaptured | None:
    """The last piece of evidence called ``name``, or None."""
    for item in reversed(evidence):
        if item.name == name:
            return item
    return None


def read_value(item: EvidenceCaptured) -> object:
    """The decoded inline JSON value of a piece of evidence.

    Raises:
        ValueError: the value is stored as a blob only, or is not JSON; the message says which.
    """
    if item.value_json is None:
        where = f" (blob {item.sha256[:12]})" if item.sha256 else ""
        raise ValueError(f"evidence {item.name!r} has no inline JSON value{where}")
    try:
        return _decode(item.value_json)
    except (msgspec.DecodeError, RecursionError) as error:
        raise ValueError(f"evidence {item.name!r} is not valid JSON ({error})") from None


def final_url(evidence: Sequence[EvidenceCaptured]) -> str | None:
    """The session's final URL (evidence ``final_url``, a JSON string), or None if not captured."""
    item = latest_evidence(evidence, "final_url")
    if item is None:
        return None
    try:
        value = read_value(item)
    except ValueError:
        return None
    return value if isinstance(value, str) else None
