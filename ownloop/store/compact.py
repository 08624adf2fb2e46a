"""``ownloop compact``: PNG blobs re-encoded as lossless WebP, off the hot path, pixel for pixel.

``compact_blobs`` does every blob of a store (the command); ``compact_names`` the blobs a session
refers to, which ``record`` has done for each session as it ends (``compactor.py``).

Each PNG blob ``blobs/ab/<sha256>`` (RGB or RGBA, 8 bits a channel: what browsers capture) is
decoded, encoded as lossless WebP, and the WebP decoded again; only when both decode to the same
pixels, and the WebP is smaller, is it written beside the PNG as ``<sha256>.webp`` (a temporary
name, fsync, rename, then the folder's fsync) and the PNG removed. The WebP carries the hash of
its pixels (XMP), which ``verify`` checks. Every reference by the PNG's sha256 still resolves:
``BlobStore.get`` returns a PNG of the same pixels, ``get_stored`` the WebP (see ``blobs.py``).

What is lost: the PNG's exact bytes (and its ancillary chunks: gamma, text, dpi), unless
``keep_png``. A blob written again after compaction is stored as PNG again (its exact bytes back).

Safe to kill at any point and run again: a blob is in one of three states, each readable (PNG
only; PNG and its WebP; WebP only), and a run finishes what an earlier one began (a PNG beside
its WebP is dropped once both are decoded again and match). Running it twice changes nothing.

The encoder's setting: ``method=4, quality=50`` (libwebp's effort; for lossless, quality is
effort too). On 1280x800 page screenshots: 0.29 of the PNG's bytes for about 1.2x the CPU of
re-encoding the PNG; ``quality=100`` 0.28 for 2.1x, ``method=6, quality=100`` 0.28 for 69x.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ownloop.store.blobs import (
    COMPACTED,
    BlobStore,
    decode_compacted,
    pixel_mark,
    pixel_sha256,
    write_file,
)
from ownloop.store.images import PIXEL_BUDGET, over_budget
from ownloop.store.packs import FULL, locked_by_writer, pack_files, read_record, records

__all__ = ["METHOD", "QUALITY", "CompactReport", "compact_blobs", "compact_names", "unpack"]

METHOD = 4
QUALITY = 50
_SHA256 = re.compile(r"[0-9a-f]{64}")
_TEMPORARY = re.compile(r"\.[0-9a-f]{64}\.webp\.[0-9a-f]{8}\.tmp")  # see blobs.write_file
_TEMPORARY_PACK = re.compile(r"\.[0-9a-z]+\.pack\.tmp")  # see packs.Pack._open
_STALE_S = 600.0  # a temporary WebP this old is a killed run's
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_MODES = ("RGB", "RGBA")  # what lossless WebP holds exactly


@dataclass
class CompactReport:
    """What a compaction did: counts, and the blob folder's bytes before and after."""

    compacted: int = 0  # PNGs replaced (or, with keep_png, joined) by their WebP in this run
    already: int = 0  # compacted by an earlier run
    unpacked: int = 0  # packs written out as files and removed
    busy_packs: int = 0  # packs left as they are: a recorder still writes them
    damaged_packs: tuple[str, ...] = ()  # packs kept as they are: bytes in them are no record
    kept: dict[str, int] = field(default_factory=dict)  # PNGs left as they are, by reason
    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        kept = ", ".join(f"{n} {why}" for why, n in sorted(self.kept.items()))
        ratio = self.bytes_after / self.bytes_before if self.bytes_before else 1.0
        return (
            f"compact: {self.compacted} PNG blobs re-encoded as lossless WebP "
            f"(pixel-identical), {self.already} already compacted"
            + (f", kept as PNG: {kept}" if kept else "")
            + (f", {self.unpacked} packs written out" if self.unpacked else "")
            + (
                f", {self.busy_packs} packs left to the runs still writing them"
                if self.busy_packs
                else ""
            )
            + (
                f", {len(self.damaged_packs)} damaged packs kept as they are (first: "
                f"{self.damaged_packs[0]}; check with ownloop verify --full)"
                if self.damaged_packs
                else ""
            )
            + f"; blobs {_mb(self.bytes_before)} -> {_mb(self.bytes_after)} ({ratio:.2f}x) "
            f"in {self.seconds:.1f} s"
        )

    def _keep(self, why: str) -> None:
        self.kept[why] = self.kept.get(why, 0) + 1


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def compact_blobs(
    blobs: BlobStore,
    *,
    keep_png: bool = False,
    method: int = METHOD,
    quality: int = QUALITY,
    progress: Callable[[int, int], None] | None = None,
) -> CompactReport:
    """Re-encode ``blobs``' PNG blobs as lossless WebP (see the module's notes).

    Args:
        keep_png: leave each PNG in place beside its WebP (its exact bytes kept; no bytes saved
            until a later run without it).
        progress: called with (blobs done, blobs to do) after each blob.

    Raises:
        StoreNotWritable: the disk refused a write; what was done so far stays consistent.
    """
    began = time.perf_counter()
    before = _bytes(_shards(blobs.root))
    report = unpack(blobs, keep_png=keep_png, method=method, quality=quality)
    shards = _shards(blobs.root)
    report.bytes_before = before
    todo = sum(len(names) for _, names, _ in shards)
    # (those written from packs just now are in the folders as WebP alone: counted already)
    report.already += sum(only for _, _, only in shards) - report.compacted
    done = 0

    def counted(_: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, todo)

    for shard, names, _ in shards:
        _sweep(shard)
        _compact_shard(shard, names, report, keep_png, method, quality, counted)
    report.bytes_after = _bytes(_shards(blobs.root))
    report.seconds = time.perf_counter() - began
    return report


def compact_names(
    blobs: BlobStore,
    names: Iterable[str],
    *,
    method: int = METHOD,
    quality: int = QUALITY,
    pace: Callable[[], None] = lambda: None,
) -> CompactReport:
    """Compact the blobs named ``names`` alone (a session's screenshots: see ``compactor.py``),
    as ``compact_blobs`` does each PNG; names that are not PNG blobs, or not there, are passed
    over. The report's bytes are those blobs' files, before and after. ``pace`` is called
    before each blob (the compactor waits there while the CPU is wanted elsewhere).

    Raises:
        StoreNotWritable: the disk refused a write; what was done so far stays consistent.
    """
    began = time.perf_counter()
    report = CompactReport()
    by_shard: dict[str, list[str]] = {}
    for name in dict.fromkeys(names):
        if _SHA256.fullmatch(name):
            by_shard.setdefault(name[:2], []).append(name)
    for prefix, group in sorted(by_shard.items()):
        shard = blobs.root / prefix
        report.bytes_before += _sizes(shard, group)
        _compact_shard(
            shard, sorted(group), report, False, method, quality, pace=pace, packed=blobs.packed
        )
        report.bytes_after += _sizes(shard, group)
    report.seconds = time.perf_counter() - began
    return report


def unpack(
    blobs: BlobStore,
    *,
    keep_png: bool = False,
    full_only: bool = False,
    method: int = METHOD,
    quality: int = QUALITY,
    pace: Callable[[], None] = lambda: None,
) -> CompactReport:
    """Write out every pack nobody writes any more (``packs.py``) as blob files, then remove
    it: a PNG as its WebP (as ``compact_blobs`` does; its PNG with ``keep_png``), any other
    blob as it is. With ``full_only``, as a run goes, only the packs it closed because they
    were full, and every blob as it is (a session still running may read its exact bytes
    back; the session's own compaction encodes them once it ends). A blob already a file, or
    already compacted, is passed over; a torn last record (a crash while it was appended; no
    journal line names it) is dropped. Each file is durable, and its folder too, before the pack
    goes, so a kill at any point loses nothing and a later run finishes the work. A pack with
    bytes in it that are no record is kept as it is (``damaged_packs``): the blobs it still holds
    are read from it.

    Raises:
        StoreNotWritable: the disk refused a write; what was done so far stays consistent.
    """
    report = CompactReport()
    for path in pack_files(blobs.packs):
        if full_only and not path.name.endswith(FULL):
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # unpacked by another run meanwhile
            continue
        try:
            if locked_by_writer(fd):
                report.busy_packs += 1
                continue
            scan = records(fd)
            folders: set[Path] = set()
            for record in scan.records:
                png = blobs.path(record.sha256)
                webp = blobs.compacted_path(record.sha256)
                if png.exists() or (webp.exists() and not keep_png):
                    continue
                pace()
                data = read_record(fd, record)
                if data is None:  # torn or damaged: read as no blob, dropped
                    continue
                report.bytes_before += len(data)
                encode = not keep_png and not full_only
                outcome = _compact_one(data, webp, method, quality) if encode else ""
                if outcome == "compacted":
                    report.compacted += 1
                    report.bytes_after += os.stat(webp).st_size
                else:  # (not "already": a blob with its WebP was passed over above)
                    if outcome:
                        report._keep(outcome)
                    png.parent.mkdir(exist_ok=True)
                    write_file(png, data, os.fsync)
                    report.bytes_after += len(data)
                folders.add(png.parent)
            for folder in sorted(folders):
                _fsync_folder(folder)  # every file's name durable before the pack goes
            if scan.damaged:
                report.damaged_packs += (path.name,)
                continue
            path.unlink(missing_ok=True)
            report.unpacked += 1
        finally:
            os.close(fd)
    _sweep_packs(blobs.packs)
    return report


def _sweep_packs(folder: Path) -> None:
    """Remove the temporary packs a killed writer left before it named them (empty, and
    unlocked: not one a writer is making)."""
    try:
        entries = [e.path for e in os.scandir(folder) if _TEMPORARY_PACK.fullmatch(e.name)]
    except FileNotFoundError:
        return
    for entry in entries:
        try:
            fd = os.open(entry, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            if not locked_by_writer(fd):
                os.unlink(entry)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)


def _compact_shard(
    shard: Path,
    names: list[str],
    report: CompactReport,
    keep_png: bool,
    method: int,
    quality: int,
    done: Callable[[str], None] = lambda _: None,
    pace: Callable[[], None] = lambda: None,
    packed: Callable[[str], bytes | None] = lambda _: None,
) -> None:
    """Compact each PNG blob ``names`` of one shard folder (one without its file, from its pack:
    ``packed``); the PNGs go once every WebP's name is durable (one fsync of the folder)."""
    drop: list[Path] = []
    for name in names:
        pace()
        png = shard / name
        webp = shard / (name + COMPACTED)
        data: bytes | None
        try:
            data = png.read_bytes()
        except FileNotFoundError:
            data = packed(name)  # (None: compacted by another run meanwhile, or not here)
            if data is not None:
                report.bytes_before += len(data)
        outcome = _compact_one(data, webp, method, quality) if data is not None else ""
        if outcome in ("compacted", "already"):
            if outcome == "compacted":
                report.compacted += 1
            else:
                report.already += 1
            if not keep_png:
                drop.append(png)
        elif outcome:
            report._keep(outcome)
        done(name)
    if drop:
        _fsync_folder(shard)  # the WebPs' names are durable before any PNG goes
        for png in drop:
            png.unlink(missing_ok=True)


def _sizes(shard: Path, names: list[str]) -> int:
    """The bytes of blobs ``names``' files in ``shard`` (a PNG, its WebP, or both)."""
    total = 0
    for name in names:
        for candidate in (name, name + COMPACTED):
            try:
                total += os.stat(shard / candidate).st_size
            except FileNotFoundError:
                pass
    return total


def _compact_one(data: bytes, webp: Path, method: int, quality: int) -> str:
    """The PNG ``data`` written as its WebP ``webp``: 'compacted', 'already' (its WebP was
    there and matches), '' (not a PNG), or why the PNG is kept."""
    from PIL import Image

    if not data.startswith(_PNG_MAGIC):
        return ""
    if over_budget(data):  # measured from its header: never decoded
        return f"over the {PIXEL_BUDGET // 1_000_000} M pixel budget"
    try:
        image = Image.open(io.BytesIO(data), formats=("PNG",))
        image.load()
    except (OSError, SyntaxError, ValueError):
        return "not decodable"
    if image.mode not in _MODES:
        return f"mode {image.mode}"
    raw = image.tobytes()
    pixels = pixel_sha256(image, raw)
    if webp.exists():  # an earlier run wrote it (and was killed, or kept the PNG)
        try:
            again, mark = decode_compacted(webp.read_bytes())
        except ValueError:
            mark = None
        if mark == pixels and pixel_sha256(again) == pixels:
            return "already"
        webp.unlink()  # not what this PNG decodes to: made again below
    out = io.BytesIO()
    image.save(
        out,
        format="WEBP",
        lossless=True,
        exact=True,  # keep the colour under a transparent pixel
        method=method,
        quality=quality,
        xmp=pixel_mark(pixels, image.mode),
    )
    encoded = out.getvalue()
    if len(encoded) >= len(data):
        return "not smaller as WebP"
    decoded, mark = decode_compacted(encoded)
    # The check: the WebP decodes to the PNG's very pixels, byte for byte (the bytes hashed
    # above, so the mark it carries is their hash; one comparison, no second hash).
    same = (decoded.mode, decoded.size) == (image.mode, image.size) and decoded.tobytes() == raw
    if mark != pixels or not same:
        return "WebP pixels differ"
    webp.parent.mkdir(exist_ok=True)  # (a packed blob's shard may not be there yet)
    write_file(webp, encoded, os.fsync)
    return "compacted"


def _sweep(shard: Path) -> None:
    """Remove the temporary WebPs a killed run left (not one another run may be writing)."""
    stale = time.time() - _STALE_S
    for entry in os.scandir(shard):
        if _TEMPORARY.fullmatch(entry.name):
            try:
                if entry.stat().st_mtime < stale:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _shards(root: Path) -> list[tuple[Path, list[str], int]]:
    """Each shard folder with its plain blob names, in order, and how many blobs in it are
    compacted already (their PNG gone)."""
    try:
        folders = sorted(entry.path for entry in os.scandir(root) if entry.is_dir())
    except FileNotFoundError:
        return []
    found = []
    for folder in folders:
        entries = set(os.listdir(folder))
        names = sorted(name for name in entries if _SHA256.fullmatch(name))
        compacted = [
            name
            for name in entries
            if name.endswith(COMPACTED) and _SHA256.fullmatch(name[: -len(COMPACTED)])
        ]
        only = sum(1 for name in compacted if name[: -len(COMPACTED)] not in entries)
        found.append((Path(folder), names, only))
    return found


def _bytes(shards: list[tuple[Path, list[str], int]]) -> int:
    total = 0
    for folder, _, _ in shards:
        for entry in os.scandir(folder):
            if entry.is_file() and not entry.name.startswith("."):
                total += entry.stat().st_size
    return total
