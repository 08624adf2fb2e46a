"""What the incremental ``verify`` trusts of a file: its inode, size, mtime and ctime.

A file whose four are as the last check without an error found them is not read again. The
mtime can be put back by anyone who may write the file (``touch -d``, ``os.utime``); the ctime
(the inode's last change: any write, ``utime``, ``chmod``, rename) cannot: the kernel sets it to
the clock's time. So an edit made in place with the size and mtime restored still moves the
ctime, and is read again. What stays unseen: a change by someone who sets the system clock back
first, or who writes the disk under the file system; ``verify --run`` and ``--full`` read every
byte and find that too.

Blobs are taken one file at a time (a folder's mtime moves when a file is added or removed, not
when one is rewritten in place).
"""

from __future__ import annotations

import array
import os
from collections.abc import Iterable

__all__ = ["GONE", "RACY", "STAT", "blob_stat", "changed_blobs", "file_stat", "pack"]

STAT = 4  # (inode, size, mtime_ns, ctime_ns) per file in a packed array('q')
GONE: tuple[int, int, int, int] = (-2, -2, -2, -2)  # a file that is not there: never as remembered
RACY: tuple[int, int, int, int] = (-1, -1, -1, -1)  # remembered as not to be trusted: read it again
_COMPACTED = ".webp"  # (blobs.COMPACTED: a compacted blob, named by its PNG)


def file_stat(result: os.stat_result) -> tuple[int, int, int, int]:
    """The four numbers the incremental check compares."""
    return (result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns)


def blob_stat(root: str, sha256: str) -> tuple[int, int, int, int]:
    """The stat of blob ``sha256``'s file under ``root`` (its compacted WebP when the PNG is
    gone), or ``GONE``."""
    path = f"{root}/{sha256[:2]}/{sha256}"
    for candidate in (path, path + _COMPACTED):
        try:
            return file_stat(os.stat(candidate))
        except FileNotFoundError:
            continue
        except OSError:
            return GONE
    return GONE


def pack(stats: Iterable[tuple[int, int, int, int]]) -> bytes:
    """Stats packed for ``verify.state``."""
    packed = array.array("q")
    for stat in stats:
        packed.extend(stat)
    return packed.tobytes()


def changed_blobs(
    root: str, names: list[str], packed: bytes
) -> tuple[set[str], dict[str, tuple[int, int, int, int]]]:
    """Of the blobs ``names`` remembered with ``packed`` stats: those whose file is not as
    remembered (changed, gone, or remembered as racy), and the stats of the others."""
    old = array.array("q")
    old.frombytes(packed)
    if len(old) != STAT * len(names):
        return set(names), {}
    changed: set[str] = set()
    same: dict[str, tuple[int, int, int, int]] = {}
    for i, name in enumerate(names):
        now = blob_stat(root, name)
        if now == tuple(old[i * STAT : i * STAT + STAT]) and now != RACY:
            same[name] = now
        else:
            changed.add(name)
    return changed, same
