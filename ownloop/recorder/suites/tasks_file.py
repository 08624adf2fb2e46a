"""The ``--tasks FILE`` suite: tasks from a JSON file, set up and captured through URLs.

The file is a list of tasks, or an object ``{"setup": [...], "capture": [...], "grader": ...,
"tasks": [...]}``. A task is ``{"task_id", "prompt", "start", "needs_login"?, "grader"?}``.
In every URL ``{BASE}`` becomes ``--base`` and ``{LOGOUT}`` becomes ``?logout=1`` for a task that
``needs_login`` (else nothing). ``setup`` URLs are opened in order before the start page; the JSON
bodies of ``capture`` URLs, read with the session's cookies, are the suite's evidence. A grader
given as an object is kept as compact JSON text; a task without one uses the file's ``grader``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ownloop.recorder.evidence import Evidence, capture_error
from ownloop.store.errors import OwnloopError
from ownloop.store.events import Task

if TYPE_CHECKING:
    from ownloop.recorder.browser import BrowserSession

__all__ = ["TasksFileSuite", "read_tasks"]

_TASK_FIELDS = ("task_id", "prompt", "start", "needs_login", "grader")
_FILE_FIELDS = ("setup", "capture", "grader", "tasks")
_INLINE_LIMIT = 256 * 1024  # larger capture bodies are stored as blobs


class TasksFileError(OwnloopError):
    pass


def _grader_text(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    raise TasksFileError(f"{where}: field 'grader' must be a grader spec string or an object")


def _urls(value: Any, where: str, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(u, str) and u for u in value):
        raise TasksFileError(f"{where}: field '{field}' must be a list of URLs")
    return value


def _expand(url: str, base: str | None, needs_login: bool, where: str, field: str) -> str:
    if "{BASE}" in url:
        if not base:
            raise TasksFileError(f"{where}: field '{field}' uses {{BASE}}; pass --base URL")
        url = url.replace("{BASE}", base.rstrip("/"))
    return url.replace("{LOGOUT}", "?logout=1" if needs_login else "")


def read_tasks(
    raw: bytes, name: str, base: str | None, suite: str
) -> tuple[list[Task], str | None]:
    """Parse a tasks file's bytes into expanded Tasks and the file-level grader.

    Raises:
        TasksFileError: one line naming the file, the task and the field that is wrong.
    """
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise TasksFileError(f"{name} is not valid JSON ({error})") from None
    setup: list[str] = []
    capture: list[str] = []
    default_grader: str | None = None
    if isinstance(data, dict):
        unknown = sorted(set(data) - set(_FILE_FIELDS))
        if unknown:
            raise TasksFileError(
                f"{name}: unknown field '{unknown[0]}' (allowed: {', '.join(_FILE_FIELDS)})"
            )
        setup = _urls(data.get("setup"), name, "setup")
        capture = _urls(data.get("capture"), name, "capture")
        default_grader = _grader_text(data.get("grader"), name)
        data = data.get("tasks")
    if not isinstance(data, list) or not data:
        raise TasksFileError(f'{name}: expected a non-empty list of tasks (or {{"tasks": [...]}})')
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for number, item in enumerate(data, 1):
        where = f"{name}: task #{number}"
        if not isinstance(item, dict):
            raise TasksFileError(f"{where} is not an object")
        task_id = item.get("task_id")
        if not isinstance(task_id, str) or not task_id.strip():
            raise TasksFileError(f"{where}: field 'task_id' must be a non-empty string")
        where = f"{name}: task {task_id!r}"
        if task_id in seen:
            first = seen[task_id]
            raise TasksFileError(f"{where}: duplicate task_id (tasks #{first} and #{number})")
        seen[task_id] = number
        unknown = sorted(set(item) - set(_TASK_FIELDS))
        if unknown:
            raise TasksFileError(
                f"{where}: unknown field '{unknown[0]}' (allowed: {', '.join(_TASK_FIELDS)})"
            )
        for field in ("prompt", "start"):
            if not isinstance(item.get(field), str) or not item[field].strip():
                raise TasksFileError(f"{where}: field '{field}' must be a non-empty string")
        needs_login = item.get("needs_login", False)
        if not isinstance(needs_login, bool):
            raise TasksFileError(f"{where}: field 'needs_login' must be true or false")
        tasks.append(Task(
            task_id=task_id,
            prompt=item["prompt"],
            start_url=_expand(item["start"], base, needs_login, where, "start"),
            suite=suite,
            grader=_grader_text(item.get("grader"), where) or default_grader,
            needs_login=needs_login,
            setup_urls=tuple(_expand(u, base, needs_login, where, "setup") for u in setup),
            capture_urls=tuple(_expand(u, base, needs_login, where, "capture") for u in capture),
        ))
    return tasks, default_grader


class TasksFileSuite:
    """Tasks from a JSON file (see the module docstring).

    Args:
        path: the tasks file.
        base: what ``{BASE}`` becomes (``--base``).
        serve: for environments that run their own server: a callable returning a context
            manager that starts the server and yields its base URL; it is entered on first use
            and left by ``__exit__``. Then ``base`` must be None.
        name: the suite's name (default ``tasks:<file name>``).
    """

    def __init__(
        self,
        path: str | Path,
        base: str | None = None,
        *,
        serve: Callable[[], AbstractContextManager[str]] | None = None,
        name: str | None = None,
    ) -> None:
        self.path = Path(path)
        try:
            self._raw = self.path.read_bytes()
        except OSError as error:
            raise TasksFileError(f"cannot read tasks file {path}: {error.strerror}") from None
        self.name = name or f"tasks:{self.path.name}"
        self.tasks_sha256 = hashlib.sha256(self._raw).hexdigest()
        self._base = base
        self._serve = serve
        self._server: AbstractContextManager[str] | None = None
        # Parse now so a bad file fails before any browser starts (a served environment's
        # {BASE} is not known yet: its server starts on first use).
        check_base = "http://served.invalid" if serve is not None else base
        _, grader = read_tasks(self._raw, self.path.name, check_base, self.name)
        self.default_grader = grader or "none"
        self._tasks: dict[str, Task] | None = None

    def __enter__(self) -> TasksFileSuite:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.__exit__(None, None, None)

    def _current(self) -> dict[str, Task]:
        if self._tasks is None:
            if self._serve is not None and self._server is None:
                self._server = self._serve()
                self._base = self._server.__enter__()
            tasks, _ = read_tasks(self._raw, self.path.name, self._base, self.name)
            self._tasks = {task.task_id: task for task in tasks}
        return self._tasks

    def tasks(self) -> list[Task]:
        """The file's tasks, URLs expanded."""
        return list(self._current().values())

    def prepare(self, session: BrowserSession, task: Task) -> None:
        """Open the task's setup URLs in order, then its start page.

        A task of this file is set up from today's expansion (a served environment's base URL
        may have changed since it was recorded); any other task from its own URLs.
        """
        task = self._current().get(task.task_id, task)
        for url in task.setup_urls:
            session.goto(url)
        session.goto(task.start_url)

    def capture(self, session: BrowserSession, task: Task) -> list[Evidence]:
        """The JSON body of each capture URL, read with the session's cookies."""
        task = self._current().get(task.task_id, task)
        pieces: list[Evidence] = []
        for url in task.capture_urls:
            try:
                fetched = session.fetch(url)
            except OwnloopError as error:
                pieces.append(capture_error("capture", error, url))
                continue
            if not 200 <= fetched.status < 300:
                pieces.append(capture_error("capture", f"HTTP {fetched.status}", url))
                continue
            try:
                text = fetched.body.decode()
                json.loads(text)
            except (UnicodeDecodeError, json.JSONDecodeError):
                kind = fetched.content_type or "application/octet-stream"
                pieces.append(Evidence("capture", data=fetched.body, media_type=kind, source=url))
                continue
            if len(fetched.body) > _INLINE_LIMIT:
                pieces.append(Evidence("capture", data=fetched.body, source=url))
            else:
                pieces.append(Evidence("capture", value_json=text, source=url))
        return pieces
