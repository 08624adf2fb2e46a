"""Reading OSWorld's result folders, as far as they can be read (nothing here touches the store).

OSWorld's runner (``lib_run_single.py``) writes one folder per example::

    {result_dir}/{action_space}/{observation_type}/{model}/{domain}/{example_id}/
        traj.jsonl           one JSON object a line, one line per executed action: step_num,
                             action_timestamp, action, response, reward, done, info,
                             screenshot_file (a line {"Error": ...} when the example raised)
        step_{n}_{YYYYmmdd@HHMMSS[ffffff]}.png   the screen after each action
        step_0.png           (some runners) the screen before the first step
        result.txt           the score and a newline; no file: the example did not finish
        runtime.log          the example's log
        recording.mp4        the screen recording
        instruction.txt      (some runners) the instruction
    {result_dir}/summary/results.json   a list of {application, task_id, status, score,
                                         timestamp, err_message}

The model is a path of its own and may hold a slash (``ByteDance-Seed/UI-TARS-1.5-7B`` is two
folders). ``find_examples`` walks the tree below the folder given and tells each example folder's
five coordinates from its place: below an observation-type folder (``screenshot``, ``a11y_tree``,
``screenshot_a11y_tree``, ``som``), else by position.

Only regular files are read and no symlink is followed (``harness.unreadable``); every file has a
size limit, and a screenshot's pixel count is read from its PNG header and checked against the
store's pixel budget (``ownloop.store.images``) before anything decodes it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ownloop.store.images import over_budget
from ownloop.transfer.files import json_objects
from ownloop.transfer.harness import folder_sha256, png_size, read_regular, unreadable

__all__ = [
    "OBSERVATION_TYPES",
    "Coordinates",
    "Example",
    "Shot",
    "TrajLine",
    "find_examples",
    "read_example",
    "read_summary",
    "read_task_file",
    "traj_responses",
]

OBSERVATION_TYPES = ("screenshot", "a11y_tree", "screenshot_a11y_tree", "som")
_MAX_DEPTH = 8  # {action_space}/{observation_type}/{model: up to 4 folders}/{domain}/{example_id}
_MAX_BYTES = {
    "traj.jsonl": 64 << 20,
    "png": 32 << 20,
    "result.txt": 4096,
    "runtime.log": 16 << 20,
    "recording.mp4": 512 << 20,
    "instruction.txt": 256 << 10,
    "results.json": 64 << 20,
    "task": 4 << 20,
}
_MARKERS = ("traj.jsonl", "result.txt")
_SHOT = re.compile(r"step_(\d{1,6})(?:_[0-9A-Za-z@._-]{1,40})?\.png")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}")


class Coordinates(NamedTuple):
    """Where an example folder sits in OSWorld's layout."""

    action_space: str
    observation_type: str
    model: str
    domain: str
    example_id: str


@dataclass(frozen=True)
class Shot:
    """One screenshot file: its name, bytes and size from the PNG header."""

    name: str
    data: bytes
    width: int
    height: int


@dataclass(frozen=True)
class TrajLine:
    """One line of traj.jsonl: its 1-based line number and its fields."""

    line: int
    fields: dict[str, Any]


@dataclass
class Example:
    """One example folder, read. ``score`` is None when result.txt is missing or unreadable;
    ``skipped`` names each thing that could not be read, with the reason."""

    path: Path
    where: Coordinates
    sha256: str
    lines: list[TrajLine] = field(default_factory=list)
    shots: dict[str, Shot] = field(default_factory=dict)
    score: float | None = None
    has_result: bool = False
    error: str | None = None  # the {"Error": ...} line traj.jsonl ends with, when it has one
    instruction: str | None = None
    runtime_log: bytes | None = None
    recording: bytes | None = None
    skipped: list[str] = field(default_factory=list)


def find_examples(root: Path) -> tuple[list[tuple[Path, Coordinates]], list[str]]:
    """Every example folder under ``root`` (``root`` itself when it is one), with where each
    sits, and one line per entry skipped (a symlink, a FIFO, a folder too deep)."""
    found: list[tuple[Path, Coordinates]] = []
    skipped: list[str] = []
    base = root.absolute().parts

    def walk(path: Path, depth: int) -> None:
        if _is_example(path):
            found.append((path, _coordinates(base, path.relative_to(root).parts)))
            return
        if depth >= _MAX_DEPTH:
            skipped.append(f"{_rel(root, path)}: skipped (deeper than OSWorld's layout)")
            return
        try:
            entries = sorted(path.iterdir())
        except OSError:
            return
        for entry in entries:
            reason = unreadable(entry)
            if reason is not None:
                skipped.append(f"{_rel(root, entry)}: skipped ({reason})")
            elif entry.is_dir() and not (depth == 0 and entry.name == "summary"):
                walk(entry, depth + 1)

    walk(root, 0)
    return found, skipped


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() or "."


def _is_example(path: Path) -> bool:
    return any(_regular(path / name) for name in _MARKERS)


def _regular(path: Path) -> bool:
    return path.is_file() and unreadable(path) is None


def _coordinates(base: tuple[str, ...], relative: tuple[str, ...]) -> Coordinates:
    """The five coordinates of an example at ``base + relative``: the observation type is the
    last folder of that name with room for a model, a domain and an id after it."""
    parts = [*base, *relative]
    for index in range(len(parts) - 4, 0, -1):
        if parts[index] in OBSERVATION_TYPES:
            return Coordinates(
                parts[index - 1], parts[index], "/".join(parts[index + 1 : -2]), *parts[-2:]
            )
    padded = ["", "", "", "", *parts][-5:]
    return Coordinates(*padded)


def _read_capped(path: Path, kind: str, label: str, skipped: list[str]) -> bytes | None:
    """A regular file's bytes, or None with the reason in ``skipped``."""
    reason = unreadable(path)
    if reason is not None:
        skipped.append(f"{label} ({reason})")
        return None
    try:
        size = path.stat().st_size
        if size > _MAX_BYTES[kind]:
            skipped.append(f"{label} (too large: {size} bytes, at most {_MAX_BYTES[kind]})")
            return None
        return read_regular(path)
    except OSError:
        skipped.append(f"{label} (unreadable)")
        return None


def read_example(path: Path, where: Coordinates) -> Example:
    """Read one example folder as far as it goes; never raises for damaged content."""
    example = Example(path, where, folder_sha256(path))
    skipped = example.skipped
    for entry in sorted(path.iterdir()):
        reason = unreadable(entry)
        if reason is not None:
            skipped.append(f"{entry.name} ({reason})")
    if _regular(path / "traj.jsonl"):
        data = _read_capped(path / "traj.jsonl", "traj.jsonl", "traj.jsonl", skipped)
        _read_lines(example, data or b"")
    for entry in sorted(path.iterdir()):
        if _SHOT.fullmatch(entry.name) and _regular(entry):
            _read_shot(example, entry)
    if _regular(path / "result.txt"):
        example.has_result = True
        data = _read_capped(path / "result.txt", "result.txt", "result.txt", skipped)
        if data is not None:
            example.score = _score(data, skipped)
    for name, kind in (("runtime.log", "runtime.log"), ("recording.mp4", "recording.mp4")):
        if _regular(path / name):
            data = _read_capped(path / name, kind, name, skipped)
            if name == "runtime.log":
                example.runtime_log = data
            else:
                example.recording = data
    if _regular(path / "instruction.txt"):
        data = _read_capped(path / "instruction.txt", "instruction.txt", "instruction.txt", skipped)
        if data is not None:
            example.instruction = data.decode("utf-8", "replace").strip() or None
    return example


def traj_responses(path: Path) -> list[str]:
    """The text responses of an example folder's traj.jsonl (to tell the agent before the
    folders are read one by one); damage is left for ``read_example`` to name."""
    example = Example(path, Coordinates("", "", "", "", ""), "")
    if _regular(path / "traj.jsonl"):
        _read_lines(example, _read_capped(path / "traj.jsonl", "traj.jsonl", "", []) or b"")
    return [t for line in example.lines if isinstance(t := line.fields.get("response"), str)]


def _read_lines(example: Example, data: bytes) -> None:
    for number, value in json_objects(data, "traj.jsonl", example.skipped):
        error = value.get("Error")
        if set(value) == {"Error"}:
            example.error = str(error)[:2000] if error is not None else "error"
            continue
        example.lines.append(TrajLine(number, value))


def _read_shot(example: Example, entry: Path) -> None:
    data = _read_capped(entry, "png", entry.name, example.skipped)
    if data is None:
        return
    width, height = png_size(data)
    too_large = over_budget(data)  # the store's one pixel budget, read from the header
    if not (width and height):
        example.skipped.append(f"{entry.name} (not a PNG)")
    elif too_large is not None:
        example.skipped.append(f"{entry.name} ({too_large})")
    else:
        example.shots[entry.name] = Shot(entry.name, data, width, height)


def _score(data: bytes, skipped: list[str]) -> float | None:
    text = data.decode("utf-8", "replace").strip()
    if not text:
        skipped.append("result.txt (empty)")
        return None
    try:
        score = float(text)
    except ValueError:
        skipped.append(f"result.txt (not a number: {text[:40]!r})")
        return None
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        skipped.append(f"result.txt (not a score from 0 to 1: {text[:40]!r})")
        return None
    return score


def read_summary(root: Path, skipped: list[str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """``summary/results.json`` in the result_dir ``root``, by (application, task_id); empty
    when there is none; what could not be read goes to ``skipped``."""
    path = root / "summary" / "results.json"
    if not _regular(path):
        return {}
    data = _read_capped(path, "results.json", "summary/results.json", skipped)
    try:
        entries = json.loads(data) if data is not None else []
    except (ValueError, RecursionError):
        skipped.append("summary/results.json (not JSON)")
        return {}
    if not isinstance(entries, list):
        skipped.append("summary/results.json (not a list)")
        return {}
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        app, task = entry.get("application"), entry.get("task_id")
        if isinstance(app, str) and isinstance(task, str):
            found.setdefault((app, task), []).append(entry)
    return found


def read_task_file(tasks_dir: Path, domain: str, example_id: str) -> dict[str, Any] | None:
    """The OSWorld task file of an example (``examples/<domain>/<id>.json`` under
    ``tasks_dir``, or ``<domain>/<id>.json``), or None when there is none readable."""
    if not (_SAFE_NAME.fullmatch(domain) and _SAFE_NAME.fullmatch(example_id)):
        return None  # never a path built from a name that could climb out
    for candidate in (
        tasks_dir / "examples" / domain / f"{example_id}.json",
        tasks_dir / domain / f"{example_id}.json",
    ):
        if any(unreadable(p) for p in (candidate.parent.parent, candidate.parent, candidate)):
            continue
        if _regular(candidate):
            data = _read_capped(candidate, "task", candidate.name, [])
            try:
                value = json.loads(data) if data is not None else None
            except (ValueError, RecursionError):
                return None
            return value if isinstance(value, dict) else None
    return None
