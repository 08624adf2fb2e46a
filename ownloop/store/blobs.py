"""Content-addressed blob files: screenshots, DOM snapshots, large evidence.

A blob is named by the sha256 of its bytes and lives at ``blobs/ab/<sha256>``. It is written to a
temporary name and renamed, so a reader never sees half a blob; a hash that exists is not written
again, so identical screenshots across all runs are stored once.

Durability at one fsync per step: a step's blobs are written before the journal line that names
them, and the line's fsync is the step's one sync. On a file system with one ordered metadata
journal (ext4, ext3, XFS) a blob's bytes are written to the device without a sync
(``sync_file_range``: no metadata, no cache flush) before it is renamed; the journal line's fsync
then commits the blob's allocation and name with the line, in the same or an earlier transaction,
and flushes the device's cache over the bytes already written. So a line that survives a crash
names blobs that survived too. Elsewhere (btrfs, ZFS, another file system for the journal, not
Linux) each blob is fsync'd before its rename, as one would expect.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from ownloop.store.disk import disk_error
from ownloop.store.errors import OwnloopError

__all__ = ["BlobStore", "MissingBlob", "file_system", "synced_with_journal"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# File systems whose fsync of one file commits every earlier metadata change of the whole file
# system (one ordered journal) and flushes the device's cache.
_ORDERED_JOURNALS = ("ext4", "ext3", "xfs")
_SYNC_FILE_RANGE_WRITE_AND_WAIT = 1 | 2 | 4  # WAIT_BEFORE | WRITE | WAIT_AFTER


def _sync_file_range() -> Callable[[int], None] | None:
    """Linux's sync_file_range (write a file's dirty pages to the device and wait), or None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int

    def write_and_wait(fd: int) -> None:
        if call(fd, 0, 0, _SYNC_FILE_RANGE_WRITE_AND_WAIT) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return write_and_wait


def file_system(path: Path) -> str | None:
    """The type of the file system ``path`` is on (from /proc/self/mountinfo), or None."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
        target = os.path.realpath(path)
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        fields = line.split()
        if "-" not in fields:
            continue
        mount = fields[4].replace("\\040", " ")
        fstype = fields[fields.index("-") + 1]
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, fstype
    return kind


def synced_with_journal(blobs: Path, journal: Path) -> bool:
    """Whether a journal line's fsync also makes blobs written with ``sync_file_range`` durable:
    both on the same file system, and it has one ordered metadata journal."""
    try:
        same = os.stat(blobs).st_dev == os.stat(journal).st_dev
    except OSError:
        return False
    return same and file_system(blobs) in _ORDERED_JOURNALS and _data_write() is not None


@functools.cache
def _data_write() -> Callable[[int], None] | None:
    """``_sync_file_range()``, looked up once, when the first blob is written."""
    return _sync_file_range()


class MissingBlob(OwnloopError):
    """A referenced blob is not in the store."""


class BlobStore:
    """The blob files of a store at ``root`` (``blobs/``).

    Args:
        fsync: make each blob durable: by the next journal line's fsync where that commits it
            too (see the module's notes: the journal is ``root``'s sibling ``journal``), else by
            an fsync of its own.
    """

    def __init__(self, root: Path, *, fsync: bool = True) -> None:
        self.root = root
        self._fsync = fsync
        self._shards: set[str] = set()  # shard folders known to exist: no mkdir per blob
        self._with_journal: bool | None = None  # decided at the first write

    @property
    def synced_with_journal(self) -> bool:
        """True when blobs are written to the device unsynced and made durable by the next
        journal line's fsync (one fsync per step)."""
        if self._with_journal is None:
            # Folders not made yet will be made in the store's folder.
            blobs, journal = self.root, self.root.parent / "journal"
            self._with_journal = self._fsync and synced_with_journal(
                blobs if blobs.exists() else blobs.parent,
                journal if journal.exists() else journal.parent,
            )
        return self._with_journal

    def path(self, sha256: str) -> Path:
        if not _SHA256.match(sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def put(self, data: bytes) -> str:
        """Store ``data`` once and return its sha256.

        Raises:
            StoreNotWritable: the disk refused the write (read-only, full, ...); no temporary
                file is left behind.
        """
        sha256 = hashlib.sha256(data).hexdigest()
        target = self.path(sha256)
        if target.exists():
            return sha256
        temporary = target.parent / f".{sha256}.{secrets.token_hex(4)}.tmp"
        try:
            if sha256[:2] not in self._shards:
                target.parent.mkdir(parents=True, exist_ok=True)
                self._shards.add(sha256[:2])
            self._write(temporary, data)
            os.replace(temporary, target)
        except OSError as exc:
            try:
                temporary.unlink(missing_ok=True)
            except OSError:
                pass  # e.g. never created on a read-only store: the first error is the news
            raise (disk_error(exc, target.parent) or exc) from None
        return sha256

    def _write(self, temporary: Path, data: bytes) -> None:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self._fsync:
                write = _data_write() if self.synced_with_journal else None
                if write is not None:
                    write(fd)  # the bytes on the device; the line's fsync commits them
                else:
                    os.fsync(fd)
        finally:
            os.close(fd)

    def get(self, sha256: str) -> bytes:
        try:
            return self.path(sha256).read_bytes()
        except FileNotFoundError:
            raise MissingBlob(
                f"blob {sha256[:12]} is missing from {self.root}. "
                "Check the store with: ownloop verify"
            ) from None

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).exists()

    def __iter__(self) -> Iterator[str]:
        if not self.root.exists():
            return
        for shard in sorted(self.root.iterdir()):
            if shard.is_dir():
                for entry in sorted(shard.iterdir()):
                    if _SHA256.match(entry.name):
                        yield entry.name

    def check(self, sha256: str) -> str | None:
        """None when the blob is there and its bytes match its name, else what is wrong."""
        try:
            data = self.path(sha256).read_bytes()
        except FileNotFoundError:
            return "missing"
        if hashlib.sha256(data).hexdigest() != sha256:
            return "bytes do not match the name"
        return None
