"""The quiet threading HTTP server both of ours serve on (``modelserver``, ``desktopserver``),
and how their commands wait for the end (:func:`wait_until_stopped`).

A module of its own that imports nothing of ours, below every part as ``errors.py`` is: each
server hands it its request handler and itself (the ``owner`` the handler reads), and gets
daemon threads, a port it may bind again, and no traceback for a client that hung up.
"""

from __future__ import annotations

import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar

__all__ = ["QuietHTTPServer", "wait_until_stopped"]

OwnerT = TypeVar("OwnerT")


class QuietHTTPServer(ThreadingHTTPServer, Generic[OwnerT]):
    daemon_threads = True  # a hung handler must never keep the process alive
    allow_reuse_address = True  # a server that stopped listening binds its port again

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        owner: OwnerT,
    ) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a stopped recorder, a timed-out call) is no server error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def wait_until_stopped(stop: threading.Event) -> None:
    """Block until Ctrl-C, SIGTERM or ``stop`` is set by another thread; a Ctrl-C is how a user
    ends a server's command, not an error.

    On the main thread SIGTERM sets ``stop`` meanwhile (a background job ignores SIGINT, and
    `kill PID` must still let the server close what it started); its handler is put back after.
    """
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set()) if on_main else None
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
