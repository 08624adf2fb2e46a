"""The quiet threading HTTP server both of ours serve on (``modelserver``, ``desktopserver``).

A module of its own that imports nothing of ours, below every part as ``errors.py`` is: each
server hands it its request handler and itself (the ``owner`` the handler reads), and gets
daemon threads, a port it may bind again, and no traceback for a client that hung up.
"""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar

__all__ = ["QuietHTTPServer"]

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
