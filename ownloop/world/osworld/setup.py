"""An OSWorld task's setup steps (``config``, and the evaluator's ``postconfig``), run through
the desktop server's ``/setup/*`` endpoints before the first screenshot (after the last step).

Files for ``download`` and ``upload`` are local: a ``file://`` URL, or a path relative to the
task folder (``download``'s ``url``; ``upload``'s ``local_path``). Their bytes are sent with
``POST /setup/upload``; nothing is fetched from the network. Each step's answer is kept as a
:class:`StepResult` (the suite records them as evidence); a step the server refuses (an HTTP
error) ends the session as an ``error`` naming the step.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

from ownloop.errors import OwnloopError
from ownloop.world.guest import Guest, Reply

__all__ = ["SetupFailed", "StepResult", "run_steps"]

_MAX_SLEEP_S = 60.0


class SetupFailed(OwnloopError):
    """A setup step the desktop server did not carry out."""


class StepResult(NamedTuple):
    type: str
    status: int
    answer: str  # the server's text, clipped


def _local(root: Path, where: str) -> bytes:
    parsed = urlparse(where)
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
    elif parsed.scheme in ("", None):
        path = root / where
    else:
        raise SetupFailed(
            f"setup file {where[:120]!r} is not local: ownloop reads files from the task folder "
            "or file:// URLs, never the network"
        )
    try:
        return path.read_bytes()
    except OSError as error:
        raise SetupFailed(f"cannot read setup file {path}: {error.strerror}") from None


def _step(guest: Guest, root: Path, kind: str, params: dict[str, Any]) -> Reply:
    if kind == "launch":
        payload = {"command": params.get("command"), "shell": bool(params.get("shell", False))}
        return guest.post_json("/setup/launch", payload)
    if kind == "open":
        return guest.post_json("/setup/open_file", {"path": params.get("path")})
    if kind in ("execute", "command"):
        payload = {"command": params.get("command"), "shell": bool(params.get("shell", False))}
        return guest.post_json("/setup/execute", payload)
    if kind in ("activate_window", "close_window"):
        payload = {
            "window_name": params.get("window_name"),
            "strict": bool(params.get("strict", False)),
            "by_class": bool(params.get("by_class", False)),
        }
        return guest.post_json(f"/setup/{kind}", payload)
    if kind == "sleep":
        seconds = float(params.get("seconds", 1))
        time.sleep(min(max(seconds, 0.0), _MAX_SLEEP_S))
        return Reply(200, b"slept")
    if kind in ("download", "upload"):
        last = Reply(200, b"no files")
        for item in params.get("files") or []:
            source = item.get("url") if kind == "download" else item.get("local_path")
            last = guest.upload(str(item.get("path")), _local(root, str(source)))
            if last.status != 200:
                return last
        return last
    raise SetupFailed(f"setup step type {kind!r} is not supported")


def run_steps(guest: Guest, root: Path, steps: list[Any], *, where: str) -> list[StepResult]:
    """Run ``steps`` in order; ``where`` ("config", "postconfig") names them in errors.

    Raises:
        SetupFailed: a step the server answered with an HTTP error, or a file not local.
        WorldLost: the server did not answer.
    """
    results = []
    for number, step in enumerate(steps, 1):
        kind = str(step.get("type"))
        params = step.get("parameters") or {}
        reply = _step(guest, root, kind, params)
        text = reply.body[:500].decode("utf-8", "replace")
        results.append(StepResult(kind, reply.status, text))
        if reply.status != 200:
            raise SetupFailed(
                f"{where} step {number} ({kind}) failed on {guest.url}: HTTP {reply.status} "
                f"{' '.join(text.split())[:200]}"
            )
    return results
