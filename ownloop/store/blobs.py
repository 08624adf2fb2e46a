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

Packed blobs (``packs.py``): a recorder appends its blobs to one pack file while it records
(``start_packing``), and the background compaction writes them out as files once the pack is
closed (``compact.unpack``). Every read looks in the packs after the exact file and before the
WebP: a packed blob is its exact bytes.
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
from ownloop.store.packs import LIMIT as PACK_LIMIT
from ownloop.store.packs import PACKS, WRITE_AND_WAIT, Pack, PackIndex

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


def _sync_file_range() -> Callable[[int, int, int, int], None] | None:
    """Linux's sync_file_range ``(fd, offset, length, flags)``, length 0 to the end: with
    ``packs.WRITE_AND_WAIT`` a range of a file's dirty pages is written to the device and waited
    for, with ``packs.START_WRITE`` only started; None where there is none."""
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

    def sync_range(fd: int, offset: int, length: int, flags: int) -> None:
        if call(fd, offset, length, flags) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return sync_range


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
def _data_write() -> Callable[[int, int, int, int], None] | None:
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
        self._pack: Pack | None = None  # this process's pack, while it packs
        self._packs = PackIndex(root / PACKS)  # what the store's packs hold

    @property
    def packs(self) -> Path:
        """The folder of packs (``packs.py``)."""
        return self.root / PACKS

    def start_packing(self, limit: int = PACK_LIMIT) -> bool:
        """Append the blobs this store puts from now on to one pack (see ``packs.py``), where
        that is as durable as a file a blob: a store that is not synced, or one whose journal
        line's fsync commits the pack too. False (files as before) elsewhere. A pack is closed
        at ``limit`` bytes and another begun."""
        if self._pack is None and (not self._fsync or self.synced_with_journal):
            self._pack = Pack(self.packs, _data_write() if self._fsync else None, limit)
        return self._pack is not None

    def settle(self) -> None:
        """Wait until the blobs put so far are on the device (before a journal line that names
        them is written: see ``packs.py``); at once when none is waiting."""
        if self._pack is not None:
            self._pack.settle()

    def close_pack(self) -> Path | None:
        """Stop packing: the pack is closed (and may be unpacked); returns its path, if any
        blob went to it. Later puts write files."""
        pack, self._pack = self._pack, None
        if pack is None:
            return None
        pack.close()
        return pack.path

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
        if self._pack is not None:
            self._pack.append(sha256, data)
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
            data_write = _data_write() if self.synced_with_journal else None
            flush = (
                (lambda fd: data_write(fd, 0, 0, WRITE_AND_WAIT))
                if data_write is not None
                else os.fsync
            )
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
        packed = self.packed(sha256)
        if packed is not None:
            return packed
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
            pass
        packed = self.packed(sha256)
        return packed if packed is not None else self._stored_webp(sha256)

    def packed(self, sha256: str) -> bytes | None:
        """The exact bytes of blob ``sha256`` from a pack (this process's or another's), or
        None when no pack holds it whole."""
        if self._pack is not None and (mine := self._pack.read(sha256)) is not None:
            return mine
        return self._packs.read(sha256)

    def has_exact(self, sha256: str) -> bool:
        """Whether the blob's exact bytes are here (a file or a pack), not only its WebP."""
        return self.path(sha256).exists() or self.packed(sha256) is not None

    def packed_names(self) -> set[str]:
        """The names the store's packs hold."""
        return self._packs.names()

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
        return (
            self.path(sha256).exists()
            or self.compacted_path(sha256).exists()
            or self.packed(sha256) is not None
        )

    def __iter__(self) -> Iterator[str]:
        """Every blob's name (a compacted PNG under its PNG's name, a packed one's), by name."""
        if not self.root.exists():
            return
        names: set[str] = self.packed_names()
        for shard in self.root.iterdir():
            if shard.is_dir() and shard.name != PACKS:
                found = {_name(entry.name) for entry in shard.iterdir()}
                names.update(name for name in found if name is not None)
        yield from sorted(names)

    def check(self, sha256: str) -> str | None:
        """None when the blob is there and its bytes match its name, else what is wrong.

        A compacted blob (its PNG gone) is decoded: its pixels must match the hash the
        compaction wrote in it, the hash of the PNG's pixels it checked before dropping the PNG.
        """
        try:
            data = self.path(sha256).read_bytes()
        except FileNotFoundError:
            if self.packed(sha256) is not None:  # (read back only when it matches its name)
                return None
            try:
                webp = self.compacted_path(sha256).read_bytes()
            except FileNotFoundError:
                # (unpacked between the looks: its file is there now)
                return self.check(sha256) if self.path(sha256).exists() else "missing"
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
