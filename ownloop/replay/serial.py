"""Re-execute sessions one after another in one Chromium: an audit's replays.

``ownloop audit blind`` and ``audit noop`` replay session after session. Each ``execute_session``
alone starts a Playwright driver, launches a Chromium and serves the MiniWoB pages for its one
session (about a second and a half of start-up, most of it CPU); ``SerialReplays`` launches the
browser once, on a thread of its own (Playwright's objects stay on the thread that made them),
keeps one MiniWoB server per recorded port while it is open, and gives each replay a fresh
browser context, as a batch's worker does (:mod:`ownloop.replay.batch`). A browser that died is
launched again before the next replay. Each child is planned and recorded exactly as
``execute_session`` records it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import ExitStack
from typing import Any

from ownloop.recorder.episode import EpisodeResult
from ownloop.replay.execute import Plan, Replayed, execute_session, run_planned
from ownloop.replay.fold import Session
from ownloop.replay.options import ReplayOptions
from ownloop.replay.reopen import shared_servers
from ownloop.store import Store
from ownloop.world.chromium import Launched, open_browser

__all__ = ["SerialReplays"]

_Job = tuple[Callable[[], EpisodeResult], "Future[EpisodeResult]"]


class SerialReplays:
    """A context manager: ``execute(store, parent, mode, options)`` is ``execute_session``
    in the one Chromium this keeps (launched with the first replay, closed on leaving)."""

    def __init__(self, chromium: str | None = None) -> None:
        self.chromium = chromium
        self._launched: Launched | None = None
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._servers = ExitStack()

    def __enter__(self) -> SerialReplays:
        self._servers.enter_context(shared_servers())
        return self

    def __exit__(self, *exc: object) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join(60)
        self._servers.close()

    def execute(self, store: Store, parent: Session, mode: str, options: ReplayOptions) -> Replayed:
        """``execute_session(store, parent, mode, options)`` in this Chromium."""
        return execute_session(store, parent, mode, options, runner=self._run)

    def _run(self, store: Store, parent: Session, plan: Plan) -> EpisodeResult:
        """On the browser's thread; Ctrl-C stops the replay at its next operation (it ends
        ``interrupted``), as ``execute_session`` alone does."""
        stop = threading.Event()

        def work() -> EpisodeResult:
            return run_planned(self._browser(plan), store, parent, plan, stop)

        future: Future[EpisodeResult] = Future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="ownloop-replay", daemon=True)
            self._thread.start()
        self._jobs.put((work, future))
        try:
            while True:
                try:
                    return future.result(0.2)
                except FutureTimeout:
                    continue
        except KeyboardInterrupt:
            stop.set()
            return future.result(60)

    def _browser(self, plan: Plan) -> Any:
        """The Chromium (launched again if it died); none for a desktop session."""
        if plan.desktop is not None:
            return None
        launched = self._launched
        if launched is None or not launched.browser.is_connected():
            self._close()
            self._launched = launched = open_browser(self.chromium)
        return launched.browser

    def _close(self) -> None:
        launched, self._launched = self._launched, None
        if launched is not None:
            try:
                launched.close()
            except Exception:  # noqa: BLE001, S110 - a driver that died with its browser
                pass

    def _serve(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                work, future = job
                try:
                    future.set_result(work())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                    future.set_exception(exc)
        finally:
            self._close()
