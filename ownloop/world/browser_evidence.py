"""End-state evidence: what a grader may need from a session's browser once it has ended.

Each piece becomes one ``EvidenceCaptured`` event. Names and values:

==================  ===========================================================================
``final_url``       the followed page's URL, a JSON string
``title``           its title, a JSON string
``dom``             the DOM as ``page.content()`` serialises it, a blob (``data``), ``text/html``
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
from typing import TYPE_CHECKING, Any

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

# The title, the DOM (as ``page.content()`` serialises it) and localStorage in one round trip.
# ``page.content()`` runs in Playwright's utility world, whose first use in a page costs about
# 25 ms; the page's own world is set up already. localStorage may be refused (an opaque
# origin): then only that piece is an error.
_PAGE_STATE_JS = (
    """() => {
  let dom = '';
  if (document.doctype) dom = new XMLSerializer().serializeToString(document.doctype);
  if (document.documentElement) dom += document.documentElement.outerHTML;
  let storage = null, refused = '';
  try {
    storage = (%s)();
  } catch (error) {
    refused = String(error);
  }
  return {title: document.title, dom, storage, refused};
}"""
    % _LOCAL_STORAGE_JS
)


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
    try:
        state = session.evaluate(_PAGE_STATE_JS)
    except OwnloopError:  # a closed page, a crashed browser: read each piece, say what failed
        state = None
    if not _page_state(state):  # none, or shaped by the page's own script: read each piece
        pieces += _one_by_one(session)
    else:
        pieces.append(Evidence("title", value_json=json.dumps(state["title"])))
        pieces.append(Evidence("dom", data=state["dom"].encode(), media_type="text/html"))
        pieces.append(_cookies(session))
        if state["storage"] is None:
            refused = f"script failed in {session.page.url}: {state['refused']}"
            pieces.append(capture_error("local_storage", refused))
        else:
            pieces.append(Evidence("local_storage", value_json=json.dumps(state["storage"])))
    # Last, so the requests the reads above let Playwright deliver are in it.
    har = build_har(session.network(), creator_version=__version__)
    pieces.append(Evidence("network", data=har, source="har"))
    return pieces


def _page_state(state: Any) -> bool:
    """Whether ``state`` is what ``_PAGE_STATE_JS`` returns when the page's own script left
    the objects it reads alone (its title and DOM text, its storage strings)."""
    if not isinstance(state, dict):
        return False
    storage = state.get("storage")
    return (
        isinstance(state.get("title"), str)
        and isinstance(state.get("dom"), str)
        and isinstance(state.get("refused"), str)
        and (
            storage is None
            or (
                isinstance(storage, dict)
                and all(isinstance(value, str) for value in storage.values())
            )
        )
    )


def _cookies(session: BrowserSession) -> Evidence:
    try:
        return Evidence("cookies", value_json=json.dumps(session.cookies()))
    except OwnloopError as error:
        return capture_error("cookies", error)


def _one_by_one(session: BrowserSession) -> list[Evidence]:
    """The title, DOM, cookies and localStorage read one at a time, each failure its own
    ``capture_error`` piece."""
    readers: tuple[tuple[str, Callable[[], Evidence]], ...] = (
        ("title", lambda: Evidence("title", value_json=json.dumps(session.title()))),
        ("dom", lambda: Evidence("dom", data=session.content().encode(), media_type="text/html")),
        ("cookies", lambda: _cookies(session)),
        (
            "local_storage",
            lambda: Evidence(
                "local_storage", value_json=json.dumps(session.evaluate(_LOCAL_STORAGE_JS))
            ),
        ),
    )
    pieces = []
    for piece, read in readers:
        try:
            pieces.append(read())
        except OwnloopError as error:
            pieces.append(capture_error(piece, error))
    return pieces
