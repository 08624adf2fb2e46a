"""Finding Chromium, launching it with a Playwright driver of the calling thread's own, and
opening the fresh context each session gets (:func:`open_context`).

Playwright's sync objects are bound to the thread that made them, so each worker thread calls
:func:`open_browser` for its own driver and Chromium, and closes both with ``Launched.close()``.
With :mod:`.browser` and :mod:`.network`, the only modules that import Playwright.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import signal
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from playwright.sync_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Page,
    Playwright,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError

from ownloop.errors import OwnloopError

__all__ = [
    "LAUNCH_ARGS",
    "ChromiumNotFound",
    "Launched",
    "Opened",
    "TargetWatch",
    "browser_versions",
    "find_chromium",
    "launch",
    "open_browser",
    "open_context",
    "page_cdp",
    "start_playwright",
]

LAUNCH_ARGS = (
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-blink-features=AutomationControlled",
    # Quiet on a closed network: no background fetches, updates or sync at start.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

# Headless runs take Chromium's headless shell when it is installed (Debian's
# chromium-headless-shell), as Playwright's own headless default does: it starts about three
# times faster than the full browser in its headless mode, at a third of the CPU.
_HEADLESS_SHELLS = (
    "/usr/lib/chromium/chromium-headless-shell",
    "chromium-headless-shell",
)
_SYSTEM_CHROMIUMS = (
    "/usr/lib/chromium/chromium",
    "chromium",
    "chromium-browser",
    "google-chrome",
)


class ChromiumNotFound(OwnloopError):
    pass


class Launched:
    """A thread's own Playwright driver and Chromium; ``close()`` stops both.

    A Chromium that dies on its own (killed, crashed, out of memory) takes its driver with it.
    Playwright may leave a call in flight on a dead browser waiting for ever: a ``new_page``
    whose page was created just before the crash never settles (seen with the headless shell,
    which opens a page fast enough to be caught between the two). A driver that exits fails
    every call in flight, so once the browser is gone no call on it can hang; ``close()`` then
    returns at once (removing the profile the killed driver left), and the caller launches
    another browser.
    """

    def __init__(self, playwright: Playwright, browser: Browser) -> None:
        self.playwright = playwright
        self.browser = browser
        self._closing = False
        self._killed = False
        self._driver, self._profile = _driver_of(browser)
        browser.on("disconnected", self._disconnected)

    def _disconnected(self, _browser: Browser) -> None:
        # Called by Playwright's dispatcher, also while a call on this thread waits for the
        # browser: the driver's exit ends that call. Not SIGTERM: the driver closes its
        # browsers on it and lives on.
        driver = self._driver
        if self._closing or driver is None or _parent_of(driver) != os.getpid():
            return  # an orderly close, or the driver is gone already (its pid may be reused)
        try:
            os.kill(driver, signal.SIGKILL)
            self._killed = True
        except OSError:
            pass

    def close(self) -> None:
        """Close the browser and stop the driver, ignoring a browser that already died."""
        self._closing = True
        try:
            self.browser.close()
        except PlaywrightError:
            pass
        self.playwright.stop()
        if self._killed and self._profile is not None:
            shutil.rmtree(self._profile, ignore_errors=True)  # the driver's to remove, had it lived


class _Processes(NamedTuple):
    driver: int | None
    profile: str | None  # the browser's --user-data-dir


def _driver_of(browser: Browser) -> _Processes:
    """The pid of the Playwright driver that launched ``browser`` (its parent process) and the
    browser's profile folder; None when they cannot be told (no /proc, another layout)."""
    try:
        cdp = browser.new_browser_cdp_session()
        try:
            processes = cdp.send("SystemInfo.getProcessInfo")["processInfo"]
        finally:
            cdp.detach()
    except PlaywrightError:
        return _Processes(None, None)
    pids = [int(p["id"]) for p in processes if p.get("type") == "browser"]
    driver = _parent_of(pids[0]) if pids else None
    if not pids or driver is None or _parent_of(driver) != os.getpid():
        return _Processes(None, None)
    try:
        argv = Path(f"/proc/{pids[0]}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        argv = []
    profiles = [arg.split("=", 1)[1] for arg in argv if arg.startswith("--user-data-dir=")]
    return _Processes(driver, profiles[0] if profiles else None)


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the name in (...) may hold spaces


def find_chromium(
    override: str | None = None, playwright: Playwright | None = None, *, headless: bool = True
) -> str | None:
    """The Chromium to drive: ``override``, Playwright's own when installed, else the system's
    (its headless shell first for a headless run).

    Returns None when Playwright's own Chromium is the one to use (it needs no path).
    """
    from_env = not override and bool(os.environ.get("OWNLOOP_CHROMIUM"))
    override = override or os.environ.get("OWNLOOP_CHROMIUM")
    if override:
        if not (Path(override).is_file() or shutil.which(override)):
            fix = (
                "Set $OWNLOOP_CHROMIUM to a browser, or unset it"
                if from_env
                else "Pass --chromium PATH to a browser"
            )
            raise ChromiumNotFound(f"no Chromium at {override}. {fix}")
        return shutil.which(override) or override
    if playwright is not None and Path(playwright.chromium.executable_path).is_file():
        return None
    for candidate in (_HEADLESS_SHELLS if headless else ()) + _SYSTEM_CHROMIUMS:
        found = candidate if Path(candidate).is_file() else shutil.which(candidate)
        if found:
            return found
    raise ChromiumNotFound(
        "Chromium not installed. Run: playwright install chromium "
        "(or on Debian: apt-get install -y chromium)"
    )


def launch(
    playwright: Playwright, chromium: str | None = None, *, headless: bool = True
) -> Browser:
    """Launch Chromium with ownloop's arguments (root needs --no-sandbox)."""
    path = find_chromium(chromium, playwright, headless=headless)
    args = list(LAUNCH_ARGS)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")
    # Ctrl-C is the recorder's to handle: it ends the sessions in flight as interrupted and
    # closes the browsers itself, so Chromium must not die of the same SIGINT first.
    return playwright.chromium.launch(
        executable_path=path, headless=headless, args=args, handle_sigint=False
    )


def start_playwright() -> Playwright:
    """A sync Playwright driver for the calling thread; stop it with ``.stop()``."""
    return sync_playwright().start()


def open_browser(chromium: str | None = None, *, headless: bool = True) -> Launched:
    """Start a Playwright driver and launch Chromium for the calling thread.

    Playwright's sync objects only work on the thread that created them, so every worker thread
    calls this once and closes what it gets with ``.close()``.

    Args:
        chromium: a Chromium executable overriding discovery (``--chromium PATH``).
        headless: run without a window.
    """
    playwright = start_playwright()
    try:
        return Launched(playwright, launch(playwright, chromium, headless=headless))
    except BaseException:
        playwright.stop()
        raise


def browser_versions(browser: Browser) -> dict[str, str]:
    """The Chromium and Playwright versions, for ``RunStarted.versions``."""
    return {"chromium": browser.version, "playwright": importlib.metadata.version("playwright")}


class TargetWatch:
    """A browser's new page targets, announced to the sessions of each context.

    One browser-level CDP session per Chromium, made with its first context and kept while the
    browser lives: Chromium announces a new tab (``Target.targetCreated``) before the click that
    opened it returns, and a session counts its own context's. Bound to the browser's thread.
    """

    def __init__(self, browser: Browser) -> None:
        self._listeners: dict[str, Callable[[], None]] = {}
        self._cdp = browser.new_browser_cdp_session()
        self._cdp.on("Target.targetCreated", self._on_target)
        self._cdp.send("Target.setDiscoverTargets", {"discover": True})

    def _on_target(self, event: dict[str, Any]) -> None:
        info = event.get("targetInfo", {})
        if info.get("type") == "page":
            listener = self._listeners.get(info.get("browserContextId", ""))
            if listener is not None:
                listener()

    def listen(self, context_id: str, on_page: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_page`` for each page target announced in context ``context_id``, until the
        function returned is called."""
        self._listeners[context_id] = on_page

        def stop() -> None:
            self._listeners.pop(context_id, None)

        return stop


_watches: weakref.WeakKeyDictionary[Browser, TargetWatch] = weakref.WeakKeyDictionary()
_watches_lock = threading.Lock()


def target_watch(browser: Browser) -> TargetWatch:
    """``browser``'s :class:`TargetWatch` (made at the first call)."""
    with _watches_lock:
        watch = _watches.get(browser)
    if watch is None:
        watch = TargetWatch(browser)
        with _watches_lock:
            _watches[browser] = watch
    return watch


class Opened(NamedTuple):
    """A fresh browser context and its first page (on ``about:blank``), with the CDP session a
    :class:`BrowserSession` listens to, and its browser's announcements of new pages."""

    context: BrowserContext
    page: Page
    page_cdp: CDPSession
    main_frame: str  # the page's main frame id
    context_id: str  # the context's id in CDP
    targets: TargetWatch


def page_cdp(context: BrowserContext, page: Page) -> tuple[CDPSession, str, str]:
    """A CDP session to ``page`` (focus emulated), the id of its main frame and of its context.

    A page target's id is its main frame's id in Chromium, so one ``Target.getTargetInfo``
    says both."""
    cdp = context.new_cdp_session(page)
    # A headless page otherwise loses focus to its siblings; pages expect to be focused.
    cdp.send("Emulation.setFocusEmulationEnabled", {"enabled": True})
    info = cdp.send("Target.getTargetInfo")["targetInfo"]
    return cdp, info["targetId"], info["browserContextId"]


def open_context(browser: Browser, viewport: tuple[int, int]) -> Opened:
    """A fresh context of ``browser`` (no cookies, storage or cache of any other) and its first
    page, as every session gets it. Its first page starts a renderer process (0.2-0.5 s), and
    the CDP session takes a few round trips to the browser."""
    context = browser.new_context(
        viewport={"width": viewport[0], "height": viewport[1]},
        device_scale_factor=1,
        locale="en-US",
        timezone_id="UTC",
        permissions=["clipboard-read", "clipboard-write"],
        accept_downloads=True,
    )
    try:
        page = context.new_page()
        cdp, main, context_id = page_cdp(context, page)
        # The page is on about:blank and loaded: no loading event can be missed before the
        # session listens to them.
        cdp.send("Page.enable")
        return Opened(context, page, cdp, main, context_id, target_watch(browser))
    except BaseException:
        try:
            context.close()
        except PlaywrightError:
            pass  # the browser went away with it
        raise
