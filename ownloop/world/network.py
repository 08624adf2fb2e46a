"""A browser context's requests, noted as each one ends, for the session's HAR (:mod:`.har`).

Noted as each request ends: a response body is gone once its page has moved on. A text body
costs one round trip to the browser (about 1 ms on the test site); bodies are kept as
:func:`.har.keeps_body` says, each up to 1 MiB and the session's up to 10 MiB. With
:mod:`.browser` and :mod:`.chromium`, the only modules that import Playwright.
"""

from __future__ import annotations

import time
from typing import Any

from playwright.sync_api import BrowserContext, Request, Response
from playwright.sync_api import Error as PlaywrightError

from ownloop.world.har import MAX_BODY_BYTES, MAX_HAR_BYTES, Exchange, keeps_body

__all__ = ["NetworkLog", "error_message"]


def error_message(error: BaseException) -> str:
    """The first line of ``error`` (at most 500 characters), or its type when it says nothing."""
    return str(error).strip().splitlines()[0][:500] if str(error).strip() else type(error).__name__


class NetworkLog:
    """The requests ``context``'s pages made (finished or failed), in end order."""

    def __init__(self, context: BrowserContext) -> None:
        self._exchanges: list[Exchange] = []
        self._body_bytes = 0
        context.on("requestfinished", self._on_request_done)
        context.on("requestfailed", self._on_request_failed)

    def exchanges(self) -> list[Exchange]:
        """The requests noted so far."""
        return list(self._exchanges)

    def _on_request_done(self, request: Request) -> None:
        # Known without a round trip once it has arrived, as it has when its request ends.
        response = request.existing_response
        if response is None:
            try:
                response = request.response()
            except PlaywrightError:
                response = None
        body, note = None, ""
        if response is not None:
            kind = response.headers.get("content-type", "")
            length = response.headers.get("content-length", "")
            if not keeps_body(request.resource_type, kind):
                note = f"body not kept: a {request.resource_type} of {kind or 'no type'}"
            elif length.isdigit() and int(length) > MAX_BODY_BYTES:
                note = f"body of {length} bytes not kept: bodies are capped at 1 MiB"
            elif self._body_bytes > 2 * MAX_HAR_BYTES:
                note = "body not kept: the session's bodies passed 10 MiB"
            else:
                try:
                    data = response.body()
                except PlaywrightError as error:  # a redirect, or a page already gone
                    note = f"body not available: {error_message(error)}"
                else:
                    if len(data) > MAX_BODY_BYTES:
                        note = f"body of {len(data)} bytes not kept: bodies are capped at 1 MiB"
                    else:
                        body = data.decode("utf-8", "replace")
                        self._body_bytes += len(data)
        self._note(request, response, body, note, None)

    def _on_request_failed(self, request: Request) -> None:
        self._note(request, None, None, "", request.failure or "failed")

    def _note(
        self, request: Request, response: Any, body: str | None, note: str, failure: str | None
    ) -> None:
        timing = request.timing
        started = timing.get("startTime", -1)
        ended = timing.get("responseEnd", -1)
        try:
            post_data = request.post_data
        except (PlaywrightError, UnicodeDecodeError):
            post_data = None
        self._exchanges.append(
            Exchange(
                started=started / 1000 if started > 0 else time.time(),
                method=request.method,
                url=request.url,
                request_headers=_all_headers(request),
                post_data=post_data,
                status=response.status if response is not None else 0,
                status_text=response.status_text if response is not None else "",
                response_headers=_all_headers(response) if response is not None else {},
                body=body,
                body_note=note,
                resource_type=request.resource_type,
                elapsed_ms=max(0.0, float(ended)),
                failure=failure,
            )
        )


def _all_headers(message: Request | Response) -> dict[str, str]:
    """The headers as sent or received, Accept, Sec-Fetch-* and cookies too (a round trip to the
    browser); Playwright's provisional ones if the browser no longer has them."""
    try:
        return message.all_headers()
    except PlaywrightError:
        return dict(message.headers)
