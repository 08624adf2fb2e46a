"""A real small file system for tests of full disks and read-only stores (no mocks).

Import it from any test module (``tests/`` has no ``__init__.py``; the root conftest puts the
repository on ``sys.path``)::

    from tests.fullfs import fill, remount, small_tmpfs, tmpfs  # tmpfs is a fixture

- ``small_tmpfs(path, size="2m")``: a context manager that mounts a fresh tmpfs of ``size`` on
  ``path`` (created if missing), yields ``path``, and unmounts it afterwards (lazily if a file is
  still open). It calls ``pytest.skip`` with the reason when mounting is not permitted (not root,
  no ``mount``, a container without CAP_SYS_ADMIN).
- ``remount(path, read_only=True)``: remounts a ``small_tmpfs`` read-only (or back read-write).
  Unlike ``chmod -R a-w``, a read-only mount stops root too.
- ``fill(path)``: writes ``path`` (a file inside the tmpfs) until the disk is full; returns the
  bytes written. Delete the file to free the space again.
- ``tmpfs``: a pytest fixture, a 2 MB tmpfs at ``tmp_path / "fs"``. Imported into a test module
  it is found by name (ruff then wants ``# noqa: F401`` on the import and flags the parameter
  as F811; ``with small_tmpfs(tmp_path / "fs") as fs:`` in the test avoids both).

Size it for what lands on it: an empty DuckDB index alone takes about 2 MB, so a store that is
indexed on the tmpfs needs ``size="8m"`` or more.

The mount is made in the test process's own mount namespace and always removed in teardown, so
nothing outlives the test even when it fails.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["fill", "remount", "small_tmpfs", "tmpfs"]


def _mount_refusal() -> str | None:
    """Why this process cannot mount a tmpfs, or None when it can try."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "tmpfs mounts need Linux"
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount binary"
    return None


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


@contextmanager
def small_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    """Mount a fresh tmpfs of ``size`` on ``path`` for the duration of the block.

    Args:
        path: The mount point; created if missing.
        size: The tmpfs size as ``mount`` reads it ("2m", "512k").

    Yields:
        ``path``, now an empty file system of ``size`` bytes.
    """
    refusal = _mount_refusal()
    if refusal is not None:
        pytest.skip(f"needs a real small file system: {refusal}")
    path.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        if _run("umount", str(path)).returncode != 0:
            # A file still open (a DuckDB handle, a killed child not yet reaped): detach now,
            # the kernel frees it when the last handle closes.
            _run("umount", "-l", str(path))


def remount(path: Path, read_only: bool = True) -> None:
    """Remount the tmpfs at ``path`` read-only (or read-write again).

    Raises:
        RuntimeError: ``mount`` refused (e.g. ``path`` is not a mount point).
    """
    done = _run("mount", "-o", "remount,ro" if read_only else "remount,rw", str(path))
    if done.returncode != 0:
        raise RuntimeError(f"remount of {path} failed: {done.stderr.strip()}")


def fill(path: Path, chunk: int = 64 * 1024) -> int:
    """Write ``path`` until the file system is full (ENOSPC); return the bytes written."""
    written = 0
    block = b"\0" * chunk
    with open(path, "wb", buffering=0) as handle:
        while chunk > 0:
            try:
                written += handle.write(block[:chunk])
            except OSError as error:
                if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                chunk //= 2  # top up the last few blocks too
    return written


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A fresh 2 MB tmpfs at ``tmp_path / "fs"``, unmounted after the test."""
    with small_tmpfs(tmp_path / "fs") as mounted:
        yield mounted
