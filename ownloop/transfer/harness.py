"""Reading one result folder written by a plain harness, as far as it can be read.

The layout, one folder per task::

    session.json            task_id, base, answer, status, rounds, error, record, log, seconds,
                            parse_fails, action_errors (fara7b: error_attempts, a list of summaries)
    session_failed.json     the same, for a session the harness left to be re-run
    steps.jsonl             one JSON object a line, one line per model call (fields per agent)
    screens/step_NN.png     what step NN saw (from 01), plus one more after the last step
    ownloop.json            (ownloop's export only) task, grades, evidence: see ``sidecar.py``
    error_attempt_N/        an earlier failed attempt in the same layout, plus attempt.json

Nothing here touches the store: ``read_folder`` returns the folder's contents and a list of what
it had to skip (a line that is not JSON, a screenshot that is missing, ...).

Only regular files are read (DESIGN §8, the checks of ``files.py``): a symlink is never followed
(it could name any file on the machine) and a FIFO, socket or device is never opened (a FIFO would
block the import). Each one is skipped and named in the folder's skip list.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ownloop.store.images import over_budget
from ownloop.transfer.files import is_dir as _is_dir
from ownloop.transfer.files import is_file as _is_file
from ownloop.transfer.files import json_objects, read_regular, unreadable
from ownloop.transfer.files import read_regular as _read
from ownloop.transfer.files import walk as _walk

__all__ = [
    "Attempt",
    "ResultFolder",
    "Screen",
    "StepLine",
    "folder_sha256",
    "is_result_folder",
    "png_size",
    "read_folder",
    "read_regular",
    "steps_fields",
    "unreadable",
]

_SUMMARIES = ("session.json", "session_failed.json")
_KNOWN = {"session.json", "session_failed.json", "steps.jsonl", "attempt.json", "ownloop.json"}
_SIDECAR_FILES = "ownloop-evidence"  # evidence blobs an ownloop export wrote beside ownloop.json
_SCREEN = re.compile(r"step_(\d+)\.png")
_ATTEMPT = re.compile(r"error_attempt_(\d+)")
_PNG = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class StepLine:
    """One line of steps.jsonl: its 1-based line number, its step number and its fields."""

    line: int
    step: int
    fields: dict[str, Any]


@dataclass(frozen=True)
class Screen:
    """One screenshot file with its pixel size (0 x 0 when it is not a readable PNG)."""

    step: int
    data: bytes
    width: int
    height: int


@dataclass
class Attempt:
    """One attempt: the folder's own session, or one of its ``error_attempt_N`` folders.

    ``summary`` is the summary file's object (None when there was none or it did not read),
    ``summary_file`` the file it came from (``session.json``, ``session_failed.json``,
    ``attempt.json``, or ``error_attempts[i]`` for an entry of the parent's list).
    ``extra_files`` maps relative paths of files the layout does not name to their bytes.
    ``sidecar`` is the bytes of ``ownloop.json`` an ownloop export wrote (else None), and
    ``sidecar_files`` the files under ``ownloop-evidence/`` by relative path.
    """

    label: str  # "" for the folder's own session, else e.g. "error_attempt_1"
    summary: dict[str, Any] | None = None
    summary_file: str = ""
    summary_keys: list[str] = field(default_factory=list)  # the summary's fields, in file order
    steps: list[StepLine] = field(default_factory=list)
    screens: dict[int, Screen] = field(default_factory=dict)
    extra_files: dict[str, bytes] = field(default_factory=dict)
    sidecar: bytes | None = None
    sidecar_files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class ResultFolder:
    """A task's result folder: its final attempt, earlier error attempts (in order) and what was
    skipped (each item names a file, and a line when it is one line, with the reason)."""

    name: str
    sha256: str
    final: Attempt
    error_attempts: list[Attempt]
    skipped: list[str]


def _files(path: Path) -> Iterator[Path]:
    return (entry for entry in _walk(path) if _is_file(entry))


def is_result_folder(path: Path) -> bool:
    """Whether ``path`` looks like a harness result folder."""
    return path.is_dir() and any(
        os.path.lexists(path / name) for name in (*_SUMMARIES, "steps.jsonl", "screens")
    )


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header, or (0, 0) when ``data`` is not a PNG."""
    if len(data) >= 24 and data.startswith(_PNG) and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    return 0, 0


def folder_sha256(path: Path) -> str:
    """A hash of every file under ``path``: relative names and bytes, in name order."""
    digest = hashlib.sha256()
    for file in sorted(_files(path)):
        name = file.relative_to(path).as_posix().encode()
        data = _read(file)
        digest.update(b"%d:%s:%d:" % (len(name), name, len(data)))
        digest.update(data)
    return digest.hexdigest()


def read_folder(path: Path) -> ResultFolder:
    """Read a result folder as far as it goes; never raises for damaged content.

    Args:
        path: the task's folder.
    """
    skipped: list[str] = []
    for found in _walk(path):
        reason = unreadable(found)
        if reason is not None:
            skipped.append(f"{found.relative_to(path).as_posix()} ({reason})")
    final = _read_attempt(path, "", skipped)
    if (
        final.summary is not None
        and _is_file(path / "session_failed.json")
        and final.summary_file == "session.json"
    ):
        # Both files: session.json is the later word; the other is kept beside it.
        other = _read_json(path / "session_failed.json", "session_failed.json", skipped)
        if other is not None:
            final.summary["session_failed.json"] = other
    listed = final.summary.pop("error_attempts", None) if final.summary is not None else None
    entries: list[Any] = listed if isinstance(listed, list) else []
    if listed is not None and not isinstance(listed, list):
        assert final.summary is not None
        final.summary["error_attempts"] = listed  # not a list: kept as an unknown field
    numbered = sorted(
        (int(m.group(1)), p)
        for p in path.iterdir()
        if _is_dir(p) and (m := _ATTEMPT.fullmatch(p.name))
    )
    attempts = []
    for i, (_, sub) in enumerate(numbered):
        attempt = _read_attempt(sub, sub.name, skipped)
        entry = entries[i] if i < len(entries) else None
        if isinstance(entry, dict):
            # The folder's own summary wins; fields only the parent's list has are kept too.
            attempt.summary = {**entry, **(attempt.summary or {})}
            attempt.summary_keys = list(attempt.summary)
            attempt.summary_file = attempt.summary_file or f"error_attempts[{i}]"
        elif entry is not None and attempt.summary is None:
            skipped.append(f"session.json error_attempts[{i}] (not an object)")
        attempts.append(attempt)
    for i in range(len(numbered), len(entries)):
        entry = entries[i]
        if isinstance(entry, dict):
            attempts.append(
                Attempt(f"error_attempts[{i}]", dict(entry), f"error_attempts[{i}]", list(entry))
            )
        else:
            skipped.append(f"session.json error_attempts[{i}] (not an object)")
    return ResultFolder(path.name, folder_sha256(path), final, attempts, skipped)


def _read_attempt(path: Path, label: str, skipped: list[str]) -> Attempt:
    prefix = f"{label}/" if label else ""
    attempt = Attempt(label)
    names = ("attempt.json", *_SUMMARIES) if label else _SUMMARIES
    for name in names:
        if _is_file(path / name):
            attempt.summary = _read_json(path / name, prefix + name, skipped)
            attempt.summary_file = name
            attempt.summary_keys = list(attempt.summary or ())
            break
    if _is_file(path / "steps.jsonl"):
        attempt.steps = _read_steps(path / "steps.jsonl", prefix, skipped)
    screens_dir = path / "screens"
    refused: set[int] = set()  # screens over the pixel budget: named once, not as missing too
    if _is_dir(screens_dir):
        for file in sorted(screens_dir.iterdir()):
            match = _SCREEN.fullmatch(file.name)
            data = _read_or_none(file) if match else None
            if match and data is not None:
                number = int(match.group(1))
                too_large = over_budget(data)  # measured from its header: never decoded
                if too_large:
                    skipped.append(f"{prefix}screens/{file.name} ({too_large})")
                    refused.add(number)
                    continue
                attempt.screens[number] = Screen(number, data, *png_size(data))
    if _is_file(path / "ownloop.json"):
        attempt.sidecar = _read_or_none(path / "ownloop.json")
    for number in sorted({s.step for s in attempt.steps} - set(attempt.screens) - refused):
        skipped.append(f"{prefix}screens/step_{number:02d}.png (missing)")
    for file in _files(path):
        relative = file.relative_to(path)
        top = relative.parts[0]
        if top in _KNOWN or _ATTEMPT.fullmatch(top):
            continue
        if top == _SIDECAR_FILES and len(relative.parts) == 2:
            data = _read_or_none(file)
            if data is not None:
                attempt.sidecar_files[relative.as_posix()] = data
            continue
        if top == "screens" and len(relative.parts) == 2 and _SCREEN.fullmatch(relative.name):
            continue
        data = _read_or_none(file)
        if data is not None:
            attempt.extra_files[relative.as_posix()] = data
    return attempt


def steps_fields(path: Path) -> Iterator[list[str]]:
    """The field names of each line of a result folder's steps.jsonl files (its own and its
    error attempts'), read as ``read_folder`` reads them; for telling which agent wrote them."""
    folders = (
        [path, *(p for p in sorted(path.iterdir()) if _is_dir(p) and _ATTEMPT.fullmatch(p.name))]
        if _is_dir(path)
        else []
    )
    for folder in folders:
        data = _read_or_none(folder / "steps.jsonl") if _is_file(folder / "steps.jsonl") else None
        for raw in (data or b"").split(b"\n"):
            try:
                value = json.loads(raw) if raw.strip() else None
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                yield [key for key in value if isinstance(key, str)]


def _read_or_none(path: Path) -> bytes | None:
    try:
        return _read(path)
    except OSError:
        return None  # not a regular file (named in the skip list) or gone


def _read_json(path: Path, label: str, skipped: list[str]) -> dict[str, Any] | None:
    try:
        value = json.loads(_read(path))
    except OSError:
        skipped.append(f"{label} (unreadable)")
        return None
    except (ValueError, RecursionError):
        skipped.append(f"{label} (not JSON)")
        return None
    if not isinstance(value, dict):
        skipped.append(f"{label} (not an object)")
        return None
    return value


def _read_steps(path: Path, prefix: str, skipped: list[str]) -> list[StepLine]:
    lines: list[StepLine] = []
    data = _read_or_none(path)
    if data is None:
        skipped.append(f"{prefix}steps.jsonl (unreadable)")
        return []
    for number, value in json_objects(data, f"{prefix}steps.jsonl", skipped):
        step = value.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            step = len(lines) + 1
        lines.append(StepLine(number, step, value))
    return lines
