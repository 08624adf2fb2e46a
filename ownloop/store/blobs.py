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

Compacted blobs (``ownloop compact``, see ``compact.py``): a PNG blob may be replaced by its
lossless WebP re-encoding at ``blobs/ab/<sha256 of the PNG>.webp``, pixel-identical. The PNG's
name still resolves: ``get`` returns a PNG of the same pixels (not the same bytes, unless the PNG
was kept or written again), ``get_stored`` the bytes on disk as they are (the WebP, for readers
that decode any image), ``check`` decodes the WebP and compares its pixels with the hash the
compaction wrote in it.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ownloop.errors import OwnloopError
from ownloop.store.disk import disk_error

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = [
    "COMPACTED",
    "BlobStore",
    "MissingBlob",
    "file_system",
    "pixel_sha256",
    "synced_with_journal",
    "write_file",
]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
COMPACTED = ".webp"  # the suffix of a compacted blob: blobs/ab/<sha256 of the PNG>.webp
_PIXELS = re.compile(rb'<ownloop-pixels sha256="([0-9a-f]{64})" mode="(RGBA?)"/>')
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


def write_file(target: Path, data: bytes, flush: Callable[[int], None] | None) -> None:
    """Write ``data`` to a temporary name beside ``target``, ``flush`` it (e.g. ``os.fsync``),
    then rename it to ``target``: a reader sees all of it or nothing.

    Raises:
        StoreNotWritable: the disk refused the write (read-only, full, ...); no temporary
            file is left behind.
    """
    temporary = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if flush is not None:
                flush(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except OSError as exc:
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass  # e.g. never created on a read-only store: the first error is the news
        raise (disk_error(exc, target.parent) or exc) from None


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


def pixel_sha256(image: Image, raw: bytes | None = None) -> str:
    """The sha256 of an image's pixels: its mode, size and raw bytes (not its file's bytes);
    ``raw``: its ``tobytes()`` when the caller has them already."""
    digest = hashlib.sha256(f"{image.mode} {image.width}x{image.height}\n".encode())
    digest.update(image.tobytes() if raw is None else raw)
    return digest.hexdigest()


def pixel_mark(sha256: str, mode: str) -> bytes:
    """The XMP a compacted blob carries: its pixels' hash and the PNG's mode."""
    return f'<ownloop-pixels sha256="{sha256}" mode="{mode}"/>'.encode()


def decode_compacted(webp: bytes) -> tuple[Image, str | None]:
    """The pixels of a compacted blob, in the PNG's mode, and the pixel hash it was written with
    (None when it carries none). Raises ``ValueError`` when the bytes are not a decodable WebP."""
    from PIL import Image as PILImage

    try:
        image = PILImage.open(io.BytesIO(webp), formats=("WEBP",))
        image.load()
    except (OSError, SyntaxError) as exc:
        raise ValueError(f"not a decodable WebP: {exc}") from None
    mark = _PIXELS.search(image.info.get("xmp", b"") or b"")
    if mark is None:
        return image, None
    mode = mark.group(2).decode()
    # An RGBA PNG whose alpha is all 255 may come back as RGB: adding the alpha back is exact.
    return (image if image.mode == mode else image.convert(mode)), mark.group(1).decode()


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
        if sha256[:2] not in self._shards:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise (disk_error(exc, target.parent) or exc) from None
            self._shards.add(sha256[:2])
        flush = None
        if self._fsync:
            # On one ordered journal the bytes go to the device; the line's fsync commits them.
            flush = (_data_write() if self.synced_with_journal else None) or os.fsync
        write_file(target, data, flush)
        return sha256

    def compacted_path(self, sha256: str) -> Path:
        """Where the lossless WebP of PNG blob ``sha256`` is after ``ownloop compact``."""
        return self.path(sha256).with_name(sha256 + COMPACTED)

    def get(self, sha256: str) -> bytes:
        """The blob's bytes; for a compacted PNG, a PNG of the same pixels (the exact bytes only
        when they were kept or written again)."""
        try:
            return self.path(sha256).read_bytes()
        except FileNotFoundError:
            pass
        try:
            image, _ = decode_compacted(self._stored_webp(sha256))
        except ValueError as exc:  # read as missing: the pixels are not there
            raise MissingBlob(
                f"blob {sha256[:12]} in {self.root} is damaged ({exc}). "
                "Check the store with: ownloop verify --full"
            ) from None
        out = io.BytesIO()
        image.save(out, format="PNG")  # zlib's level 6: about the size of the browser's PNG
        return out.getvalue()

    def get_stored(self, sha256: str) -> bytes:
        """The blob's bytes as stored: the exact bytes, or the WebP a compaction left (the same
        pixels; for readers that take any image format, at no re-encoding cost)."""
        try:
            return self.path(sha256).read_bytes()
        except FileNotFoundError:
            return self._stored_webp(sha256)

    def _stored_webp(self, sha256: str) -> bytes:
        try:
            return self.compacted_path(sha256).read_bytes()
        except FileNotFoundError:
            pass
        try:  # written again between the two looks
            return self.path(sha256).read_bytes()
        except FileNotFoundError:
            raise MissingBlob(
                f"blob {sha256[:12]} is missing from {self.root}. "
                "Check the store with: ownloop verify"
            ) from None

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).exists() or self.compacted_path(sha256).exists()

    def __iter__(self) -> Iterator[str]:
        """Every blob's name (a compacted PNG under its PNG's name), by name."""
        if not self.root.exists():
            return
        for shard in sorted(self.root.iterdir()):
            if shard.is_dir():
                names = {_name(entry.name) for entry in shard.iterdir()} - {None}
                yield from sorted(name for name in names if name is not None)

    def check(self, sha256: str) -> str | None:
        """None when the blob is there and its bytes match its name, else what is wrong.

        A compacted blob (its PNG gone) is decoded: its pixels must match the hash the
        compaction wrote in it, the hash of the PNG's pixels it checked before dropping the PNG.
        """
        try:
            data = self.path(sha256).read_bytes()
        except FileNotFoundError:
            try:
                webp = self.compacted_path(sha256).read_bytes()
            except FileNotFoundError:
                return "missing"
            try:
                image, pixels = decode_compacted(webp)
            except ValueError as exc:
                return f"compacted blob {sha256 + COMPACTED}: {exc}"
            if pixels is None or pixel_sha256(image) != pixels:
                return f"compacted blob {sha256 + COMPACTED}: pixels do not match its pixel hash"
            return None
        if hashlib.sha256(data).hexdigest() != sha256:
            return "bytes do not match the name"
        return None


def _name(entry: str) -> str | None:
    """The blob name of a file in a shard: ``<sha256>`` or ``<sha256>.webp``; else None."""
    name = entry[: -len(COMPACTED)] if entry.endswith(COMPACTED) else entry
    return name if _SHA256.match(name) else None
