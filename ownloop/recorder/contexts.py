"""Fresh browser contexts for session after session on one Chromium, made ahead and closed behind.

A batch replay gives each session a fresh context (no cookies, storage or cache carried over),
and a context's first page costs Chromium a renderer process: 0.2-0.5 s, about as long as a short
session's own operations. :class:`FreshContexts` makes the next session's context (and its first
page, on ``about:blank``) while the current session runs, and closes a finished session's context
while the next one runs: both off the session's own path. The contexts are the ones
:func:`~ownloop.recorder.browser.open_context` makes, only made at another time (and the page
made ahead has taken one screenshot of its blank self, which sets the capture path up).

Playwright's sync API is bound to its thread: a call blocks that thread, and the driver's event
loop runs only while one does. The work done ahead runs on the same thread, in a greenlet of its
own started from that loop, as Playwright runs a sync event handler: its calls go on while the
session's own calls wait for the browser.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

import greenlet  # type: ignore[import-untyped]  # Playwright's own dependency

from ownloop.recorder.browser import Browser, BrowserSession, Opened, open_context

__all__ = ["FreshContexts"]


async def _settled(future: asyncio.Future[None]) -> None:
    await future


class _Background:
    """``work`` run on the calling thread's Playwright driver while the thread goes on; ``wait``
    blocks (the driver's loop running) until it is done, and returns what it returned."""

    def __init__(self, browser: Browser, work: Callable[[], Any]) -> None:
        self.browser, self.work = browser, work
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        loop: asyncio.AbstractEventLoop | None = getattr(browser, "_loop", None)
        self.future: asyncio.Future[None] | None = None
        if loop is None or loop.is_closed() or not hasattr(browser, "_sync"):
            self._run()  # a Playwright that does not work so: done now, on this thread's path
            return
        self.future = loop.create_future()
        # Started from the loop, the greenlet's parent is the loop's own (the dispatcher): when
        # it blocks in a call, or ends, the loop goes on.
        loop.call_soon(lambda: greenlet.greenlet(self._run).switch())

    def _run(self) -> None:
        try:
            self.result = self.work()
        except Exception as exc:  # noqa: BLE001 - handed to whoever waits for it
            self.error = exc
        finally:
            self.done = True
            if self.future is not None and not self.future.done():
                try:
                    self.future.set_result(None)
                except RuntimeError:  # the driver's loop closed (Playwright stopped meanwhile)
                    pass

    def wait(self) -> Any:
        """What ``work`` returned, once it has; raises what it raised."""
        if not self.done and self.future is not None:
            try:
                self.browser._sync(_settled(self.future))  # noqa: SLF001 - see the module
            except Exception as exc:  # noqa: BLE001 - a driver that is gone
                self.error = self.error or exc
        if not self.done and self.error is None:
            self.error = RuntimeError("the browser's driver stopped")
        if self.error is not None:
            raise self.error
        return self.result


def _made_ahead(browser: Browser, viewport: tuple[int, int]) -> Opened:
    opened = open_context(browser, viewport)
    # A first capture sets the page's screenshot path up (40-70 ms measured at load 12-14): here,
    # rather than in the session's first step. A capture of about:blank changes nothing in it.
    try:
        opened.page_cdp.send("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True})
    except Exception:  # noqa: BLE001, S110 - the session's own first capture will say what fails
        pass
    return opened


def _close(opened: Opened) -> None:
    try:
        opened.context.close()
    except Exception:  # noqa: BLE001, S110 - a browser that died took its contexts along
        pass


class FreshContexts:
    """Fresh contexts of ``browser`` for one session after another, on the thread that
    launched it: :meth:`take` returns the one made ahead (or a new one) and starts the next;
    :meth:`retire` closes a finished session in the background; :meth:`close` closes what is
    left before the browser closes."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self._spare: _Background | None = None
        self._spare_viewport: tuple[int, int] | None = None
        self._closing: list[_Background] = []

    def take(self, viewport: tuple[int, int]) -> Opened:
        """A fresh context of ``viewport`` and its first page: the one made ahead when it fits
        (a failed one is made again, now). The next session's is started before returning."""
        opened: Opened | None = None
        spare, self._spare = self._spare, None
        if spare is not None:
            try:
                made = spare.wait()
            except Exception:  # noqa: BLE001 - made again, now: its error, if any, is the one
                made = None
            if isinstance(made, Opened) and self._spare_viewport == viewport:
                opened = made
            elif isinstance(made, Opened):
                self._retire(partial(_close, made))
        if opened is None:
            opened = open_context(self.browser, viewport)
        return opened

    def ahead(self, viewport: tuple[int, int]) -> None:
        """Start making the next session's context (of ``viewport``), unless one is on its way."""
        if self._spare is None:
            self._spare_viewport = viewport
            self._spare = _Background(self.browser, lambda: _made_ahead(self.browser, viewport))

    def retire(self, session: BrowserSession) -> None:
        """Close ``session`` (its context and pages) in the background."""
        self._retire(session.close)

    def _retire(self, close: Callable[[], None]) -> None:
        self._closing = [closing for closing in self._closing if not closing.done]
        self._closing.append(_Background(self.browser, close))

    def close(self) -> None:
        """Close the context made ahead and wait for those closing; the browser may close then."""
        spare, self._spare = self._spare, None
        if spare is not None:
            try:
                made = spare.wait()
            except Exception:  # noqa: BLE001 - a browser that died made nothing to close
                made = None
            if isinstance(made, Opened):
                self._retire(partial(_close, made))
        for closing in self._closing:
            try:
                closing.wait()
            except Exception:  # noqa: BLE001, S110 - a browser that died has nothing to close
                pass
        self._closing = []
