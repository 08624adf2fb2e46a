"""Serving the viewer: uvicorn on a socket we bind ourselves, in the foreground or in a thread.

Binding first means the port is known (and a busy port is a one-line error) before uvicorn
starts; ``--port 0`` picks a free one.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from ownloop.errors import OwnloopError
from ownloop.store import Store
from ownloop.store.kept import KeptIndex
from ownloop.view.app import make_app

__all__ = ["ViewServer"]

_LOOPBACK = {"127.0.0.1", "localhost"}


class ViewServer:
    """The viewer over ``store`` on ``host:port`` (port 0: a free one).

    Use ``start()`` / ``stop()`` (or ``with``) to run it in a thread, ``serve_forever()`` to run
    it in the foreground until Ctrl-C.

    ``keep_index=False`` opens the index for each page's reads instead of keeping it open (a
    baseline for ``bench/view_bench.py``).

    Raises:
        OwnloopError: the address cannot be bound (busy port, unknown host).
    """

    def __init__(
        self, store: Store, host: str = "127.0.0.1", port: int = 0, *, keep_index: bool = True
    ) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
            self._socket.listen(128)  # connections wait in the backlog until uvicorn accepts
        except OSError as exc:
            self._socket.close()
            raise OwnloopError(
                f"cannot serve on {host}:{port}: {exc.strerror or exc}. "
                "Pick another with --port, or --port 0 for a free one"
            ) from None
        self.host = host
        self.port = int(self._socket.getsockname()[1])
        allowed = ("127.0.0.1", "localhost") if host in _LOOPBACK else ("*",)
        self._index = KeptIndex(store, keep=keep_index)
        self._app = make_app(store, allowed_hosts=allowed, kept=self._index)
        config = uvicorn.Config(
            self._app,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The viewer's base URL, e.g. ``http://127.0.0.1:8765/``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        """Serve in this thread until Ctrl-C (or SIGTERM)."""
        # The index is opened and the templates compiled while uvicorn starts, not by the
        # first page (which waits for the index if it comes sooner).
        threading.Thread(
            target=self._app.state.prepare, name="ownloop-view-prepare", daemon=True
        ).start()
        try:
            self._server.run(sockets=[self._socket])
        except KeyboardInterrupt:
            pass  # uvicorn shut down cleanly, then passed the Ctrl-C on: it is not an error
        finally:
            self._index.close()  # the index lock goes with it: other processes may sync

    def start(self, timeout: float = 10.0) -> str:
        """Serve in a background thread; returns the URL once it accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, name="ownloop-view", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise OwnloopError(f"the viewer did not start on {self.url}")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        """Stop serving and wait for the thread (if started) to end."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._index.close()
        self._socket.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
