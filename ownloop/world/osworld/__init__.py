"""``--suite osworld:DIR[#domain[/id]]``: OSWorld's task files, run on a desktop world.

``prepare`` runs the task's ``config`` steps through the desktop's server before the first
screenshot; ``capture`` runs its ``postconfig`` steps and then every getter, and keeps what they
read as evidence (:mod:`.getters`). The grader is ``osworld`` (``ownloop.grading.osworld``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ownloop.errors import OwnloopError
from ownloop.store.events import SessionEnded, Task
from ownloop.world import Evidence
from ownloop.world.desktop import DesktopWorld
from ownloop.world.osworld.getters import read_getters, step_records
from ownloop.world.osworld.setup import run_steps
from ownloop.world.osworld.tasks import OsworldTaskError, load_tasks, task_json

__all__ = ["OsworldSuite", "OsworldTaskError"]


class OsworldSuite:
    """OSWorld tasks of one folder; use as a context manager like every suite."""

    default_grader = "osworld"

    def __init__(self, argument: str) -> None:
        self.argument = argument
        self.root, self._tasks = load_tasks(argument)
        self.name = f"osworld:{argument}"
        digest = hashlib.sha256()
        for task in self._tasks:
            digest.update(task.source_json.encode())
        self.tasks_sha256 = digest.hexdigest()
        # each session's setup records, by its world: repeats of one task may run at once
        self._setup: dict[int, list[dict[str, Any]]] = {}

    @classmethod
    def of_task(cls, task: Task) -> OsworldSuite:
        """The suite of one recorded task, as its session recorded it (a replay's): its setup
        and evaluator from ``task.source_json``, local files from the recorded folder."""
        suite = cls.__new__(cls)
        # before source_dir, a recorded task's suite was osworld:<folder> (its id domain/id)
        suite.argument = task.source_dir or task.suite.removeprefix("osworld:")
        suite.root = Path(suite.argument.partition("#")[0])
        suite._tasks = [task]
        suite.name = task.suite
        suite.tasks_sha256 = hashlib.sha256(task.source_json.encode()).hexdigest()
        suite._setup = {}
        return suite

    def __enter__(self) -> OsworldSuite:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def tasks(self) -> list[Task]:
        return list(self._tasks)

    def _world(self, world: object) -> DesktopWorld:
        if not isinstance(world, DesktopWorld):
            raise OwnloopError("OSWorld tasks run on a desktop: give --desktop URL")
        return world

    def prepare(self, world: object, task: Task) -> None:
        """Run the task's ``config`` steps on the desktop."""
        desktop = self._world(world)
        steps = task_json(task).get("config") or []
        self._setup[id(desktop)] = []
        results = run_steps(desktop.guest, self.root, steps, where="config")
        self._setup[id(desktop)] = step_records("config", results)

    def capture(self, world: object, task: Task, ended: SessionEnded) -> list[Evidence]:
        """The postconfig steps, then every getter's output, as evidence."""
        desktop = self._world(world)
        evaluator = task_json(task).get("evaluator") or {}
        pieces = [
            Evidence("osworld_evaluator", value_json=json.dumps(evaluator, sort_keys=True)),
            Evidence(
                "osworld_outcome",
                value_json=json.dumps({"status": ended.status, "agent_status": ended.agent_status}),
            ),
        ]
        setup = self._setup.pop(id(desktop), [])
        try:
            post = run_steps(
                desktop.guest, self.root, evaluator.get("postconfig") or [], where="postconfig"
            )
            setup += step_records("postconfig", post)
        finally:
            pieces.append(Evidence("osworld_setup", value_json=json.dumps(setup)))
        if evaluator.get("func") != "infeasible":
            pieces.extend(read_getters(desktop.guest, self.root, evaluator))
        return pieces
