"""What the disk refused, said in one line: a read-only store, no permission, a full disk, a file
where a folder should be.

The store's writes (``open_store``, the index lock, the index, blobs) turn these ``OSError``s into
``StoreNotWritable`` where they happen; ``cli.py`` uses ``disk_error`` as a last resort for any
that slip through, so no command shows a traceback for them.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ownloop.errors import OwnloopError

__all__ = ["DISK_ERRNOS", "READ_ONLY_ERRNOS", "StoreNotWritable", "disk_error"]

READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""The write was refused outright: nothing can be written there as things stand."""

DISK_ERRNOS = READ_ONLY_ERRNOS | {errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR}
"""The errors ``disk_error`` explains; any other ``OSError`` is left as it is."""

_ELSEWHERE = "or pass --store DIR with a writable folder"
_ANY_WRITE = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT})  # explained even without a path


class StoreNotWritable(OwnloopError):
    """A write the store needs was refused by the disk; ``errno`` says why (see ``DISK_ERRNOS``)."""

    def __init__(self, message: str, errno_: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno_


def _file_in_the_way(path: Path) -> Path | None:
    """The first part of ``path`` that exists and is not a folder."""
    for part in reversed((path, *path.parents)):
        if part.exists() and not part.is_dir():
            return part
    return None


def disk_error(exc: OSError, path: str | os.PathLike[str] | None = None) -> StoreNotWritable | None:
    """The one-line error (what is wrong, where, what to do) for ``exc``; None when it is not one
    of ``DISK_ERRNOS``.

    Args:
        exc: The error the disk gave.
        path: The file that was being written (default: the error's own file name).
    """
    code = exc.errno
    named = path if path is not None else exc.filename
    if code not in DISK_ERRNOS or (named is None and code not in _ANY_WRITE):
        return None  # e.g. EACCES binding a port: not about a file
    where = Path(named) if named is not None else None
    if code == errno.EROFS:
        text = (
            f"{where or 'the store'} is on a read-only file system. Remount it read-write, "
            f"{_ELSEWHERE}"
        )
    elif code in (errno.EACCES, errno.EPERM):
        text = (
            f"permission denied: {where}. Give your user write access to it (chmod/chown), "
            f"{_ELSEWHERE}"
        )
    elif code in (errno.ENOSPC, errno.EDQUOT):
        full = "over its quota" if code == errno.EDQUOT else "full"
        text = (
            f"the disk holding {where or 'the store'} is {full}. Free some space, then run "
            "the same command again (what is already recorded is kept)"
        )
    else:  # ENOTDIR
        assert where is not None
        blocker = _file_in_the_way(where)
        what = f"{blocker} is a file" if blocker is not None else "a part of it is a file"
        text = f"{where} cannot be a folder: {what}. Pass --store DIR naming a folder"
    return StoreNotWritable(text, code)
