"""OSWorld's fields checked and mapped to event values: text an event can carry, JSON without
non-finite numbers, ids safe as names, the steps of a traj.jsonl, and how an example ended.

Everything here is a pure function of what ``osworld_layout.read_example`` read.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ownloop.store.events import SessionEnded, SessionGraded, Status, now
from ownloop.store.ids import SessionIds
from ownloop.transfer.osworld_layout import Example, TrajLine

__all__ = [
    "clean_text",
    "ended",
    "graded",
    "instruction_of",
    "plain_json",
    "safe_id",
    "steps_of",
    "visible_name",
]

_MAX_TEXT = 1 << 20
_MAX_STEP = 100_000
_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]+")


def safe_id(name: str) -> str:
    return _UNSAFE.sub("-", name).strip("-")[:200] or "example"


def clean_text(value: str, limit: int = _MAX_TEXT) -> str:
    """Text an event can carry: lone surrogates replaced, cut to ``limit`` characters."""
    return value.encode("utf-8", "replace").decode("utf-8")[:limit]


def _plain(value: Any, depth: int = 0) -> Any:
    """A JSON value with its non-finite numbers as null and nesting cut at 32 levels."""
    if depth > 32:
        return "(nested deeper than 32 levels: left out)"
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    return value


def plain_json(value: Any) -> str:
    return json.dumps(_plain(value), ensure_ascii=True, allow_nan=False)


def instruction_of(example: Example, task_file: dict[str, Any] | None) -> str:
    """The task file's instruction, else what the run kept (instruction.txt, a line's field)."""
    if task_file is not None and isinstance(task_file.get("instruction"), str):
        return clean_text(task_file["instruction"], 20_000)
    if example.instruction:
        return clean_text(example.instruction, 20_000)
    for line in example.lines:
        value = line.fields.get("instruction")
        if isinstance(value, str) and value:
            return clean_text(value, 20_000)
    return ""


def steps_of(example: Example) -> list[tuple[int, list[TrajLine]]]:
    """The lines grouped by step number, in step order; a line whose step_num is not a whole
    number from 1 counts as the step after the one before it."""
    by_step: dict[int, list[TrajLine]] = {}
    previous = 0
    for line in example.lines:
        number = line.fields.get("step_num")
        if not isinstance(number, int) or isinstance(number, bool) or not 0 < number <= _MAX_STEP:
            example.skipped.append(f"traj.jsonl line {line.line} step_num (not a step number)")
            number = previous + 1
        by_step.setdefault(number, []).append(line)
        previous = number
    return sorted(by_step.items())


def _summary_score(entries: list[dict[str, Any]]) -> float | None:
    if len(entries) != 1:
        return None  # none, or several runs' entries for the example: not this folder's word
    score = entries[0].get("score")
    if isinstance(score, int | float) and not isinstance(score, bool) and 0 <= score <= 1:
        return float(score)
    return None


def ended(
    ids: SessionIds,
    example: Example,
    steps: list[tuple[int, list[TrajLine]]],
    entries: list[dict[str, Any]],
) -> SessionEnded:
    last = steps[-1][1][-1].fields if steps else {}
    word = last.get("action") if isinstance(last.get("action"), str) else ""
    message = entries[0].get("err_message") if len(entries) == 1 else None
    error = example.error or (clean_text(message, 2000) if isinstance(message, str) else None)
    finished = example.has_result or _summary_score(entries) is not None
    if error is None and not finished:
        error = _log_error(example.runtime_log)
    status: Status
    if error is not None:
        status = "error"
    elif not finished:
        status = "crashed"  # OSWorld re-runs an example without result.txt
    elif word == "DONE" or (last.get("done") is True and word != "FAIL"):
        status = "finished"
    elif word == "FAIL":
        status = "fail"
    else:
        status = "max_steps"
    return SessionEnded(
        at=now(),
        **ids,
        status=status,
        agent_status=clean_text(word or "", 40),
        steps=len(steps),
        error=error,
    )


def _log_error(log: bytes | None) -> str | None:
    """The last line of runtime.log that names an error or exception, if any."""
    if not log:
        return None
    for line in reversed(log[-65536:].decode("utf-8", "replace").splitlines()):
        if re.search(r"(Error|Exception)\b", line):
            return clean_text(line.strip(), 500)
    return None


def graded(
    ids: SessionIds, example: Example, entries: list[dict[str, Any]]
) -> SessionGraded | None:
    score, source = example.score, "result.txt"
    if score is None and not example.has_result:
        score, source = _summary_score(entries), "summary/results.json"
    if score is None:
        return None
    return SessionGraded(
        at=now(),
        **ids,
        grader="osworld",
        score=score,
        # OSWorld's scores run from 0 to 1 (some tasks give part marks): full marks pass.
        passed=score >= 1.0,
        details=json.dumps({"source": source, "score": score}),
        source="import",
    )


def visible_name(name: str) -> str:
    """A file name from a traj.jsonl line, for a skip line: control characters shown escaped."""
    return clean_text(name, 200).encode("unicode_escape").decode("ascii")
