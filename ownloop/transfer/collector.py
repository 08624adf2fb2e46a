"""An OTLP/HTTP collector's endpoint, parsed once, and one POST to it that follows no redirect.

``--endpoint`` is the collector's base URL as a user writes it: ``HTTP://host:4318``,
``https://user:password@host/otel?token=...``. It is parsed once into what is posted to (the
scheme in lower case, the path with ``/v1/traces`` put after it and before the query, no
fragment, no ``user:password@``: those become a Basic ``Authorization`` header) and what every
message shows (the same URL with secret query values masked). A URL holding a control character
or a space (a pasted CR LF) is refused in one line before anything is sent.

A collector that answers with a redirect (any 3xx) did not take the traces: following it would
send them to another host, or, as ``urllib`` does for 301-303, turn the POST into a GET without
its body and report success. So a 3xx is an error that names the ``Location``, scrubbed.
"""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import unquote, urlsplit, urlunsplit

from ownloop.errors import OwnloopError
from ownloop.store.scrub import scrub_url
from ownloop.store.text import visible

__all__ = ["Endpoint", "parse_endpoint", "post"]

_EXAMPLE = "e.g. http://127.0.0.1:4318"
_UNSENDABLE = re.compile(r"[\x00-\x20\x7f-\x9f]")  # controls and spaces: no HTTP request line
_PATH = "/v1/traces"


class Endpoint(NamedTuple):
    """Where traces are posted, and how that is shown."""

    url: str  # without user:password@
    shown: str  # ``url`` with secret query values masked: for every message
    authorization: str | None  # a Basic header made of the URL's user:password, if any


def parse_endpoint(endpoint: str, path: str = _PATH) -> Endpoint:
    """``endpoint`` (a collector's base URL, or its full ``/v1/traces`` URL) parsed once.

    Raises:
        OwnloopError: a control character or space in it, not an http(s) URL, or a bad port.
    """
    bad = _UNSENDABLE.search(endpoint)
    if bad:
        raise OwnloopError(
            f"--endpoint holds {visible(bad.group(), one_line=True)} at character "
            f"{bad.start() + 1} (a pasted line break?): pass the collector's OTLP/HTTP base URL "
            f"on one line, {_EXAMPLE}"
        )
    shown = visible(scrub_url(endpoint), 200, one_line=True)
    try:
        parts = urlsplit(endpoint)
        _ = parts.port  # raises ValueError on a port that is not a number in range
        user, password = parts.username, parts.password
    except ValueError as error:
        raise OwnloopError(
            f"--endpoint {shown!r} is not a URL ({error}). Pass the collector's OTLP/HTTP "
            f"base URL, {_EXAMPLE}"
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise OwnloopError(
            f"--endpoint {shown!r} is not an http(s) URL. Pass the collector's OTLP/HTTP "
            f"base URL, {_EXAMPLE}"
        )
    host = parts.netloc.rpartition("@")[2]
    route = parts.path.rstrip("/")
    if not route.endswith(path):
        route += path
    url = urlunsplit((scheme, host, route, parts.query, ""))
    authorization = None
    if user is not None or password is not None:
        pair = f"{unquote(user or '')}:{unquote(password or '')}".encode()
        authorization = "Basic " + base64.b64encode(pair).decode()
    return Endpoint(url, visible(scrub_url(url), 300, one_line=True), authorization)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Every redirect is left unfollowed: ``urllib`` then raises it as an ``HTTPError``."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects())


def post(endpoint: Endpoint, body: bytes, content_type: str, fix: Callable[[int], str]) -> None:
    """POST ``body`` to ``endpoint``; any answer but 2xx is an error (``fix(status)`` ends it).

    Raises:
        OwnloopError: the collector answered otherwise (a redirect names its Location), or
            could not be reached.
    """
    headers = {"Content-Type": content_type}
    if endpoint.authorization:
        headers["Authorization"] = endpoint.authorization
    request = urllib.request.Request(endpoint.url, data=body, method="POST", headers=headers)
    try:
        with _OPENER.open(request, timeout=30) as answer:  # noqa: S310 - http(s) only
            answer.read()
    except urllib.error.HTTPError as error:
        error.close()  # its answer's socket: read no more of it
        if 300 <= error.code < 400:
            location = visible(scrub_url(error.headers.get("Location") or "nowhere"), 200)
            raise OwnloopError(
                f"the collector at {endpoint.shown} answered {error.code} {error.reason}, a "
                f"redirect to {visible(location, one_line=True)}: nothing was delivered "
                "(redirects are not followed). Pass the URL that takes the traces as --endpoint"
            ) from None
        raise OwnloopError(
            f"the collector at {endpoint.shown} answered {error.code} "
            f"{visible(error.reason, 100, one_line=True)} to {content_type}. {fix(error.code)}"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        reason = visible(scrub_url(str(getattr(error, "reason", error))), 200, one_line=True)
        raise OwnloopError(
            f"cannot reach the collector at {endpoint.shown} ({reason}). Start it, or check "
            "--endpoint"
        ) from None
