"""The endpoints of OSWorld's in-VM server protocol, answered by the test desktop.

Each handler takes the ``Desktop`` and the request's parsed body and returns an ``Answer``
(status, body bytes, content type). What the test desktop does differently from a VM:

- ``/execute`` performs pyautogui code through the whitelist interpreter (``operations.py``),
  never as Python. Any other command (the setup steps and getters of task files: an argv list or
  a shell string) runs as a subprocess on the desktop, in its HOME, with a timeout: task files
  are the researcher's, as on a VM, whose server runs every command it is sent.
- Paths in requests (``/file``, ``/setup/upload``, ``/setup/open_file``, ``/list_directory``,
  ``/setup/download_file``) may start with ``~`` or ``/home/user`` (the OSWorld VM's HOME): both
  mean the desktop's own HOME. An argv element starting with ``~/`` is expanded the same way.
- ``/setup/download_file`` fetches only from ``http://127.0.0.1`` or ``http://localhost``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from ownloop.desktopserver.capture import accessibility_tree, screenshot_png, windows
from ownloop.desktopserver.display import Desktop
from ownloop.desktopserver.operations import perform_code, pyautogui_code

__all__ = [
    "Answer",
    "accessibility",
    "activate_window",
    "close_window",
    "download_file",
    "execute",
    "get_file",
    "json_answer",
    "launch",
    "list_directory",
    "open_file",
    "resolve",
    "screen_size",
    "screenshot",
    "text_answer",
    "upload",
    "window_size",
]

_DEFAULT_TIMEOUT_S = 120.0
_MAX_TIMEOUT_S = 600.0
_OPENERS = {".html": "chromium", ".htm": "chromium", ".pdf": "chromium"}
_SETTLED_S = 0.5  # an opened file's window title unchanged this long: the app has loaded it
_OPEN_WAIT_S = 30.0  # Chromium takes 5 s to show a window on two busy cores


class Answer(NamedTuple):
    status: int
    body: bytes
    content_type: str


def json_answer(payload: Any, status: int = 200) -> Answer:
    return Answer(status, json.dumps(payload).encode(), "application/json")


def text_answer(text: str, status: int = 200) -> Answer:
    return Answer(status, text.encode(), "text/plain; charset=utf-8")


def resolve(desktop: Desktop, path: str) -> Path:
    """A request's path on the desktop: ``~`` and ``/home/user`` are the desktop's HOME."""
    home = str(desktop.home)
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif path == "/home/user" or path.startswith("/home/user/"):
        path = home + path[len("/home/user") :]
    return Path(path)


# ---------------------------------------------------------------------- observation


def screenshot(desktop: Desktop) -> Answer:
    return Answer(200, screenshot_png(desktop.env), "image/png")


def accessibility(desktop: Desktop) -> Answer:
    tree = accessibility_tree(desktop.env, desktop.size, desktop.accessibility())
    return json_answer({"AT": tree})


def screen_size(desktop: Desktop) -> Answer:
    width, height = desktop.size
    return json_answer({"width": width, "height": height})


def window_size(desktop: Desktop, form: dict[str, str]) -> Answer:
    name = form.get("app_class_name", "")
    for window in windows(desktop.env):
        if name and name.lower() in window.wm_class.lower():
            return json_answer({"width": window.width, "height": window.height})
    return json_answer({"error": f"no window of class {name!r}"}, 404)


# ---------------------------------------------------------------------- commands


def execute(desktop: Desktop, body: dict[str, Any]) -> Answer:
    """``/execute`` and ``/setup/execute``: pyautogui code performed, anything else run."""
    command = body.get("command")
    timeout = _timeout(body.get("timeout"))
    code = pyautogui_code(command)
    if code is not None:
        done = perform_code(code, desktop.size, desktop.env, timeout)
        return json_answer(
            {"status": "success", "output": "", "error": done.error, "returncode": done.returncode}
        )
    shell = bool(body.get("shell", False))
    run = _command(desktop, command, shell)
    if run is None:
        return json_answer(
            {"status": "error", "message": "command must be a list or a string"}, 400
        )
    if shell and isinstance(run, list):
        run = " ".join(run)
    try:
        result = desktop.run(run, shell=shell, timeout=timeout)
    except subprocess.TimeoutExpired:
        return json_answer(
            {"status": "error", "message": f"the command timed out after {timeout:g} s"}, 500
        )
    except OSError as error:
        return json_answer({"status": "error", "message": str(error)}, 500)
    return json_answer(
        {
            "status": "success",
            "output": result.stdout.decode(errors="replace"),
            "error": result.stderr.decode(errors="replace"),
            "returncode": result.returncode,
        }
    )


def launch(desktop: Desktop, body: dict[str, Any]) -> Answer:
    shell = bool(body.get("shell", False))
    command = _command(desktop, body.get("command"), shell)
    if command is None:
        return text_answer("command must be a list or a string", 400)
    try:
        desktop.launch(command, shell=shell)
    except OSError as error:
        return text_answer(f"could not launch: {error}", 500)
    return text_answer(f"{command} launched successfully")


def _command(desktop: Desktop, command: object, shell: bool) -> list[str] | str | None:
    """A command as OSWorld's server reads one: a string is split on white space unless it goes
    to a shell, a list's ``~/`` arguments are paths in the desktop's home; None: neither."""
    if isinstance(command, str) and not shell:
        command = command.split()
    if isinstance(command, list) and command and all(isinstance(arg, str) for arg in command):
        return [str(resolve(desktop, arg)) if arg.startswith("~/") else arg for arg in command]
    return command if isinstance(command, str) else None


def _timeout(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return min(float(value), _MAX_TIMEOUT_S)
    return _DEFAULT_TIMEOUT_S


# ---------------------------------------------------------------------- windows


def open_file(desktop: Desktop, body: dict[str, Any]) -> Answer:
    """Open a file in the desktop's app for it (the browser for web pages, else the editor) and
    wait until a window with its name appears."""
    raw = body.get("path")
    if not isinstance(raw, str) or not raw:
        return text_answer("path is required", 400)
    path = resolve(desktop, raw)
    if not path.exists():
        return text_answer(f"file not found: {raw}", 404)
    app = _OPENERS.get(path.suffix.lower(), "mousepad")
    desktop.launch([app, str(path)])
    end = time.monotonic() + _OPEN_WAIT_S
    shown: str | None = None  # the title of the window that shows the file
    since = 0.0
    while time.monotonic() < end:
        titles = [w.title for w in windows(desktop.env) if path.stem in w.title]
        title = titles[0] if titles else None
        if title != shown:
            shown, since = title, time.monotonic()
        elif shown is not None and time.monotonic() - since >= _SETTLED_S:
            return text_answer(f"{raw} opened successfully")
        time.sleep(0.1)
    return text_answer(f"{raw} was opened but no window showed its name", 500)


def activate_window(desktop: Desktop, body: dict[str, Any]) -> Answer:
    return _wmctrl_window(desktop, body, "-a", "activated")


def close_window(desktop: Desktop, body: dict[str, Any]) -> Answer:
    return _wmctrl_window(desktop, body, "-c", "closed")


def _wmctrl_window(desktop: Desktop, body: dict[str, Any], flag: str, done: str) -> Answer:
    name = body.get("window_name")
    if not isinstance(name, str) or not name:
        return text_answer("window_name is required", 400)
    options = []
    if body.get("strict"):
        options.append("-F")
    if body.get("by_class"):
        options.append("-x")
    result = subprocess.run(
        ["wmctrl", *options, flag, name],
        env=desktop.env,
        capture_output=True,
        timeout=10,
        check=False,
    )
    if result.returncode != 0:
        return text_answer(f"no window {name!r}", 404)
    return text_answer(f"window {name!r} {done}")


# ---------------------------------------------------------------------- files


def get_file(desktop: Desktop, form: dict[str, str]) -> Answer:
    raw = form.get("file_path", "")
    path = resolve(desktop, raw)
    if not raw or not path.is_file():
        return json_answer({"error": f"file not found: {raw}"}, 404)
    try:
        return Answer(200, path.read_bytes(), "application/octet-stream")
    except OSError as error:
        return json_answer({"error": str(error)}, 500)


def upload(desktop: Desktop, fields: dict[str, bytes]) -> Answer:
    raw = fields.get("file_path", b"").decode(errors="replace")
    if not raw or "file_data" not in fields:
        return text_answer("file_path and file_data are required", 400)
    path = resolve(desktop, raw)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(fields["file_data"])
    return text_answer("File uploaded successfully")


def download_file(desktop: Desktop, body: dict[str, Any]) -> Answer:
    url, raw = body.get("url"), body.get("path")
    if not isinstance(url, str) or not isinstance(raw, str) or not raw:
        return text_answer("url and path are required", 400)
    where = urlsplit(url)
    if where.scheme != "http" or where.hostname not in ("127.0.0.1", "localhost"):
        return text_answer("the test desktop downloads only from http://127.0.0.1 URLs", 400)
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - checked above
            data = response.read()
    except OSError as error:
        return text_answer(f"download failed: {error}", 500)
    path = resolve(desktop, raw)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return text_answer("File downloaded successfully")


def list_directory(desktop: Desktop, body: dict[str, Any]) -> Answer:
    raw = body.get("path")
    if not isinstance(raw, str) or not raw:
        return json_answer({"error": "path is required"}, 400)
    path = resolve(desktop, raw)
    if not path.is_dir():
        return json_answer({"error": f"not a directory: {raw}"}, 404)
    return json_answer({"directory_tree": _tree(path, depth=0)})


def _tree(path: Path, depth: int) -> dict[str, Any]:
    if not path.is_dir() or path.is_symlink():
        return {"type": "file", "name": path.name}
    children = []
    if depth < 8:
        for child in sorted(os.scandir(path), key=lambda entry: entry.name)[:1000]:
            children.append(_tree(Path(child.path), depth + 1))
    return {"type": "directory", "name": path.name, "children": children}
