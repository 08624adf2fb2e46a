"""Task suites: where tasks come from, how each starts, and what evidence each leaves.

A suite is used as a context manager (it may run servers), then::

    with load_suite(suite="miniwob:click-*") as suite:
        for task in suite.tasks():              # complete Tasks: prompts known, URLs expanded
            suite.prepare(session, task)         # setup URLs, start page, seeded episode
            ...                                  # the agent's steps
            evidence = suite.capture(session, task)

``tasks()`` and ``prepare()`` start a suite's servers on first use; ``__exit__`` stops them.
Kinds: ``--tasks FILE`` (:mod:`.tasks_file`), ``--suite miniwob[:GLOB]`` (:mod:`.miniwob`), and
private environments through the ``ownloop.environments`` entry points (:mod:`.environments`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from ownloop.errors import OwnloopError
from ownloop.store.events import Task
from ownloop.world.browser_evidence import Evidence
from ownloop.world.suites.environments import load_environment
from ownloop.world.suites.miniwob import MiniwobSuite
from ownloop.world.suites.tasks_file import TasksFileSuite

if TYPE_CHECKING:
    from ownloop.world.browser import BrowserSession

__all__ = ["Evidence", "MiniwobSuite", "Suite", "SuiteSource", "TasksFileSuite", "load_suite"]


@runtime_checkable
class Suite(Protocol):
    """What the recorder needs from a task suite."""

    name: str  # e.g. "miniwob", "tasks:tasks.json"
    default_grader: str  # the grader spec of a task that names none ("none": ungraded)
    tasks_sha256: str  # identifies the task definitions, for RunStarted

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...

    def tasks(self) -> list[Task]:
        """Every task, complete (prompt, expanded URLs, seed, grader)."""
        ...

    def prepare(self, session: BrowserSession, task: Task) -> None:
        """Bring a fresh session to the task's start (setup URLs, start page, episode)."""
        ...

    def capture(self, session: BrowserSession, task: Task) -> list[Evidence]:
        """The suite's own end-state evidence (capture URLs, MiniWoB reward)."""
        ...


class SuiteError(OwnloopError):
    pass


def load_suite(
    *,
    suite: str | None = None,
    tasks_file: str | None = None,
    base: str | None = None,
    seeds: str | None = None,
    browser: Any = None,
    chromium: str | None = None,
) -> Any:
    """The suite that ``--suite`` / ``--tasks`` / ``--base`` / ``--seeds`` ask for.

    Args:
        suite: ``miniwob``, ``miniwob:GLOB`` or ``NAME[:ARGUMENT]`` of an installed environment.
        tasks_file: a tasks JSON file (instead of ``suite``).
        base: what ``{BASE}`` becomes in a tasks file.
        seeds: MiniWoB seeds, e.g. ``1,2,10-19`` (default one fixed seed per task).
        browser: (MiniWoB) a Chromium made on this thread to read the utterances with.
        chromium: (MiniWoB) the Chromium to launch for that otherwise.

    Raises:
        OwnloopError: a one-line message saying what to fix.
    """
    if (suite is None) == (tasks_file is None):
        raise SuiteError("pass either --suite NAME or --tasks FILE (exactly one)")
    if tasks_file is not None:
        if seeds is not None:
            raise SuiteError("--seeds applies to --suite miniwob, not to --tasks files")
        return TasksFileSuite(tasks_file, base)
    assert suite is not None
    name, _, argument = suite.partition(":")
    if name == "osworld":
        from ownloop.world.osworld import OsworldSuite

        if base is not None or seeds is not None:
            raise SuiteError("--base and --seeds do not apply to --suite osworld:DIR")
        return OsworldSuite(argument)
    if name == "miniwob":
        if base is not None:
            raise SuiteError("--base applies to --tasks files; miniwob serves its own pages")
        return MiniwobSuite(argument or None, seeds, browser=browser, chromium=chromium)
    return load_environment(name, argument or None, base=base, seeds=seeds)


class SuiteSource(NamedTuple):
    """What ``load_suite`` was given, so another process (a Ray actor) can load the same suite
    (a tasks file's path is absolute: that process has another working directory)."""

    suite: str | None = None
    tasks_file: str | None = None
    base: str | None = None
    seeds: str | None = None

    def absolute(self) -> SuiteSource:
        """The same suite, its tasks file's path made absolute."""
        if self.tasks_file is None:
            return self
        return self._replace(tasks_file=str(Path(self.tasks_file).resolve()))

    def load(self) -> Any:
        """The suite, as ``load_suite`` makes it (use it as a context manager)."""
        return load_suite(
            suite=self.suite, tasks_file=self.tasks_file, base=self.base, seeds=self.seeds
        )
