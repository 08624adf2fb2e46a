"""OSWorld task files as ownloop tasks: ``--suite osworld:DIR[#domain[/id]]``.

``DIR`` holds OSWorld's layout (``examples/<domain>/<id>.json`` and an index such as
``test_all.json`` mapping each domain to its ids; without an index every file under
``examples/`` is a task). Tasks are named as OSWorld's results name them, and as ``import
--format osworld`` names an imported run's: the task id is the example's id (OSWorld's ids are
UUIDs, unique across domains; a folder that has one id in two domains is refused), the suite
``osworld:<domain>`` (what ``compare --by-domain`` groups by). The folder is kept in
``Task.source_dir`` (a replay uploads its local files from there); the prompt is the task's
``instruction``; its whole JSON is kept in ``Task.source_json`` so the session records exactly
what ran. Every task is checked before the run starts: a setup step (``config`` or the
evaluator's ``postconfig``) of a type ownloop cannot run refuses the run in one line that names
the task (``domain/id``) and the step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ownloop.errors import OwnloopError
from ownloop.store.events import Task

__all__ = ["SETUP_TYPES", "OsworldTaskError", "load_tasks", "task_json"]

# Setup step types ownloop runs through the server (ownloop.world.osworld.setup).
SETUP_TYPES = frozenset(
    {"launch", "open", "execute", "command", "sleep", "activate_window", "close_window"}
    | {"download", "upload"}
)
_INDEXES = ("test_all.json", "test_small.json")


class OsworldTaskError(OwnloopError):
    """An OSWorld task folder or file ownloop cannot run."""


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise OsworldTaskError(f"cannot read OSWorld file {path}: {error}") from None


def _index(root: Path) -> dict[str, list[str]]:
    for name in _INDEXES:
        if (root / name).is_file():
            data = _read(root / name)
            if not isinstance(data, dict) or not all(
                isinstance(ids, list) and all(isinstance(i, str) for i in ids)
                for ids in data.values()
            ):
                raise OsworldTaskError(f"{root / name} is not a map of domain to a list of ids")
            return {str(domain): list(ids) for domain, ids in data.items()}
    examples = root / "examples"
    if not examples.is_dir():
        raise OsworldTaskError(
            f"no OSWorld tasks in {root}: expected examples/<domain>/<id>.json and test_all.json"
        )
    return {
        d.name: sorted(p.stem for p in d.glob("*.json"))
        for d in sorted(examples.iterdir())
        if d.is_dir()
    }


def _check(task_id: str, data: Any) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("instruction"), str):
        raise OsworldTaskError(f"OSWorld task {task_id} has no instruction")
    evaluator = data.get("evaluator")
    if not isinstance(evaluator, dict) or "func" not in evaluator:
        raise OsworldTaskError(f"OSWorld task {task_id} has no evaluator func")
    steps = [*(data.get("config") or []), *(evaluator.get("postconfig") or [])]
    for step in steps:
        kind = step.get("type") if isinstance(step, dict) else None
        if kind not in SETUP_TYPES:
            raise OsworldTaskError(
                f"OSWorld task {task_id} has a setup step of type {str(kind)[:40]!r} that ownloop "
                f"cannot run (it runs {', '.join(sorted(SETUP_TYPES))}); leave the task out "
                "with #domain/id"
            )


def load_tasks(argument: str) -> tuple[Path, list[Task]]:
    """The folder and its selected tasks, for ``osworld:DIR[#domain[/id]]``.

    Raises:
        OsworldTaskError: no such folder, a selector that matches nothing, a task ownloop
            cannot run.
    """
    folder, _, selector = argument.partition("#")
    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise OsworldTaskError(f"no OSWorld task folder {folder!r}. Give --suite osworld:DIR")
    domain, _, only = selector.partition("/")
    tasks = []
    domains: dict[str, str] = {}  # task id -> its domain, for ids in two domains
    for name, ids in _index(root).items():
        for task_id in ids:
            other = domains.setdefault(task_id, name)
            if other != name:
                raise OsworldTaskError(
                    f"OSWorld task id {task_id!r} is in domains {other} and {name} of {root}: "
                    "ownloop names a task by its id, as OSWorld does; give each task its own id"
                )
            if (domain and name != domain) or (only and task_id != only):
                continue
            path = root / "examples" / name / f"{task_id}.json"
            data = _read(path)
            _check(f"{name}/{task_id}", data)
            tasks.append(
                Task(
                    task_id=task_id,
                    prompt=data["instruction"],
                    start_url="",
                    suite=f"osworld:{name}",
                    source_dir=str(root),
                    grader="osworld",
                    world="desktop",
                    source_json=json.dumps(data, sort_keys=True, separators=(",", ":")),
                )
            )
    if not tasks:
        raise OsworldTaskError(f"no OSWorld task matches '#{selector}' in {root}")
    return root, tasks


def task_json(task: Task) -> dict[str, Any]:
    """The OSWorld task a Task was made from."""
    data = json.loads(task.source_json) if task.source_json else {}
    return data if isinstance(data, dict) else {}
