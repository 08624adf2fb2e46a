"""Set a recorded task up again, for a re-execution: its suite, its Task as it reads today.

- MiniWoB (``task.suite == "miniwob"``): the pages are served again, on the recorded port when it
  is free (so URLs, prompts and screenshots match the recording exactly), else on a free one; the
  same task and seed start the same episode.
- A private environment (an installed ``ownloop.environments`` entry point of the suite's name):
  the environment is opened again and the task found by id (its base URL may have moved).
- Anything else (a tasks file): the recorded Task's absolute setup, start and capture URLs.

``rebase_url`` maps a URL of the recording to where the same page is now (only the origin of the
start URL can change), for comparing URLs step by step.
"""

from __future__ import annotations

import functools
import json
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import msgspec

from ownloop.recorder.suites import MiniwobSuite, TasksFileSuite
from ownloop.recorder.suites.environments import environment_names, load_environment
from ownloop.recorder.suites.miniwob import default_seed, html_dir
from ownloop.store.events import Task

__all__ = ["Reopened", "reopen_suite"]


class Reopened(NamedTuple):
    suite: Any  # a Suite (see ownloop.recorder.suites), entered
    task: Task  # the task as it is set up now
    rebase_url: Callable[[str], str]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _rebaser(old: str, new: str) -> Callable[[str], str]:
    before, after = _origin(old), _origin(new)
    if before == after:
        return lambda url: url
    return lambda url: after + url[len(before):] if url.startswith(before + "/") or \
        url == before else url


class _Quiet(SimpleHTTPRequestHandler):
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass


def _serve_miniwob(port: int | None) -> ThreadingHTTPServer:
    handler = functools.partial(_Quiet, directory=str(html_dir()))
    server: ThreadingHTTPServer | None = None
    if port:
        try:
            server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            server = None  # taken: a free port, and URLs are rebased
    if server is None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="miniwob-replay", daemon=True).start()
    return server


class _MiniwobAt(MiniwobSuite):
    """The MiniWoB suite of one task, its pages served at a given base URL."""

    def __init__(self, name: str, base: str) -> None:
        super().__init__(name)
        self._fixed_base = base

    @property
    def base(self) -> str:
        return self._fixed_base


@contextmanager
def _miniwob(task: Task) -> Iterator[Reopened]:
    name = PurePosixPath(urlsplit(task.start_url).path).stem
    server = _serve_miniwob(urlsplit(task.start_url).port)
    try:
        host, port = server.server_address[:2]
        suite = _MiniwobAt(name, f"http://{host!s}:{port}")
        start = suite.task_url(name, task.seed if task.seed is not None else default_seed(name))
        yield Reopened(suite, msgspec.structs.replace(task, start_url=start),
                       _rebaser(task.start_url, start))
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _recorded(task: Task) -> Iterator[Reopened]:
    # A tasks file of this one task, with the recorded (absolute) URLs: the tasks-file suite
    # then sets it up and captures its evidence exactly as when it was recorded.
    entry = {"task_id": task.task_id, "prompt": task.prompt, "start": task.start_url,
             "needs_login": task.needs_login}
    body = {"setup": list(task.setup_urls), "capture": list(task.capture_urls), "tasks": [entry]}
    with tempfile.TemporaryDirectory(prefix="ownloop-replay-") as folder:
        path = Path(folder) / "task.json"
        path.write_text(json.dumps(body), encoding="utf-8")
        with TasksFileSuite(path, name=task.suite or None) as suite:
            yield Reopened(suite, task, lambda url: url)


@contextmanager
def _environment(task: Task) -> Iterator[Reopened]:
    with load_environment(task.suite, None) as suite:
        now = {t.task_id: t for t in suite.tasks()}.get(task.task_id, task)
        yield Reopened(suite, now, _rebaser(task.start_url, now.start_url))


@contextmanager
def reopen_suite(task: Task) -> Iterator[Reopened]:
    """The suite to set ``task`` up again with, entered; left (servers stopped) on exit."""
    if task.suite == "miniwob":
        with _miniwob(task) as reopened:
            yield reopened
    elif task.suite and not task.suite.startswith("tasks:") and \
            task.suite in environment_names():
        with _environment(task) as reopened:
            yield reopened
    else:
        with _recorded(task) as reopened:
            yield reopened
