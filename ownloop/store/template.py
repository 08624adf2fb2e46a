"""A new index starts as a copy of an empty one, built once per index format.

Creating a new index's tables and the views of ``views.sql`` costs more than ingesting a small
store (0.09 s of the 0.19 s a first sync of six sessions took): DuckDB binds every view as it is
created. So the first new index of a format builds the empty index once, into the cache folder
(``cache_dir()``'s ``index-templates/``), and every new index after it, and every rebuild, is a
copy of those bytes (about 340 KB) that then only reads its store's own archive folders.

A template's file name says what it was built for, and by what: the index's fingerprint,
DuckDB's version, the block size, a digest of the code that builds it, and the sha256 of its own
bytes. A file whose bytes do not hash to its name (torn, edited, damaged) is removed, not used;
one built for anything else is never looked at. The cache is only a shortcut: when the folder
cannot be read or written, the schema is built in place as it always was, and the index is the
same either way.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

__all__ = ["cache_dir", "place"]

_FOLDER = "index-templates"
_KEEP = 8  # templates kept in the folder (the newest): other ownloop versions' among them
_SUM = 32  # hex digits of the sha256 in a template's name


def cache_dir() -> Path:
    """Where ownloop keeps what it may recompute: ``$OWNLOOP_CACHE``, else
    ``$XDG_CACHE_HOME/ownloop``, else ``~/.cache/ownloop``.

    Raises:
        RuntimeError: none of them is set and the home folder is unknown.
    """
    if os.environ.get("OWNLOOP_CACHE"):
        return Path(os.environ["OWNLOOP_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ownloop"


def place(target: Path, key: str, build: Callable[[Path], None]) -> bool:
    """Write a copy of the template named by ``key`` to ``target`` (a file that does not exist
    yet), building the template first with ``build(path)`` when the cache has no sound one.
    False when no template could be had (the caller builds in place).

    Raises:
        OSError: ``target`` cannot be written (the store is read-only or full).
    """
    try:
        folder = cache_dir() / _FOLDER
        data = _sound(folder, key)
        if data is None:
            data = _build(folder, key, build)
    except (OSError, RuntimeError):
        return False
    if data is None:
        return False
    temporary = target.with_name(f".{target.name}.{os.getpid()}.template")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, target)
    except OSError as exc:
        with suppress(OSError):
            temporary.unlink(missing_ok=True)
        # Named as the index, as DuckDB's own refusal to write it would be.
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    return True


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_SUM]


def _sound(folder: Path, key: str) -> bytes | None:
    """The bytes of a template for ``key`` that hash to its name; an unsound one is removed."""
    try:
        paths = sorted(folder.glob(f"index-{key}-*.duckdb"))
    except OSError:
        return None
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if path.name == f"index-{key}-{_digest(data)}.duckdb":
            return data
        with suppress(OSError):
            path.unlink()
    return None


def _build(folder: Path, key: str, build: Callable[[Path], None]) -> bytes | None:
    """Build the template into a temporary file, then rename it to its name (its sum in it):
    a reader sees a whole template or none. None when the folder cannot be written."""
    folder.mkdir(parents=True, exist_ok=True)
    # Of this process and thread: two stores' first syncs may build it at once.
    temporary = folder / f".index-{key}.{os.getpid()}.{threading.get_ident()}.tmp"
    wal = temporary.with_name(temporary.name + ".wal")
    try:
        for path in (temporary, wal):
            path.unlink(missing_ok=True)
        build(temporary)
        if wal.exists():  # not all of it checkpointed into the file: not a whole template
            return None
        data = temporary.read_bytes()
        os.replace(temporary, folder / f"index-{key}-{_digest(data)}.duckdb")
    finally:
        for path in (temporary, wal):
            with suppress(OSError):
                path.unlink(missing_ok=True)
    _prune(folder)
    return data


def _prune(folder: Path) -> None:
    """Keep the newest templates only (each ownloop and DuckDB version makes its own)."""
    with suppress(OSError):
        paths = [(p.stat().st_mtime, p) for p in folder.glob("index-*.duckdb")]
        for _, path in sorted(paths, reverse=True)[_KEEP:]:
            with suppress(OSError):
                path.unlink()
