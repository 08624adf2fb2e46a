"""A piece of end state before it is stored: what every world and suite hands the episode.

Each piece becomes one ``EvidenceCaptured`` event (``ownloop.world.browser_evidence`` lists the
browser's names; ``ownloop.world.osworld.getters`` the desktop's).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Evidence"]


class Evidence(NamedTuple):
    """Inline JSON ``value_json`` or a blob ``data``, with its media type and source."""

    name: str
    value_json: str | None = None
    data: bytes | None = None
    media_type: str = "application/json"
    source: str = ""
