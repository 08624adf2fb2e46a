"""The only module that imports Playwright: finding Chromium, launching it, and acting in it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from playwright.sync_api import Browser, Playwright, sync_playwright

from ownloop.store.errors import OwnloopError

__all__ = [
    "LAUNCH_ARGS",
    "ChromiumNotFound",
    "find_chromium",
    "launch",
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

_SYSTEM_CHROMIUMS = (
    "/usr/lib/chromium/chromium",
    "chromium",
    "chromium-browser",
    "google-chrome",
)


class ChromiumNotFound(OwnloopError):
    pass


def find_chromium(override: str | None = None, playwright: Playwright | None = None) -> str | None:
    """The Chromium to drive: ``override``, Playwright's own when installed, else the system's.

    Returns None when Playwright's own Chromium is the one to use (it needs no path).
    """
    override = override or os.environ.get("OWNLOOP_CHROMIUM")
    if override:
        if not (Path(override).is_file() or shutil.which(override)):
            raise ChromiumNotFound(f"no Chromium at {override}. Pass --chromium PATH to a browser")
        return shutil.which(override) or override
    if playwright is not None and Path(playwright.chromium.executable_path).is_file():
        return None
    for candidate in _SYSTEM_CHROMIUMS:
        found = candidate if Path(candidate).is_file() else shutil.which(candidate)
        if found:
            return found
    raise ChromiumNotFound(
        "Chromium not installed. Run: playwright install chromium "
        "(or on Debian: apt-get install -y chromium)"
    )


def launch(playwright: Playwright, chromium: str | None = None, *, headless: bool = True) -> Browser:
    """Launch Chromium with ownloop's arguments (root needs --no-sandbox)."""
    path = find_chromium(chromium, playwright)
    args = list(LAUNCH_ARGS)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")
    return playwright.chromium.launch(executable_path=path, headless=headless, args=args)


def start_playwright() -> Playwright:
    """A sync Playwright driver for the calling thread; stop it with ``.stop()``."""
    return sync_playwright().start()
