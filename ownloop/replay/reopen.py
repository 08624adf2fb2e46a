"""Set a recorded task up again, for a re-execution: its suite, its Task as it reads today.

- MiniWoB (``task.suite == "miniwob"``): the pages are served again, on the recorded port when it
  is free (so URLs, prompts and screenshots match the recording exactly), else on a free one; the
  same task and seed start the same episode.
- A private environment (an installed ``ownloop.environments`` entry point of the suite's name):
  the environment is opened again and the task found by id (its base URL may have moved).
- Anything else (a tasks file): the recorded Task's absolute setup, start and capture URLs.

A replay on a changed world: ``seed`` sets a MiniWoB task up on another seed (the Task's id,
prompt and start URL are the new episode's); ``base`` sets a tasks-file task up against another
deployment (every recorded URL on the start URL's origin moves to ``base``).

``rebase_url`` maps a URL of the recording to where the same page is now (the origin of the start
URL, and the start URL itself), for comparing URLs step by step.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import msgspec

from ownloop.store.events import Task
from ownloop.world.suites import MiniwobSuite, TasksFileSuite
from ownloop.world.suites.environments import environment_names, load_environment
from ownloop.world.suites.miniwob import default_seed, html_dir, serve_static

__all__ = ["Reopened", "reopen_suite", "shared_servers"]


class Reopened(NamedTuple):
    suite: Any  # a Suite (see ownloop.world.suites), entered
    task: Task  # the task as it is set up now
    rebase_url: Callable[[str], str]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _rebaser(old: str, new: str) -> Callable[[str], str]:
    before, after = _origin(old), _origin(new)

    def rebase(url: str) -> str:
        if url == old:
            return new
        if before != after and (url.startswith(before + "/") or url == before):
            return after + url[len(before) :]
        return url

    return rebase


def _serve_miniwob(port: int | None) -> ThreadingHTTPServer:
    # A short poll: shutdown() waits for it, once per replay (0.5 s by default).
    if port:
        try:
            return serve_static(html_dir(), port, poll_interval=0.02)
        except OSError:
            pass  # taken: a free port, and URLs are rebased
    return serve_static(html_dir(), poll_interval=0.02)


def _stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


class _Shared:
    """MiniWoB servers kept for the replays of a batch (``shared_servers``): one per recorded
    port, so that replays at once all serve the recorded URLs, and none starts or stops a server
    per session."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches = 0
        self.servers: dict[int, ThreadingHTTPServer] = {}  # recorded port -> its server


_SHARED = _Shared()


@contextmanager
def shared_servers() -> Iterator[None]:
    """While inside, MiniWoB replays (on any thread) share their pages' servers, which stop on
    leaving the last of these blocks."""
    with _SHARED.lock:
        _SHARED.batches += 1
    try:
        yield
    finally:
        with _SHARED.lock:
            _SHARED.batches -= 1
            done = list(_SHARED.servers.values()) if not _SHARED.batches else []
            if done:
                _SHARED.servers.clear()
        for server in done:
            _stop(server)


@contextmanager
def _served(port: int | None) -> Iterator[ThreadingHTTPServer]:
    """A server of the MiniWoB pages for one replay: a batch's shared one, else its own."""
    with _SHARED.lock:
        if _SHARED.batches and port:
            if port not in _SHARED.servers:
                _SHARED.servers[port] = _serve_miniwob(port)
            shared: ThreadingHTTPServer | None = _SHARED.servers[port]
        else:
            shared = None
    if shared is not None:
        yield shared
        return
    own = _serve_miniwob(port)
    try:
        yield own
    finally:
        _stop(own)


class _MiniwobAt(MiniwobSuite):
    """The MiniWoB suite of one task, its pages served at a given base URL."""

    def __init__(self, name: str, base: str, seed: int | None = None, browser: Any = None) -> None:
        super().__init__(name, None if seed is None else str(seed), browser=browser)
        self._fixed_base = base

    @property
    def base(self) -> str:
        return self._fixed_base


@contextmanager
def _miniwob(task: Task, seed: int | None, browser: Any) -> Iterator[Reopened]:
    name = PurePosixPath(urlsplit(task.start_url).path).stem
    with _served(urlsplit(task.start_url).port) as server:
        host, port = server.server_address[:2]
        suite = _MiniwobAt(name, f"http://{host!s}:{port}", seed, browser)
        if seed is not None and seed != task.seed:  # another episode: its own id and prompt
            other = suite.tasks()[0]
            now = msgspec.structs.replace(
                task,
                task_id=other.task_id,
                prompt=other.prompt,
                seed=seed,
                start_url=other.start_url,
            )
        else:
            start = suite.task_url(name, task.seed if task.seed is not None else default_seed(name))
            now = msgspec.structs.replace(task, start_url=start)
        yield Reopened(suite, now, _rebaser(task.start_url, now.start_url))


def _moved(task: Task, base: str) -> Task:
    before, after = _origin(task.start_url), base.rstrip("/")

    def move(url: str) -> str:
        return after + url[len(before) :] if url == before or url.startswith(before + "/") else url

    return msgspec.structs.replace(
        task,
        start_url=move(task.start_url),
        setup_urls=tuple(map(move, task.setup_urls)),
        capture_urls=tuple(map(move, task.capture_urls)),
    )


@contextmanager
def _recorded(recorded: Task, base: str | None) -> Iterator[Reopened]:
    # A tasks file of this one task, with the recorded (absolute) URLs, or moved to ``base``:
    # the tasks-file suite then sets it up and captures its evidence as when it was recorded.
    task = _moved(recorded, base) if base else recorded
    entry = {
        "task_id": task.task_id,
        "prompt": task.prompt,
        "start": task.start_url,
        "needs_login": task.needs_login,
    }
    body = {"setup": list(task.setup_urls), "capture": list(task.capture_urls), "tasks": [entry]}
    with tempfile.TemporaryDirectory(prefix="ownloop-replay-") as folder:
        path = Path(folder) / "task.json"
        path.write_text(json.dumps(body), encoding="utf-8")
        with TasksFileSuite(path, name=task.suite or None) as suite:
            yield Reopened(suite, task, _rebaser(recorded.start_url, task.start_url))


@contextmanager
def _environment(task: Task) -> Iterator[Reopened]:
    with load_environment(task.suite, None) as suite:
        now = {t.task_id: t for t in suite.tasks()}.get(task.task_id, task)
        yield Reopened(suite, now, _rebaser(task.start_url, now.start_url))


@contextmanager
def reopen_suite(
    task: Task, *, seed: int | None = None, base: str | None = None, browser: Any = None
) -> Iterator[Reopened]:
    """The suite to set ``task`` up again with, entered; left (servers stopped) on exit.

    Args:
        task: the recorded task.
        seed: (MiniWoB) set up this seed of the task instead.
        base: (a tasks file, or an environment's recorded URLs) the deployment to use instead.
        browser: a Chromium to read another seed's prompt with (else one is launched).
    """
    if task.world == "desktop":  # an OSWorld task: its recorded JSON, its folder's local files
        from ownloop.world.osworld import OsworldSuite

        with OsworldSuite.of_task(task) as suite:
            yield Reopened(suite, task, lambda url: url)
    elif task.suite == "miniwob":
        with _miniwob(task, seed, browser) as reopened:
            yield reopened
    elif (
        not base
        and task.suite
        and not task.suite.startswith("tasks:")
        and task.suite in environment_names()
    ):
        with _environment(task) as reopened:
            yield reopened
    else:
        with _recorded(task, base) as reopened:
            yield reopened
