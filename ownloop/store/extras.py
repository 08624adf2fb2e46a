"""Which install extra brings a package the core install leaves out, said in one line.

The core install (``pip install ownloop``) reads, queries, shows, regrades, views, reports,
imports and exports stores. Recording and re-executing need a browser driver, the model client
and the task pages, which come with ``pip install 'ownloop[record]'``. The modules that need them
import them when they run; ``cli.py`` turns the ``ModuleNotFoundError`` into ``missing_extra``'s
line, as it does with ``disk_error`` for the disk.
"""

from __future__ import annotations

from ownloop.errors import OwnloopError

__all__ = ["EXTRA_OF", "MissingExtra", "install_hint", "missing_extra"]

EXTRA_OF = {
    "playwright": "record",  # drives Chromium: record, replay --execute, demo, serve-model
    "greenlet": "record",  # Playwright's own dependency
    "openai": "record",  # the model client of record and replay --fork-at
    "miniwob": "record",  # the MiniWoB++ task pages (its Python side is never imported)
    "ui_tars": "record",  # UI-TARS's released parser and prompt (recording, reparse, import)
}
"""Top-level module name → the extra that installs it."""


class MissingExtra(OwnloopError):
    """A command needs a package that only an install extra brings."""

    def __init__(self, message: str, module: str, extra: str) -> None:
        super().__init__(message)
        self.module = module
        self.extra = extra


def install_hint(extra: str) -> str:
    """The command that installs ``extra``, for a user who installed with pip or from a clone."""
    return f"pip install 'ownloop[{extra}]' (from a clone: pip install '.[{extra}]', or ./setup.sh)"


def missing_extra(exc: ImportError, what: str) -> MissingExtra | None:
    """``exc`` as one line naming the extra to install, or None when no extra brings the module.

    Args:
        exc: the import that failed.
        what: what was being done, e.g. ``ownloop record`` or ``recording``.
    """
    module = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None or not isinstance(exc, ModuleNotFoundError):
        return None
    return MissingExtra(
        f"{what} needs the {extra} extra ({module} is not installed): {install_hint(extra)}",
        module,
        extra,
    )
