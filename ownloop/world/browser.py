"""Acting in Chromium through Playwright (launching it and opening a context is :mod:`.chromium`'s,
where the model may navigate :mod:`.navigation`'s, noting the requests :mod:`.network`'s).

A :class:`BrowserSession` is one browser context (one recorded session): it follows the newest open
page, takes lossless screenshots, and executes the browser operations of ``store.events`` (``Op``),
reporting what each did as an :class:`Effect`. Playwright's sync objects are bound to the thread
that made them, so each worker thread calls :func:`open_browser` for its own driver and Chromium.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any, Literal, NamedTuple

from playwright.sync_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Page,
    Request,
    Route,
)
from playwright.sync_api import Dialog as PlaywrightDialog
from playwright.sync_api import Download as PlaywrightDownload
from playwright.sync_api import Error as PlaywrightError

from ownloop.errors import OwnloopError
from ownloop.store.events import (
    Dialog,
    Element,
    KeyboardDown,
    KeyboardPress,
    KeyboardType,
    KeyboardUp,
    MouseClick,
    MouseDown,
    MouseMove,
    MouseUp,
    MouseWheel,
    Op,
    PageGoBack,
    PageGoto,
    Sleep,
)
from ownloop.world import Effect, Screen
from ownloop.world.chromium import open_context, page_cdp
from ownloop.world.har import Exchange
from ownloop.world.navigation import left_for_refused, navigation_refusal
from ownloop.world.network import NetworkLog
from ownloop.world.network import error_message as _message

__all__ = [
    "Browser",
    "BrowserFailed",
    "BrowserSession",
    "Effect",
    "Fetched",
    "Page",
    "Refound",
    "Screen",
    "may_start_download",
    "navigation_refusal",
    "open_context",
]

_ELEMENT_JS = (Path(__file__).with_name("element_at_point.js")).read_text(encoding="utf-8")
_NAVIGATION_TIMEOUT_MS = 30_000
_LOAD_WAIT_MS = 5_000  # DESIGN §5: wait for DOMContentLoaded up to 5 s after each step
_MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024
_POINTER_OPS = (MouseClick, MouseMove, MouseDown, MouseUp, MouseWheel)
# Ops after which a popup, download or navigation may still be on its way. A new tab is announced
# before the op returns (Target.targetCreated) and a navigation is followed to its document; a
# download is announced 30-80 ms after the click returns (measured on the test site), so it is
# picked up at settle time (or by the op itself, when it came in time), not waited for per op.
_TRIGGER_OPS = (MouseClick, MouseUp, KeyboardPress, KeyboardUp)


def may_start_download(op: Op) -> bool:
    """Whether ``op`` is one after which a download, popup or navigation may follow."""
    return isinstance(op, _TRIGGER_OPS) or (isinstance(op, KeyboardType) and "\n" in op.text)


class BrowserFailed(OwnloopError):
    """The page or browser could not do what a suite or the recorder asked (not an agent's op)."""


class Refound(NamedTuple):
    """A recorded element found again in the page (a guarded replay's retarget): the element,
    how it matched (``name_role``, ``text``, ``css_path`` or ``nearest``) and its centre."""

    element: Element
    match: str
    x: float
    y: float


class Fetched(NamedTuple):
    """A URL's response read with the session's cookies."""

    status: int
    body: bytes
    content_type: str


def _png_size(png: bytes) -> tuple[int, int]:
    # The IHDR chunk starts every PNG: width and height are big-endian at bytes 16..24.
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _element(found: dict[str, Any]) -> Element:
    return Element(
        tag=found["tag"],
        id=found["id"],
        role=found["role"],
        name=found["name"],
        css_path=found["css_path"],
        bbox=tuple(found["bbox"]),
        frame=found["frame"],
        text=found["text"],
    )


class BrowserSession:
    """One browser context and its pages, for one session.

    Args:
        browser: a Chromium from :func:`launch` / :func:`open_browser`, on this thread.
        viewport: (width, height) in CSS pixels.
        settle_s: the pause after each step, once the followed page reached DOMContentLoaded.
        dialogs: ``accept`` or ``dismiss`` every alert/confirm/prompt/beforeunload dialog.
        event_grace_s: after a step that clicked, pressed a key or typed a newline, how long
            :meth:`settle` waits at least for a download to announce itself (it stops early
            once one has). Operations themselves never wait for one: a download that was not
            announced by the time its operation returned is returned by :meth:`settle`.
        allow_hosts: host globs the model's navigation is confined to (``--allow-host``); empty:
            any http(s) host. The suite's own :meth:`goto` is not confined.
    """

    def __init__(
        self,
        browser: Browser,
        viewport: tuple[int, int],
        *,
        settle_s: float = 1.0,
        dialogs: Literal["accept", "dismiss"] | str = "accept",
        event_grace_s: float = 0.15,
        allow_hosts: tuple[str, ...] = (),
    ) -> None:
        if dialogs not in ("accept", "dismiss"):
            raise OwnloopError(f"unknown dialog policy {dialogs!r}. Use accept or dismiss")
        self.viewport = viewport
        self.settle_s = settle_s
        self.dialogs = dialogs
        self.event_grace_s = event_grace_s
        self.allow_hosts = tuple(allow_hosts)
        self._model_driving = False  # True from the first execute(), except inside goto()
        self._refusals: list[str] = []
        self._pages: list[Page] = []
        self._cdp: dict[Page, CDPSession] = {}
        self._loading: set[Page] = set()  # pages whose main frame is loading a new document
        # Per page: how many documents its main frame began to load, and how many of them
        # Playwright was last seen to have reached DOMContentLoaded for (see _await_document).
        self._documents: dict[Page, int] = {}
        self._awaited: dict[Page, int] = {}
        self._pointer: dict[Page, tuple[float, float]] = {}
        self._dialogs: list[Dialog] = []
        self._downloads: list[PlaywrightDownload] = []  # announced, not yet taken
        self._triggered = False  # an op since the last settle may still start a download
        self._opened = 0
        # The last element_at() answer (page, x, y, element), until the page may have changed:
        # a guarded replay checks the element under a point, then clicks there; one look-up.
        self._looked_up: tuple[Page, float, float, Element | None] | None = None
        opened = open_context(browser, viewport)
        self.context: BrowserContext = opened.context
        self.context.on("page", self._on_page)
        self.context.on("dialog", self._on_dialog)
        self._network = NetworkLog(self.context)  # the pages' requests, for the session's HAR
        if self.allow_hosts:
            # Stop a click, form or redirect to another host before it loads. Every request
            # passes through this process then, so only when hosts are confined.
            self.context.route("**/*", self._guard_request)
        self._on_page(opened.page)
        self._opened = 0
        # Chromium announces a new tab (Target.targetCreated) before the click that opened it
        # returns, while Playwright's 'page' event can come 100+ ms later: counting the
        # announcements lets execute() wait for exactly the tabs its operation opened.
        self._announced = 0
        self._listen(opened.page, opened.page_cdp, opened.main_frame)
        self._unwatch = opened.targets.listen(opened.context_id, self._on_target)

    # ---------------------------------------------------------------- pages and events
    def _on_page(self, page: Page) -> None:
        if page in self._pages:
            return
        self._pages.append(page)
        self._opened += 1
        page.on("download", self._on_download)

    def _on_target(self) -> None:
        self._announced += 1

    def _guard_request(self, route: Route, request: Request) -> None:
        refusal = None
        if self._model_driving and request.is_navigation_request():
            frame = request.frame
            if frame.parent_frame is None:
                refusal = navigation_refusal(request.url, self.allow_hosts)
        try:
            if refusal is None:
                route.fallback()
            else:
                self._refusals.append(refusal)
                # ERR_ABORTED: Chromium keeps the page as it was, with no error page.
                route.abort("aborted")
        except PlaywrightError:
            pass  # the page went away with its request

    def network(self) -> list[Exchange]:
        """The requests the session's pages made so far (finished or failed), in end order."""
        return self._network.exchanges()

    def _on_download(self, download: PlaywrightDownload) -> None:
        self._downloads.append(download)

    def _on_dialog(self, dialog: PlaywrightDialog) -> None:
        accepted = self.dialogs == "accept"
        message = dialog.message[:1000]
        self._dialogs.append(Dialog(type=dialog.type, message=message, accepted=accepted))
        try:
            dialog.accept() if accepted else dialog.dismiss()
        except PlaywrightError:
            pass  # the page went away with its dialog

    @property
    def pages(self) -> list[Page]:
        """The session's open pages, oldest first."""
        return [page for page in self._pages if not page.is_closed()]

    @property
    def page(self) -> Page:
        """The page being followed: the newest open one (the last page when all are closed)."""
        open_pages = self.pages
        return open_pages[-1] if open_pages else self._pages[-1]

    def _session_for(self, page: Page) -> CDPSession:
        cdp = self._cdp.get(page)
        if cdp is None:
            cdp, main, _ = page_cdp(self.context, page)
            self._listen(page, cdp, main)
            cdp.send("Page.enable")
        return cdp

    def _listen(self, page: Page, cdp: CDPSession, main: str) -> None:
        # Playwright does not say when a click or key started a navigation; the page's own
        # loading events do, so execute() and settle() can wait for the next document.
        cdp.on("Page.frameStartedLoading", lambda event: self._loads(page, event, main, True))
        cdp.on("Page.frameStoppedLoading", lambda event: self._loads(page, event, main, False))
        cdp.on("Page.domContentEventFired", lambda _: self._loading.discard(page))
        self._cdp[page] = cdp

    def _loads(self, page: Page, event: dict[str, Any], main: str, started: bool) -> None:
        if event.get("frameId") == main:
            (self._loading.add if started else self._loading.discard)(page)
            if started:
                self._documents[page] = self._documents.get(page, 0) + 1

    # ---------------------------------------------------------------- for suites
    def goto(self, url: str) -> None:
        """Open ``url`` in the followed page and wait for its load event.

        The suite's navigation: not confined to http(s) or ``allow_hosts`` (the model's is).

        Raises:
            BrowserFailed: the page could not be loaded.
        """
        driving, self._model_driving = self._model_driving, False
        self._looked_up = None
        page = self.page
        try:
            page.goto(url, wait_until="load", timeout=_NAVIGATION_TIMEOUT_MS)
            # Loaded as Playwright sees it: the next settle need not ask again.
            self._awaited[page] = self._documents.get(page, 0)
        except PlaywrightError as error:
            raise BrowserFailed(f"could not open {url}: {_message(error)}") from None
        finally:
            self._model_driving = driving

    def evaluate(self, js: str, arg: Any = None, *, page: Page | None = None) -> Any:
        """Evaluate a JavaScript expression or function in the followed page (or ``page``).

        Raises:
            BrowserFailed: the script threw or the page is gone.
        """
        target = page or self.page
        self._looked_up = None
        try:
            return target.evaluate(js, arg)
        except PlaywrightError as error:
            raise BrowserFailed(f"script failed in {target.url}: {_message(error)}") from None

    def fetch(self, url: str) -> Fetched:
        """GET ``url`` with this context's cookies (not in a page).

        Raises:
            BrowserFailed: the request failed (a non-2xx status is returned, not raised).
        """
        try:
            response = self.context.request.get(url, timeout=_NAVIGATION_TIMEOUT_MS)
            content_type = response.headers.get("content-type", "")
            return Fetched(response.status, response.body(), content_type)
        except PlaywrightError as error:
            raise BrowserFailed(f"could not fetch {url}: {_message(error)}") from None

    def title(self) -> str:
        """The followed page's title."""
        return str(self._page_call(lambda page: page.title()))

    def content(self) -> str:
        """The followed page's serialised DOM."""
        return str(self._page_call(lambda page: page.content()))

    def cookies(self) -> list[dict[str, Any]]:
        """Every cookie of the context."""
        try:
            return [dict(cookie) for cookie in self.context.cookies()]
        except PlaywrightError as error:
            raise BrowserFailed(f"could not read cookies: {_message(error)}") from None

    def _page_call(self, call: Any) -> Any:
        try:
            return call(self.page)
        except PlaywrightError as error:
            raise BrowserFailed(f"page {self.page.url} is gone: {_message(error)}") from None

    # ---------------------------------------------------------------- the step
    def screenshot(self) -> Screen:
        """A lossless PNG of the followed page's viewport.

        Uses CDP ``Page.captureScreenshot`` with ``optimizeForSpeed`` (about 3x faster than
        ``page.screenshot``); falls back to ``page.screenshot`` if CDP fails.

        Raises:
            BrowserFailed: the page or browser is gone.
        """
        page = self.page
        started = time.perf_counter()
        try:
            data = self._session_for(page).send(
                "Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True}
            )
            png = base64.b64decode(data["data"])
        except PlaywrightError:
            try:
                png = page.screenshot(type="png")
            except PlaywrightError as error:
                raise BrowserFailed(f"could not take a screenshot: {_message(error)}") from None
        width, height = _png_size(png)
        capture_ms = round((time.perf_counter() - started) * 1000, 3)
        return Screen(png, width, height, page.url, capture_ms)

    def settle(self, *, download_grace: bool = True) -> bytes | None:
        """Follow the newest open page, wait for DOMContentLoaded (up to 5 s), then pause.

        Returns the bytes of a download that the step's operations started but that was
        announced only after its operation returned (None when there was none): the caller
        records it as evidence of the step. After a step that could start one, the pause is at
        least ``event_grace_s``, cut short once a download is announced; without
        ``download_grace`` (a replay whose recording says the step downloaded nothing) it is
        not waited for, and a download announced later is taken by a later settle.
        """
        page = self.page
        started = time.perf_counter()
        self._looked_up = None
        try:
            self._session_for(page)
        except PlaywrightError:
            pass  # a closed page is the agent's to see in the next screenshot
        else:
            self._await_document(page, started)
        self._wait(page, self.settle_s)
        if self._triggered and download_grace:
            while (
                not self._downloads
                and not page.is_closed()
                and time.perf_counter() - started < self.event_grace_s
            ):
                self._wait(page, 0.01)
            if page in self._loading:  # a navigation of the step's that began in that pause
                self._await_document(page, started)
        self._triggered = False
        return self._take_download()

    def _await_document(self, page: Page, since: float) -> None:
        """Wait until ``page``'s document being loaded reaches DOMContentLoaded (at most
        ``_LOAD_WAIT_MS`` from ``since``)."""
        try:
            self._wait_for_document(page, since)
            loads = self._documents.get(page, 0)
            if self._awaited.get(page) == loads:
                return  # no document began since Playwright had the last one loaded
            page.wait_for_load_state("domcontentloaded", timeout=_LOAD_WAIT_MS)
            self._awaited[page] = loads
        except PlaywrightError:
            pass  # a slow or closed page is the agent's to see in the next screenshot

    def late_refusal(self) -> str | None:
        """Why the guard refused a navigation that the last operations started but that reached
        the browser only after they returned (a click does not wait for its navigation), e.g.
        while the step settled; None when it refused none. Taken once."""
        refusals, self._refusals = self._refusals, []
        return refusals[0] if refusals else None

    def _wait_for_document(self, page: Page, since: float) -> None:
        while page in self._loading and time.perf_counter() - since < _LOAD_WAIT_MS / 1000:
            page.wait_for_timeout(10)

    def element_at(self, x: float, y: float) -> Element | None:
        """The element under viewport point (x, y) of the followed page, or None. An
        :meth:`execute` at the same point right after (nothing else done with the page in
        between) reports this element without looking it up again."""
        page = self.page
        self._looked_up = None
        try:
            found = page.evaluate(_ELEMENT_JS, [x, y])
        except PlaywrightError:
            return None
        element = _element(found) if found else None
        self._looked_up = (page, x, y, element)
        return element

    def find_element(self, recorded: Element) -> Refound | None:
        """``recorded`` found again in the followed page's top document, or None (see
        element_at_point.js for the order of the matches)."""
        want = {
            "tag": recorded.tag,
            "role": recorded.role,
            "name": recorded.name,
            "text": recorded.text,
            "css_path": recorded.css_path,
            "bbox": list(recorded.bbox) if recorded.bbox else None,
        }
        try:
            found = self.page.evaluate(_ELEMENT_JS, {"find": want})
        except PlaywrightError:
            return None
        if not found:
            return None
        return Refound(_element(found["element"]), found["match"], found["x"], found["y"])

    def execute(self, op: Op) -> Effect:
        """Execute one browser operation and report what it did; page errors become ``ok=False``."""
        started = time.perf_counter()
        looked_up, self._looked_up = self._looked_up, None
        self._dialogs.clear()
        self._opened = self._announced = 0
        self._refusals.clear()
        self._model_driving = True
        page = self.page
        url_before = page.url
        urls_before = {open_page: open_page.url for open_page in self.pages}
        element: Element | None = None
        error: str | None = None
        try:
            if not page.is_closed():
                self._session_for(page)
            if isinstance(op, _POINTER_OPS):
                x, y = self._target(page, op)
                if looked_up is not None and looked_up[:3] == (page, x, y):
                    element = looked_up[3]
                else:
                    element = self.element_at(x, y)
                self._looked_up = None
            refusal = (
                navigation_refusal(op.url, self.allow_hosts) if isinstance(op, PageGoto) else None
            )
            if refusal is not None:
                self._refusals.append(refusal)
            else:
                self._run(page, op)
            if may_start_download(op):
                self._triggered = True
                self._follow(page)
        except PlaywrightError as exc:
            error = _message(exc)
        self._leave_refused(urls_before, url_before)
        error = self._refusals[0] if self._refusals else error
        self._refusals.clear()  # what the guard refuses from now on is late_refusal()'s
        download = self._take_download()
        after = self.page
        return Effect(
            ok=error is None,
            error=error,
            url_before=url_before,
            url_after=after.url,
            element=element,
            pages_opened=self._opened,
            dialog=self._dialogs[0] if self._dialogs else None,
            download=download,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )

    def _leave_refused(self, urls_before: dict[Page, str], opener_url: str) -> None:
        # The backstop for what no check saw coming: see navigation.left_for_refused.
        for page in self.pages:
            refusal = left_for_refused(
                urls_before.get(page, opener_url), page.url, self.allow_hosts
            )
            if refusal is None:
                continue
            self._refusals.append(refusal)
            try:
                page.goto("about:blank", timeout=_NAVIGATION_TIMEOUT_MS)
            except PlaywrightError:
                try:
                    page.close()
                except PlaywrightError:
                    pass  # already gone

    def _target(self, page: Page, op: Op) -> tuple[float, float]:
        if isinstance(op, MouseClick | MouseMove):
            return op.x, op.y
        return self._pointer.get(page, (0.0, 0.0))

    def _run(self, page: Page, op: Op) -> None:
        if page.is_closed():
            raise PlaywrightError(f"Target page is closed: {page.url}")
        match op:
            case MouseClick():
                page.mouse.click(op.x, op.y, button=op.button, click_count=op.click_count)
                self._pointer[page] = (op.x, op.y)
            case MouseMove():
                page.mouse.move(op.x, op.y, steps=max(1, op.steps))
                self._pointer[page] = (op.x, op.y)
            case MouseDown():
                page.mouse.down(button=op.button)
            case MouseUp():
                page.mouse.up(button=op.button)
            case MouseWheel():
                page.mouse.wheel(op.dx, op.dy)
            case KeyboardType(paste=True):
                page.keyboard.insert_text(op.text)
            case KeyboardType():
                page.keyboard.type(op.text)
            case KeyboardPress():
                page.keyboard.press(op.key)
            case KeyboardDown():
                page.keyboard.down(op.key)
            case KeyboardUp():
                page.keyboard.up(op.key)
            case PageGoto():
                page.goto(op.url, wait_until="load", timeout=_NAVIGATION_TIMEOUT_MS)
            case PageGoBack():
                page.go_back(wait_until="load", timeout=_NAVIGATION_TIMEOUT_MS)
            case Sleep():
                self._wait(page, op.seconds)
            case _:
                raise PlaywrightError(f"unknown operation {op!r}")

    def _wait(self, page: Page, seconds: float) -> None:
        # A Playwright wait, not time.sleep: the sync API only delivers events while it runs.
        if seconds <= 0:
            return
        try:
            page.wait_for_timeout(seconds * 1000)
        except PlaywrightError:
            time.sleep(seconds)

    def _follow(self, page: Page) -> None:
        # Wait for every tab the operation opened to be attached (Chromium announced them before
        # the op returned), so the Effect counts it and the next op can follow it. A navigation
        # it started is followed to the new document's DOMContentLoaded, so the Effect's
        # url_after is where the operation led. No wait for a download that may yet start: the
        # op reports one announced by now, settle() picks up a later one.
        started = time.perf_counter()
        while (
            not page.is_closed()
            and self._opened < self._announced
            and time.perf_counter() - started < _LOAD_WAIT_MS / 1000
        ):
            page.wait_for_timeout(10)
        if not page.is_closed():
            self._wait_for_document(page, started)

    def _take_download(self) -> bytes | None:
        """The first announced download (up to 64 MiB) since the last take; all are taken."""
        downloads, self._downloads = self._downloads, []
        for download in downloads:
            try:
                path = download.path()
            except PlaywrightError:
                continue
            if path is not None and path.stat().st_size <= _MAX_DOWNLOAD_BYTES:
                return path.read_bytes()
        return None

    def close(self) -> None:
        """Close the context and its pages; safe to call twice or after the browser died."""
        self._unwatch()
        try:
            self.context.close()
        except PlaywrightError:
            pass
