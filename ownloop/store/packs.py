"""Blob packs: a recorder's blobs appended to one file while it records, not a file each.

Creating a file a blob (an inode and a directory entry, then a rename) costs more than the wait
for its bytes to reach the device (``docs/performance.md``, "A durable append and the
per-session query"). So a recorder
appends its blobs to one pack, ``blobs/packs/<id>.pack``, and the background compaction, which
rewrites each finished session's screenshots anyway, writes them out as content-addressed files
(``unpack``) and then removes the pack. Readers (``BlobStore``) look in packs after the files.
A pack that reaches ``LIMIT`` bytes is closed and a new one begun, so a long run's screenshots do
not wait for its end to become WebP: the compaction writes a closed pack out as the run goes.

A pack is a sequence of records, each ``olp1``, the blob's sha256 (32 bytes), its length (8
bytes, big-endian), then its bytes. One process writes a pack and holds an exclusive ``flock``
on it while it does; it is created under a temporary name, locked, and only then renamed, so a
pack that can be locked is one nobody writes any more. Durability is the blob files': a record's
bytes reach the device (``sync_file_range`` of its range) before the journal line that names it
is written, and that line's fsync commits the pack's new length with it on one ordered journal
(ext4, ext3, XFS). A synced store elsewhere does not pack (``BlobStore.start_packing``). A crash
may leave a torn last record, which no surviving line names: readers stop at it, and ``unpack``
drops it.

A reader checks a record's bytes against its name before it returns them, so a torn or damaged
record is never read as a blob.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from ownloop.store.disk import disk_error
from ownloop.store.ids import new_id

__all__ = [
    "FULL",
    "PACKS",
    "Pack",
    "PackIndex",
    "Record",
    "Scan",
    "locked_by_writer",
    "pack_files",
    "read_record",
    "records",
]

PACKS = "packs"  # the folder of packs, in the blob folder
SUFFIX = ".pack"
FULL = ".full.pack"  # a pack closed because it was full: written out while its run goes on
_MAGIC = b"olp1"
WRITE_AND_WAIT = 1 | 2 | 4  # sync_file_range's WAIT_BEFORE | WRITE | WAIT_AFTER
START_WRITE = 2  # its WRITE alone: started, not waited for
LIMIT = 64 << 20  # a pack this full is closed and a new one begun: the compaction writes it out
_HEADER = struct.Struct(">4s32sQ")  # magic, sha256, length


class Record(NamedTuple):
    """Where one blob's bytes are in a pack."""

    sha256: str
    offset: int  # of its bytes (after the header)
    length: int


class Scan(NamedTuple):
    """What a look at a pack found."""

    records: list[Record]
    end: int  # the offset after the last whole record
    damaged: bool  # stopped at bytes that are no record (not a torn last one): kept as they are


def records(fd: int, start: int = 0) -> Scan:
    """The whole records of the pack open at ``fd`` from offset ``start``."""
    out: list[Record] = []
    size = os.fstat(fd).st_size
    at = start
    while at + _HEADER.size <= size:
        magic, digest, length = _HEADER.unpack(os.pread(fd, _HEADER.size, at))
        if magic != _MAGIC:
            return Scan(out, at, damaged=True)
        if at + _HEADER.size + length > size:
            break  # torn: the last record, cut short
        out.append(Record(digest.hex(), at + _HEADER.size, length))
        at += _HEADER.size + length
    return Scan(out, at, damaged=False)


def read_record(fd: int, record: Record) -> bytes | None:
    """A record's bytes, or None when they do not match its name (a torn or damaged record)."""
    data = os.pread(fd, record.length, record.offset)
    if len(data) != record.length or hashlib.sha256(data).hexdigest() != record.sha256:
        return None
    return data


def locked_by_writer(fd: int) -> bool:
    """Whether the pack open at ``fd`` is still being written (its writer holds its lock);
    when not, this process now holds the lock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False


class Pack:
    """The pack a process appends its blobs to (thread-safe); one full at ``limit`` bytes is
    closed, and the next append begins another.

    Args:
        folder: ``blobs/packs``.
        sync_range: Linux's ``sync_file_range`` (``blobs._sync_file_range``), or None for a
            store that is not synced. Each record's writing to the device is started as it is
            appended; ``settle`` waits for it, before the next journal line is written (the
            store's streams call it), so the device writes while the step's events are made.
    """

    def __init__(
        self,
        folder: Path,
        sync_range: Callable[[int, int, int, int], None] | None,
        limit: int = LIMIT,
    ) -> None:
        self.folder = folder
        self._sync_range = sync_range
        self._limit = limit
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._end = 0
        self._unsettled: tuple[int, int] | None = None  # (from, to): started, not waited for
        self.path: Path | None = None
        self.held: dict[str, Record] = {}  # what this pack holds, by name

    def append(self, sha256: str, data: bytes) -> None:
        """Append one blob (once: a name it holds is not written again).

        Raises:
            StoreNotWritable: the disk refused the write.
        """
        header = _HEADER.pack(_MAGIC, bytes.fromhex(sha256), len(data))
        with self._lock:
            if sha256 in self.held:
                return
            if self._fd is not None and self._end >= self._limit:
                self._retire(full=True)  # the compaction writes it out while the run goes on
            fd = self._fd if self._fd is not None else self._open()
            at = self._end
            try:
                written = os.pwritev(fd, [header, data], at)
                while written < len(header) + len(data):  # (a short write: the rest)
                    rest = (header + data)[written:]
                    written += os.pwrite(fd, rest, at + written)
            except OSError as exc:
                raise (disk_error(exc, self.folder) or exc) from None
            self._end = at + written
            self.held[sha256] = Record(sha256, at + len(header), len(data))
            if self._sync_range is not None:
                low = at if self._unsettled is None else self._unsettled[0]
                self._unsettled = (low, self._end)
                try:
                    self._sync_range(fd, at, written, START_WRITE)
                except OSError as exc:
                    raise (disk_error(exc, self.folder) or exc) from None

    def settle(self) -> None:
        """Wait until every record appended so far is on the device (at once when none is
        waiting). (Under the lock, as every use of the descriptor: a full pack is closed by
        the next append.)

        Raises:
            StoreNotWritable: the disk failed the write.
        """
        with self._lock:
            self._settle()

    def read(self, sha256: str) -> bytes | None:
        """The bytes of a blob this pack holds, else None."""
        with self._lock:
            record, fd = self.held.get(sha256), self._fd
            return read_record(fd, record) if record is not None and fd is not None else None

    def close(self) -> None:
        """No more appends: the lock goes, and the compaction may unpack it."""
        with self._lock:
            self._retire()

    def _settle(self) -> None:
        unsettled, fd = self._unsettled, self._fd
        if unsettled is None or fd is None or self._sync_range is None:
            return
        low, high = unsettled
        try:
            self._sync_range(fd, low, high - low, WRITE_AND_WAIT)
        except OSError as exc:
            raise (disk_error(exc, self.folder) or exc) from None
        self._unsettled = None

    def _retire(self, full: bool = False) -> None:
        """Settle and close the pack (under the lock); the next append starts a new one. A
        ``full`` one is named so first (``<id>.full.pack``), while still locked."""
        self._settle()
        if full and self.path is not None:
            named = self.path.with_name(self.path.name[: -len(SUFFIX)] + FULL)
            try:
                os.replace(self.path, named)
                self.path = named
            except OSError:
                pass  # (written out at the run's end instead)
        fd, self._fd = self._fd, None
        self.held = {}
        if fd is not None:
            os.close(fd)  # (the flock goes with the last descriptor)

    def _open(self) -> int:
        """A new pack: made under a temporary name, locked, then named (never seen unlocked)."""
        name = new_id()
        temporary = self.folder / f".{name}{SUFFIX}.tmp"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise (disk_error(exc, self.folder) or exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.path = self.folder / f"{name}{SUFFIX}"
            os.replace(temporary, self.path)  # (durable with the next journal line's fsync)
        except OSError as exc:
            os.close(fd)
            temporary.unlink(missing_ok=True)
            raise (disk_error(exc, self.folder) or exc) from None
        self._fd, self._end = fd, 0
        return fd


class PackIndex:
    """What the store's packs hold, by name, as this process last looked (thread-safe)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._scanned: dict[str, int] = {}  # pack file name -> offset read to
        self._where: dict[str, tuple[str, Record]] = {}

    def read(self, sha256: str) -> bytes | None:
        """A blob's bytes from a pack (looking again at the packs when it is not known), or
        None."""
        for look_again in (False, True):
            if look_again and not self._refresh():
                return None
            with self._lock:
                found = self._where.get(sha256)
            if found is not None:
                data = self._read(*found)
                if data is not None:
                    return data
        return None

    def names(self) -> set[str]:
        """Every name the packs hold now."""
        self._refresh()
        with self._lock:
            return set(self._where)

    def _read(self, pack: str, record: Record) -> bytes | None:
        try:
            fd = os.open(self.folder / pack, os.O_RDONLY)
        except FileNotFoundError:  # unpacked meanwhile: its blobs are files now
            return None
        try:
            return read_record(fd, record)
        finally:
            os.close(fd)

    def _refresh(self) -> bool:
        """Read the records added since the last look; False when there are no packs."""
        try:
            with os.scandir(self.folder) as entries:
                packs = {e.name: e.stat().st_size for e in entries if e.name.endswith(SUFFIX)}
        except FileNotFoundError:
            packs = {}
        with self._lock:
            for gone in self._scanned.keys() - packs.keys():
                del self._scanned[gone]
                self._where = {s: w for s, w in self._where.items() if w[0] != gone}
            todo = [(n, self._scanned.get(n, 0)) for n, size in packs.items()]
            todo = [(n, at) for n, at in todo if packs[n] > at]
        for name, at in todo:
            try:
                fd = os.open(self.folder / name, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                found, end, _ = records(fd, at)
            finally:
                os.close(fd)
            with self._lock:
                self._scanned[name] = end
                self._where.update((r.sha256, (name, r)) for r in found)
        return bool(packs)


def pack_files(folder: Path) -> Iterator[Path]:
    """The packs in ``folder``, by name."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(SUFFIX))
    except FileNotFoundError:
        return
    for name in names:
        yield folder / name
