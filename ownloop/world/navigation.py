"""Where the model may navigate (DESIGN §8): the policy a :class:`~.browser.BrowserSession` guards.

The model drives only http(s) pages (and ``about:blank``), optionally confined to
``--allow-host`` globs; ``file:``, ``chrome:``, ``view-source:``, ``javascript:``, ``data:`` and
the rest would show it local files or browser internals. Plain functions of URLs.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

__all__ = ["ERROR_PAGE", "left_for_refused", "navigation_refusal"]

_MODEL_SCHEMES = ("http", "https")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# What Chromium's URL parser drops before it reads a URL (WHATWG URL: leading and trailing C0
# controls and spaces, and every tab or newline anywhere), so "\tfile:..." is still file:.
_URL_EDGES = "".join(chr(code) for code in range(0x21))
_URL_DROPPED = str.maketrans("", "", "\t\n\r")
ERROR_PAGE = "chrome-error:"  # Chromium's page for a navigation that failed


def navigation_refusal(url: str, allow_hosts: Sequence[str] = ()) -> str | None:
    """Why the model may not open ``url`` (a line starting ``refused:``), or None when it may.

    The model may open ``about:blank`` and ``http``/``https`` URLs; with ``allow_hosts`` (globs
    such as ``*.example.com`` or ``127.0.0.1:8000``, matched case-insensitively against the host,
    or the host and port when the glob has a colon) only URLs on a matching host.
    """
    cleaned = url.strip(_URL_EDGES).translate(_URL_DROPPED)
    if cleaned.lower() == "about:blank":
        return None
    scheme = _SCHEME.match(cleaned)
    if scheme is None:
        return f"refused: {url[:200]!r} is not an absolute http(s) URL"
    name = scheme.group(1).lower()
    if name not in _MODEL_SCHEMES:
        return f"refused: {name}: URLs are not allowed; the model may only open http(s) pages"
    # Chromium reads a backslash as a slash in http(s) URLs: "http://a\\@b" is host a, not b.
    try:
        parts = urlsplit(cleaned.replace("\\", "/"))
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return f"refused: {url[:200]!r} has an invalid host or port"
    if not host:
        return f"refused: {url[:200]!r} has no host"
    if not allow_hosts:
        return None
    port = port or (443 if name == "https" else 80)
    for glob in allow_hosts:
        glob = glob.lower()
        if fnmatch.fnmatchcase(f"{host}:{port}" if ":" in glob else host, glob):
            return None
    return f"refused: host {host} is not allowed by --allow-host {' '.join(allow_hosts)}"


def left_for_refused(before: str, after: str, allow_hosts: Sequence[str] = ()) -> str | None:
    """Why a page that went from ``before`` to ``after`` is to be blanked (the backstop for what
    no check saw coming: a redirect, a link the page wrote, a popup), or None to leave it.

    Only a page that left a URL the model may open (or Chromium's error page) for one it may not:
    a page the suite itself opened on file: or another host stays usable, and Chromium's own error
    page for a failed allowed navigation is shown.
    """
    refusal = navigation_refusal(after, allow_hosts)
    if (
        refusal is None
        or after == before
        or after.startswith(ERROR_PAGE)
        or not (before.startswith(ERROR_PAGE) or navigation_refusal(before, allow_hosts) is None)
    ):
        return None
    return refusal
