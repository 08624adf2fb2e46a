"""One cheap look that tells a reader whether anything was appended to the journal.

Appending to a stream does not change its folder, so without help a reader must ``stat`` every
stream to find new lines (about 4 µs each: 0.45 s at 100k streams). Instead every writer touches
one marker file, ``journal/.appended``, after each append has reached the stream (``touch``),
and a reader compares the marker's and the journal folder's stats with those it remembered when
the index last matched the journal (``Look``): equal, nothing was appended since.

**The racy-timestamp rule.** File times move in clock ticks (coarse kernel clocks, a 2 s
granularity on some file systems): a touch made in the same tick as the look that remembered the
marker leaves its time unchanged. So a look is trusted only when the marker and the folder were
last changed more than ``RACY_NS`` before it was taken; a look within that window says
"changed", and the reader stats every stream as before. So does a journal without a marker (one
that no writer of this version appended to).

What it does not see: a stream edited in place by anything but ownloop's writers (an editor, a
test that tampers with a line), and the last append of a writer killed between its write and
its touch, until the next append anywhere.

**A touch a second.** A writer that touched the marker less than ``TOUCH_EVERY_NS`` ago (by the
wall clock) and finds it as that touch left it (one stat) skips the touch (``Toucher``): a look
taken after the touch, and before an append that skipped it, was taken less than
``TOUCH_EVERY_NS`` after the marker changed, so it is not trusted (the racy rule, with a
margin of ``RACY_NS - TOUCH_EVERY_NS`` for the kernel's coarse clock); a look taken later sees
the append's lines, which were in before it. A marker moved by anything else since (another
writer, a clock set back) is touched again. ``ownloop index`` (``Store.sync``) stats every stream
whatever the marker says, and ``ownloop verify`` reads the journal itself.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NamedTuple

__all__ = ["MARKER", "RACY_NS", "TOUCH_EVERY_NS", "Look", "Toucher", "look", "touch", "unchanged"]

MARKER = ".appended"
# Wider than any file system's timestamp granularity (FAT's is 2 s) and the kernel's coarse
# clock (a few ms): a marker changed this close to a look may change again without its time
# moving.
RACY_NS = 2_000_000_000
_GONE = (-1, -1, -1, -1)
TOUCH_EVERY_NS = RACY_NS // 2
"""A writer skips the touch of an append this soon after its last one (see above)."""


class Look(NamedTuple):
    """The marker's and the journal folder's stats, and the wall clock just before them."""

    at: int  # time.time_ns(), taken before the stats
    marker: tuple[int, int, int, int]  # (inode, size, mtime_ns, ctime_ns); -1s: none
    folder: tuple[int, int, int, int]  # the journal folder's


def _stat(path: Path) -> tuple[int, int, int, int]:
    try:
        result = os.stat(path)
    except OSError:
        return _GONE
    return (result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns)


def look(journal_dir: Path) -> Look:
    """The journal's change marker as it is now (two stats)."""
    at = time.time_ns()
    return Look(at, _stat(journal_dir / MARKER), _stat(journal_dir))


def unchanged(before: Look, now: Look) -> bool:
    """True when nothing was appended between ``before`` and ``now``: the same stats, and
    ``before`` taken more than ``RACY_NS`` after the marker and the folder last changed."""
    if before.marker != now.marker or before.folder != now.folder or before.marker == _GONE:
        return False  # (no marker: a journal no writer of this version appended to)
    # By the times writers set (a touch sets both to the clock); the ctimes still count above.
    return before.at - max(before.marker[2], before.folder[2]) > RACY_NS


def touch(journal_dir: Path) -> None:
    """Tell readers that a stream of ``journal_dir`` changed (a writer, after each append)."""
    marker = journal_dir / MARKER
    try:
        os.utime(marker)
    except FileNotFoundError:
        try:  # creating it sets its times, and the folder's
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT, 0o666))
        except OSError:
            pass  # readers then see the append at the next `ownloop index`
    except OSError:
        pass  # e.g. another user's marker: readers see the append at the next `ownloop index`


class Toucher:
    """``touch`` for one writer, skipping the touches the racy rule makes needless (see the
    module's doc): a stat instead of a write of the marker's inode, for all but an append a
    second."""

    def __init__(self, journal_dir: Path) -> None:
        self.journal_dir = journal_dir
        self._at = 0  # time.time_ns() just before the last touch (0: none yet)
        self._left: tuple[int, int, int, int] = _GONE  # the marker's stats right after it

    def touch(self) -> None:
        """Tell readers that a stream of the journal changed (after each append)."""
        now = time.time_ns()
        marker = self.journal_dir / MARKER
        if 0 <= now - self._at < TOUCH_EVERY_NS and self._left != _GONE:
            if _stat(marker) == self._left:
                return
        touch(self.journal_dir)
        self._at, self._left = now, _stat(marker)
