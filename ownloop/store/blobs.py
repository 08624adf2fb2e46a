"""Content-addressed blob files: screenshots, DOM snapshots, large evidence.

A blob is named by the sha256 of its bytes and lives at ``blobs/ab/<sha256>``. It is written to a
temporary name, fsync'd and renamed, so a reader never sees half a blob; a hash that exists is not
written again, so identical screenshots across all runs are stored once.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from ownloop.store.disk import disk_error
from ownloop.store.errors import OwnloopError

__all__ = ["BlobStore", "MissingBlob"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class MissingBlob(OwnloopError):
    """A referenced blob is not in the store."""


class BlobStore:
    def __init__(self, root: Path, *, fsync: bool = True) -> None:
        self.root = root
        self._fsync = fsync
        self._shards: set[str] = set()  # shard folders known to exist: no mkdir per blob

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
                view = view[os.write(fd, view):]
            if self._fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def get(self, sha256: str) -> bytes:
        try:
            return self.path(sha256).read_bytes()
        except FileNotFoundError:
            raise MissingBlob(
                f"blob {sha256[:12]} is missing from {self.root}. "
                "Check the store with: ownloop verify") from None

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
