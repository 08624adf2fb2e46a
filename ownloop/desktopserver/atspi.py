"""The desktop's AT-SPI reader: ``atspi_tree.py --serve`` kept running under Debian's python3.

Importing pyatspi costs more than reading a tree (0.4 s against 0.3 s on two busy cores), so
the reader is started once and asked for a tree per ``GET /accessibility``. A reset or stop of
the desktop ends it with every other process of the desktop; the next ``read`` starts it again.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["AtspiReader"]

_SCRIPT = Path(__file__).with_name("atspi_tree.py")
_END = b"\nEND\n"
_MAX_TREE = 64 * 1024 * 1024  # a tree larger than this is not read to its end


class AtspiReader:
    """Reads AT-SPI trees through one long-lived ``python`` process (``atspi_tree.py``).

    Args:
        python: the Python that has ``pyatspi`` (Debian's ``/usr/bin/python3``).
    """

    def __init__(self, python: str) -> None:
        self.python = python
        self._process: subprocess.Popen[bytes] | None = None

    def read(self, env: Mapping[str, str], timeout_s: float) -> str | None:
        """The tree as XML, or None when it could not be read within ``timeout_s``."""
        process = self._process
        if process is None or process.poll() is not None:
            self.close()
            process = self._process = subprocess.Popen(
                [self.python, str(_SCRIPT), "--serve"],
                env=dict(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(b"tree\n")
            process.stdin.flush()
        except OSError:
            self.close()
            return None
        data = bytearray()
        fd = process.stdout.fileno()
        end = time.monotonic() + timeout_s
        while not data.endswith(_END):
            left = end - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            chunk = os.read(fd, 1 << 16) if ready else b""
            if not chunk or len(data) > _MAX_TREE:
                self.close()  # timed out, died, or runaway: the next read starts afresh
                return None
            data += chunk
        return data[: -len(_END)].decode(errors="replace")

    def close(self) -> None:
        """End the reader process, if any; safe twice."""
        process, self._process = self._process, None
        if process is None:
            return
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
