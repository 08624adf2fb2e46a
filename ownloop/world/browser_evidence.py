"""End-state evidence: what a grader may need from a session's browser once it has ended.

Each piece becomes one ``EvidenceCaptured`` event. Names and values:

==================  ===========================================================================
``final_url``       the followed page's URL, a JSON string
``title``           its title, a JSON string
``dom``             ``page.content()`` as a blob (``data``), media type ``text/html``
``cookies``         the context's cookies, a JSON list of Playwright cookie objects
``local_storage``   the followed page's localStorage, a JSON object of strings
``network``         the requests of the session's pages as a HAR 1.2 blob (``data``), media type
                    ``application/json``: text bodies kept, capped at 5 MiB, secrets scrubbed
                    (see ``ownloop.world.har``)
``capture``         (suites) a capture URL's JSON body, ``source`` = the URL; a body that is not
                    JSON is kept as a blob with its media type
``miniwob_reward``  (MiniWoB) ``{"reward", "raw_reward", "done", "reason"}`` of the episode
``capture_error``   a piece that could not be read: ``{"piece", "error"}``
==================  ===========================================================================
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from ownloop.errors import OwnloopError
from ownloop.version import __version__
from ownloop.world.evidence import Evidence
from ownloop.world.har import build_har

if TYPE_CHECKING:
    from ownloop.world.browser import BrowserSession

__all__ = ["Evidence", "capture_end_state", "capture_error"]

_LOCAL_STORAGE_JS = """() => {
  const out = {};
  for (let i = 0; i < localStorage.length; i++) {
    const key = localStorage.key(i);
    out[key] = localStorage.getItem(key);
  }
  return out;
}"""


def capture_error(piece: str, error: object, source: str = "") -> Evidence:
    """Evidence that ``piece`` could not be captured, and why."""
    value = {"piece": piece, "error": str(error)[:500]}
    return Evidence("capture_error", value_json=json.dumps(value), source=source)


def capture_end_state(session: BrowserSession) -> list[Evidence]:
    """The final URL, title, DOM, cookies and localStorage of a session's followed page, and
    the session's network as a HAR.

    A piece that cannot be read (a closed page, a crashed browser, an opaque origin) becomes a
    ``capture_error`` piece; the others are still captured.
    """
    # The URL is known without a round trip to the browser, even when the page is gone.
    pieces = [Evidence("final_url", value_json=json.dumps(session.page.url))]
    readers: tuple[tuple[str, Callable[[], Evidence]], ...] = (
        ("title", lambda: Evidence("title", value_json=json.dumps(session.title()))),
        ("dom", lambda: Evidence("dom", data=session.content().encode(), media_type="text/html")),
        ("cookies", lambda: Evidence("cookies", value_json=json.dumps(session.cookies()))),
        (
            "local_storage",
            lambda: Evidence(
                "local_storage", value_json=json.dumps(session.evaluate(_LOCAL_STORAGE_JS))
            ),
        ),
    )
    for piece, read in readers:
        try:
            pieces.append(read())
        except OwnloopError as error:
            pieces.append(capture_error(piece, error))
    # Last, so the requests the reads above let Playwright deliver are in it.
    har = build_har(session.network(), creator_version=__version__)
    pieces.append(Evidence("network", data=har, source="har"))
    return pieces
