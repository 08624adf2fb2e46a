"""What an import may read: regular files under the folder it was given, never through a link.

DESIGN §8: import never follows a symlink (it could name any file on the machine, which would
become a blob and be exported again) and never opens a FIFO, socket or device (a FIFO would block
the import). Every importer (harness folders, ATIF files, ...) uses these checks, and skips and
names what they refuse:

- ``unreadable(path)``: why ``path`` is skipped ("symlink, not followed", "FIFO, not read", ...),
  or None for a regular file, a real folder or nothing at all.
- ``read_regular(path)``: a regular file's bytes, opened without following a link or blocking.
- ``inside(folder, relative)``: why a relative path taken from a file (an image's path) cannot be
  read under ``folder``: outside it, through a link at any level, not a regular file; or None.
- ``walk(path)``: every entry under a folder, not descending through links.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["inside", "is_dir", "is_file", "json_objects", "read_regular", "unreadable", "walk"]


def unreadable(path: Path) -> str | None:
    """Why import skips ``path`` ("symlink, not followed", "FIFO, not read", ...), else None.

    A missing path, a regular file and a folder (not through a symlink) are readable: None.
    """
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISLNK(mode):
        return "symlink, not followed"
    for test, kind in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "device"),
        (stat.S_ISBLK, "device"),
    ):
        if test(mode):
            return f"{kind}, not read"
    return None


def is_file(path: Path) -> bool:
    """A regular file, not through a symlink."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def is_dir(path: Path) -> bool:
    """A folder, not through a symlink."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def read_regular(path: Path) -> bytes:
    """A regular file's bytes; raises OSError for anything else, without following or blocking."""
    # O_NOFOLLOW: a file swapped for a symlink after the check is not followed; O_NONBLOCK: a FIFO
    # swapped in does not block the open. fstat then proves what was opened is a regular file.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return file.read()


def inside(folder: Path, relative: str) -> str | None:
    """Why ``relative`` (a path written in an imported file) is not a regular file that can be
    read under ``folder`` without leaving it or passing a link; None when it is."""
    parts = PurePosixPath(relative)
    if (
        parts.is_absolute()
        or not parts.parts
        or ".." in parts.parts
        or "\\" in relative
        or "\0" in relative
        or ":" in relative.split("/")[0]
    ):
        return "not a relative path inside the folder"
    target = folder
    for name in parts.parts:
        target = target / name
        reason = unreadable(target)
        if reason is not None:
            return f"{target.relative_to(folder).as_posix()}: {reason}"
    if not is_file(target):
        return "no such file"
    return None


def walk(path: Path) -> Iterator[Path]:
    """Every entry under ``path`` in name order, not descending through symlinks."""
    try:
        entries = sorted(path.iterdir())
    except OSError:
        return
    for entry in entries:
        yield entry
        if is_dir(entry):
            yield from walk(entry)


def json_objects(
    data: bytes, name: str, skipped: list[str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file ``name``, with their line numbers (from 1); blank
    lines are passed over, a line that is not JSON or not an object is noted in ``skipped``."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            skipped.append(f"{name} line {number} (not JSON)")
            continue
        if not isinstance(value, dict):
            skipped.append(f"{name} line {number} (not an object)")
            continue
        yield number, value
