"""A grade's ``grader_version``: a hash of the grader's spec and of the code that grades.

Two grades with the same ``grader_version`` were made by the same spec and the same grading code,
so a flip between them is the session's; a different ``grader_version`` says the grader changed.
The code is every module of ``ownloop.grading`` (the graders share their parsing and evidence
helpers), and for a ``python:MODULE:FUNCTION`` plug-in the file of its function too. The
grader's declared version (``Grader.version``) is part of it. A grader that names another
project's evaluator (``webarena-verified``) adds its ``version_label`` after the hash, readable:
``3f0c... webarena-verified 1.2.3 task 157 r2 evaluator 35c3385b1db4``.
"""

from __future__ import annotations

import hashlib
import inspect
from functools import lru_cache
from pathlib import Path

from ownloop.grading.grade import Grader

__all__ = ["grader_version"]

_PACKAGE = Path(__file__).parent


def grader_version(grader: Grader) -> str:
    """The first 16 hex digits of the sha256 of ``grader``'s spec, declared version and code,
    then its ``version_label`` if it has one."""
    digest = hashlib.sha256()
    for part in (grader.name, grader.version, _package_digest(), _plugin_digest(grader)):
        digest.update(part.encode())
        digest.update(b"\x00")
    label = getattr(grader, "version_label", "")
    return digest.hexdigest()[:16] + (f" {label}" if isinstance(label, str) and label else "")


@lru_cache(maxsize=1)
def _package_digest() -> str:
    """The hash of every module of the grading package (read once per process)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.glob("*.py")):
        digest.update(path.name.encode() + b"\x00" + path.read_bytes() + b"\x00")
    return digest.hexdigest()


def _plugin_digest(grader: Grader) -> str:
    """The hash of the file a plug-in's function lives in; "" for the built-in graders."""
    function = getattr(grader, "function", None)
    if function is None:
        return ""
    try:
        source = inspect.getsourcefile(function)
    except TypeError:  # a built-in or C function: no file to hash
        return ""
    if not source:
        return ""
    try:
        stat = Path(source).stat()
    except OSError:
        return ""
    return _file_digest(source, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    """The file's sha256; the cache key holds its mtime and size, so an edited file is read
    again."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""
