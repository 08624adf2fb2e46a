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
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from ownloop.errors import OwnloopError
from ownloop.grading import make_grader
from ownloop.store.events import Task
from ownloop.world.browser_evidence import Evidence, capture_error

if TYPE_CHECKING:
    from ownloop.world.browser import BrowserSession

__all__ = ["TasksFileError", "TasksFileSuite", "read_tasks"]

_INLINE_LIMIT = 256 * 1024  # larger capture bodies are stored as blobs
_WHERE = re.compile(r"^(?P<problem>.*?)(?: - at `(?P<path>\$[^`]*)`)?$", re.DOTALL)
_EXPECTED = re.compile(r"^Expected `(?P<wanted>[^`]*)`, got `(?P<got>[^`]*)`$")
_FIELD = re.compile(r"^Object (?P<what>missing required|contains unknown) field `(?P<name>[^`]*)`$")
# What msgspec calls a type, said as a tasks file's author thinks of it.
_WANTED = {
    "object | array": 'a list of tasks (or {"tasks": [...]})',
    "object": "an object",
    "array": "a list",
    "str": "text",
    "bool": "true or false",
    "str | object | null": 'a grader spec (text, or an object with a "type")',
}


class TasksFileError(OwnloopError):
    """A tasks file that cannot be read: one line naming the file and the JSON path at fault."""


class _TaskEntry(msgspec.Struct, forbid_unknown_fields=True):
    task_id: str
    prompt: str
    start: str
    needs_login: bool = False
    grader: str | dict[str, Any] | None = None


class _FileEntry(msgspec.Struct, forbid_unknown_fields=True):
    tasks: list[_TaskEntry]
    setup: list[str] = []
    capture: list[str] = []
    grader: str | dict[str, Any] | None = None


_TASK_FIELDS = tuple(_TaskEntry.__struct_fields__)
_FILE_FIELDS = tuple(_FileEntry.__struct_fields__)


def _problem(error: msgspec.ValidationError) -> tuple[str, str]:
    """msgspec's message as (JSON path, problem in the file author's words)."""
    found = _WHERE.match(str(error))
    assert found is not None  # the pattern matches any text
    path, problem = found["path"] or "$", found["problem"]
    expected = _EXPECTED.match(problem)
    if expected:
        wanted = _WANTED.get(expected["wanted"], expected["wanted"])
        return path, f"expected {wanted}, got {_WANTED.get(expected['got'], expected['got'])}"
    field = _FIELD.match(problem)
    if field is None:
        return path, problem[:1].lower() + problem[1:]
    if field["what"] == "missing required":
        return path, f"missing field '{field['name']}'"
    allowed = _TASK_FIELDS if path.endswith("]") else _FILE_FIELDS
    return path, f"unknown field '{field['name']}' (allowed: {', '.join(allowed)})"


def _grader_text(value: str | dict[str, Any] | None, fail: Callable[[str], NoReturn]) -> str | None:
    """The grader as spec text (an object as compact JSON), checked to build a grader."""
    if value is None:
        return None
    text = (
        json.dumps(value, separators=(",", ":"), sort_keys=True)
        if isinstance(value, dict)
        else value.strip()
    )
    if not text:
        fail("expected a grader spec, got empty text")
    try:
        make_grader(text)
    except OwnloopError as error:
        fail(str(error))
    return text


def _expand(url: str, base: str | None, needs_login: bool, fail: Callable[[str], NoReturn]) -> str:
    if "{BASE}" in url:
        if not base:
            fail("uses {BASE}; pass --base URL")
        url = url.replace("{BASE}", (base or "").rstrip("/"))
    return url.replace("{LOGOUT}", "?logout=1" if needs_login else "")


class _Reader:
    """Turns one decoded file into Tasks; every problem names ``file: $.path``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def at(self, path: str) -> Callable[[str], NoReturn]:
        def fail(problem: str) -> NoReturn:
            raise TasksFileError(f"{self.name}: {path}: {problem}")

        return fail

    def text(self, value: str, path: str) -> str:
        if not value.strip():
            self.at(path)("expected non-empty text")
        return value

    def urls(self, values: list[str], path: str) -> list[str]:
        return [self.text(url, f"{path}[{i}]") for i, url in enumerate(values)]


def read_tasks(
    raw: bytes, name: str, base: str | None, suite: str
) -> tuple[list[Task], str | None]:
    """Parse a tasks file's bytes into expanded Tasks and the file-level grader.

    Every task's grader is built once here, so a file that could not be graded is refused before
    a run starts.

    Raises:
        TasksFileError: one line naming the file, the JSON path of the bad field and what is
            wrong, e.g. ``tasks.json: $[3].grader: bad grader spec ...``.
    """
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise TasksFileError(f"{name} is not valid JSON ({error})") from None
    try:
        decoded = msgspec.convert(data, list[_TaskEntry] | _FileEntry, strict=True)
    except msgspec.ValidationError as error:
        path, problem = _problem(error)
        raise TasksFileError(f"{name}: {path}: {problem}") from None
    reader = _Reader(name)
    if isinstance(decoded, _FileEntry):
        entries, prefix = decoded.tasks, "$.tasks"
        setup = reader.urls(decoded.setup, "$.setup")
        capture = reader.urls(decoded.capture, "$.capture")
        default_grader = _grader_text(decoded.grader, reader.at("$.grader"))
    else:
        entries, prefix, setup, capture, default_grader = decoded, "$", [], [], None
    if not entries:
        reader.at(prefix)('expected a non-empty list of tasks (or {"tasks": [...]})')
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for number, entry in enumerate(entries):
        where = f"{prefix}[{number}]"
        task_id = reader.text(entry.task_id, f"{where}.task_id")
        if task_id in seen:
            reader.at(f"{where}.task_id")(f"duplicate {task_id!r} (first at {seen[task_id]})")
        seen[task_id] = where
        login = entry.needs_login
        tasks.append(
            Task(
                task_id=task_id,
                prompt=reader.text(entry.prompt, f"{where}.prompt"),
                start_url=_expand(
                    reader.text(entry.start, f"{where}.start"),
                    base,
                    login,
                    reader.at(f"{where}.start"),
                ),
                suite=suite,
                grader=_grader_text(entry.grader, reader.at(f"{where}.grader")) or default_grader,
                needs_login=login,
                setup_urls=tuple(
                    _expand(u, base, login, reader.at(f"$.setup[{i}]")) for i, u in enumerate(setup)
                ),
                capture_urls=tuple(
                    _expand(u, base, login, reader.at(f"$.capture[{i}]"))
                    for i, u in enumerate(capture)
                ),
            )
        )
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
