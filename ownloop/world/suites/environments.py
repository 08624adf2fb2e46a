"""Private environments, plugged in through the ``ownloop.environments`` entry-point group.

An environment is a package that declares, in its ``pyproject.toml``::

    [project.entry-points."ownloop.environments"]
    shop = "shop_bench.ownloop:environment"

and whose callable returns a Suite (see ``ownloop.world.suites.Suite``)::

    def environment(argument: str | None, *, base: str | None, seeds: str | None) -> Suite: ...

``ownloop record ... --suite shop:checkout-*`` then calls it with ``argument="checkout-*"``. An
environment that starts its own server and has its tasks in a tasks file returns
:func:`served_tasks`: the server starts on first use, its base URL fills ``{BASE}``, and it
stops when the recorder leaves the suite::

    @contextmanager
    def serve():
        server = start_shop()            # the environment's own server
        try:
            yield server.url              # its base URL
        finally:
            server.stop()

    def environment(argument, *, base, seeds):
        return served_tasks(Path(__file__).with_name("tasks.json"), serve, name="shop")
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from ownloop.errors import OwnloopError
from ownloop.world.suites.tasks_file import TasksFileSuite

__all__ = ["GROUP", "environment_names", "load_environment", "served_tasks"]

GROUP = "ownloop.environments"


class EnvironmentNotFound(OwnloopError):
    pass


def _entry_points() -> dict[str, EntryPoint]:
    return {point.name: point for point in entry_points(group=GROUP)}


def environment_names() -> list[str]:
    """The names of the installed environments."""
    return sorted(_entry_points())


def load_environment(
    name: str, argument: str | None, *, base: str | None = None, seeds: str | None = None
) -> Any:
    """The Suite of the installed environment ``name``.

    Raises:
        OwnloopError: no such environment, or it failed to load.
    """
    point = _entry_points().get(name)
    if point is None:
        found = ", ".join(environment_names()) or "none installed"
        raise EnvironmentNotFound(
            f"unknown suite {name!r}. Use miniwob[:GLOB], --tasks FILE, or install a package "
            f"with an '{GROUP}' entry point (found: {found})"
        )
    try:
        factory = point.load()
    except (ImportError, AttributeError) as error:
        message = f"environment {name!r} ({point.value}) failed to load: {error}"
        raise EnvironmentNotFound(message) from None
    return factory(argument, base=base, seeds=seeds)


def served_tasks(
    tasks_file: str | Path,
    serve: Callable[[], AbstractContextManager[str]],
    *,
    name: str | None = None,
) -> TasksFileSuite:
    """A tasks-file suite whose ``{BASE}`` is the URL of a server the environment starts.

    Args:
        tasks_file: the environment's tasks file.
        serve: returns a context manager that starts the server and yields its base URL.
        name: the suite's name (default ``tasks:<file name>``).
    """
    return TasksFileSuite(tasks_file, serve=serve, name=name)
