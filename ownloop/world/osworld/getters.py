"""OSWorld's getters, run through the desktop server at a session's end, kept as evidence.

After the task's ``postconfig`` steps, every getter of the evaluator (``result``, and
``expected`` when it is one) is read once, and each becomes one ``osworld_getter`` evidence
piece; the metric is then a pure function of the evidence (``ownloop.grading.osworld``), so a
regrade needs no desktop. Evidence names:

==================  =========================================================================
``osworld_getter``  one getter's output: ``value_json`` is ``{"role": "result"|"expected",
                    "index", "type", "spec_sha256", "ok", "error", "value", "text"}`` (``text``:
                    the output as UTF-8 when it is text and under 1 MiB; ``value``: a rule's
                    JSON); the raw output is the blob; ``source`` is the spec's sha256
``osworld_evaluator`` the task's evaluator object (``func``, ``options``, ``conj``, ...)
``osworld_outcome`` ``{"status", "agent_status"}`` of the session (``infeasible`` reads it)
``osworld_setup``   each config and postconfig step's ``{"where", "type", "status", "answer"}``
==================  =========================================================================

Getters read: ``vm_file`` (``path``), ``vm_command_line`` / ``vm_command_error`` (``command``,
``shell``), ``accessibility_tree``, ``rule`` (``rules``), ``cloud_file`` and ``cache_file``
when the file is local (a ``file://`` URL or a path in the task folder). Any other getter is
kept as ``ok: false`` with ``error: "unsupported getter: TYPE"``, so the metric says why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ownloop.world import Evidence
from ownloop.world.guest import Guest

__all__ = ["GETTER_TYPES", "read_getters", "spec_sha256"]

GETTER_TYPES = frozenset(
    {"vm_file", "vm_command_line", "vm_command_error", "accessibility_tree", "rule"}
    | {"cloud_file", "cache_file"}
)
_TEXT_LIMIT = 1 << 20


def spec_sha256(spec: object) -> str:
    """The sha256 of a getter spec's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _local_file(root: Path, where: str) -> bytes | None:
    parsed = urlparse(where)
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
    elif not parsed.scheme:
        path = root / where
    else:
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


def _read(guest: Guest, root: Path, spec: dict[str, Any]) -> tuple[bytes | None, Any, str | None]:
    """(raw output, JSON value, error) of one getter."""
    kind = spec.get("type")
    if kind == "rule":
        return None, spec.get("rules"), None
    if kind == "vm_file":
        path = spec.get("path")
        if not isinstance(path, str):
            return None, None, "vm_file with several paths (multi) is not supported"
        data = guest.file(path)
        return data, None, None if data is not None else f"no file {path} on the desktop"
    if kind in ("vm_command_line", "vm_command_error"):
        answer = guest.execute(spec.get("command") or "", shell=bool(spec.get("shell", False)))
        text = answer.output if kind == "vm_command_line" else answer.error
        return text.encode(), None, None
    if kind == "accessibility_tree":
        tree = guest.accessibility()
        return (tree.encode(), None, None) if tree is not None else (None, None, "no tree")
    if kind in ("cloud_file", "cache_file"):
        where = str(spec.get("path") or "")
        data = _local_file(root, where)
        if data is None:
            return None, None, f"{kind} {where[:120]!r} is not a local file in the task folder"
        return data, None, None
    return None, None, f"unsupported getter: {str(kind)[:40]}"


def _specs(value: object) -> list[dict[str, Any] | None]:
    items = value if isinstance(value, list) else [value]
    return [item if isinstance(item, dict) else None for item in items]


def read_getters(guest: Guest, root: Path, evaluator: dict[str, Any]) -> list[Evidence]:
    """One ``osworld_getter`` piece per getter of ``evaluator``, read through ``guest``."""
    pieces = []
    for role in ("result", "expected"):
        for index, spec in enumerate(_specs(evaluator.get(role))):
            if spec is None:
                continue
            data, value, error = _read(guest, root, spec)
            text = None
            if data is not None and len(data) <= _TEXT_LIMIT:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = None
            digest = spec_sha256(spec)
            record = {
                "role": role,
                "index": index,
                "type": spec.get("type"),
                "spec_sha256": digest,
                "ok": error is None,
                "error": error,
                "value": value,
                "text": text,
            }
            pieces.append(
                Evidence(
                    "osworld_getter",
                    value_json=json.dumps(record, ensure_ascii=False),
                    data=data,
                    media_type="application/json",
                    source=digest,
                )
            )
    return pieces


def step_records(where: str, results: Sequence[Any]) -> list[dict[str, Any]]:
    """Setup step results as the ``osworld_setup`` evidence lists them."""
    return [
        {"where": where, "type": r.type, "status": r.status, "answer": r.answer} for r in results
    ]
