"""``ownloop import --format osworld``: OSWorld's result folders (``osworld_layout.py``) as events.

One run per (action space, observation type, model) found, each written by one new stream: a
``RunStarted`` marked imported, then per example folder a ``SessionStarted`` (the task: the
example id, the instruction, suite ``osworld:<domain>``), per step the screenshot the model saw
(``step_0.png`` or the screen after the previous step's last action), a ``ModelCalled`` with the
response (``served_by`` "import"), an ``ActionParsed`` by today's parser of the agent, and one
``osworld_line`` evidence per traj.jsonl line (its fields but the response, with the screen after
that action as its blob); then the screen after the last action, ``runtime.log`` and
``recording.mp4`` as blobs, a ``SessionEnded`` and a ``SessionGraded`` (grader ``osworld``, source
"import") with the score of result.txt (else of summary/results.json).

A traj.jsonl line is one executed action: the lines of one ``step_num`` share one response.
The agent is told from the responses (``tell_agent``) unless ``--agent`` names it. Each response
is parsed with the history the recorder would have given, so ``replay --reparse`` of an imported
run lists nothing until the parser or its options change. Re-importing is idempotent: a folder
whose hash is already in its run is skipped.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ownloop.agents import AGENTS
from ownloop.agents.base import Observation, Parsed, PastStep
from ownloop.errors import OwnloopError
from ownloop.store import Store
from ownloop.store import events as E
from ownloop.store.ids import SessionIds, new_id
from ownloop.store.queries import imported_folders, task_attempts
from ownloop.store.seal import refuse_if_sealed
from ownloop.transfer.importer import ImportResult, ResponseParser
from ownloop.transfer.osworld_fields import (
    clean_text,
    ended,
    graded,
    instruction_of,
    plain_json,
    safe_id,
    steps_of,
    visible_name,
)
from ownloop.transfer.osworld_layout import (
    Coordinates,
    Example,
    Shot,
    TrajLine,
    find_examples,
    read_example,
    read_summary,
    read_task_file,
    traj_responses,
)
from ownloop.version import __version__

__all__ = ["OSWORLD_SCREEN", "OsworldImport", "import_osworld", "tell_agent"]

OSWORLD_SCREEN = (1920, 1080)
"""OSWorld's default screen: the size a response is parsed for when a step has no screenshot."""
_OPENCUA = re.compile(r"^\s*##\s*(?:Action|Code)\b", re.MULTILINE)
_UITARS = re.compile(r"^\s*Action:\s*[a-z_]+\(", re.MULTILINE)
_MAX_FIELDS_JSON = 256 << 10
_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]+")


class OsworldImport(NamedTuple):
    """What one OSWorld import did: one ``ImportResult`` per run, and each run's parse rate."""

    runs: list[ImportResult]
    parse_lines: list[str]
    skipped: list[str]  # entries of the tree that were not example folders

    def lines(self) -> list[str]:
        out = list(self.skipped)
        for run, rate in zip(self.runs, self.parse_lines, strict=True):
            out.extend([*run.lines(), rate])
        return out


def tell_agent(responses: Sequence[str]) -> str | None:
    """Whose grammar most responses have: ``opencua`` (``## Action:``/``## Code:`` sections),
    ``uitars`` (``Thought:``/``Action: name(...)``) or ``pyautogui`` (plain pyautogui code);
    None when none of them has any."""
    votes: Counter[str] = Counter()
    for text in responses:
        if _OPENCUA.search(text):
            votes["opencua"] += 1
        elif _UITARS.search(text):
            votes["uitars"] += 1
        elif "pyautogui." in text:
            votes["pyautogui"] += 1
    return votes.most_common(1)[0][0] if votes else None


def import_osworld(
    store: Store,
    directory: str | Path,
    *,
    agent: str | None = None,
    run_id: str | None = None,
    model: str | None = None,
    tasks_dir: str | Path | None = None,
    argv: Sequence[str] = (),
) -> OsworldImport:
    """Import every OSWorld example folder under ``directory``.

    Args:
        store: where to write.
        directory: an OSWorld ``result_dir``, or any folder inside one.
        agent: whose parser reads the responses; None: told from them (``tell_agent``).
        run_id: the run to import into (only when one (action space, observation type, model)
            is found); default ``osworld-<model>[-<observation type>][-<action space>]``.
        model: import only this model's folders (the path under the observation type).
        tasks_dir: OSWorld's ``evaluation_examples``: each example's task file is attached.
        argv: the command line, recorded in ``RunStarted``.

    Raises:
        OwnloopError: no such folder, no example folder in it, an unknown agent or model, or
            ``run_id`` given for several runs.
    """
    root = Path(directory)
    if not root.is_dir():
        raise OwnloopError(f"no folder {root}. Pass an OSWorld result_dir (or a folder in one)")
    if agent is not None and agent not in AGENTS:
        raise OwnloopError(f"unknown agent {agent!r}. Choose one of: {', '.join(sorted(AGENTS))}")
    found, skipped = find_examples(root)
    if not found:
        raise OwnloopError(
            f"no OSWorld example folders in {root}: expected "
            "{action_space}/{observation_type}/{model}/{domain}/{example_id}/ with traj.jsonl"
        )
    groups: dict[tuple[str, str, str], list[tuple[Path, Coordinates]]] = {}
    for path, where in found:
        groups.setdefault((where.action_space, where.observation_type, where.model), []).append(
            (path, where)
        )
    if model is not None:
        models = sorted({key[2] for key in groups})
        groups = {key: value for key, value in groups.items() if key[2] == model}
        if not groups:
            raise OwnloopError(
                f"no folders of model {model!r} in {root}; it has: {', '.join(models)}"
            )
    if run_id is not None and len(groups) > 1:
        names = ", ".join("/".join(key) for key in sorted(groups))
        raise OwnloopError(
            f"{root} holds {len(groups)} runs ({names}): pass --model to import one into "
            f"--run {run_id}, or leave --run out"
        )
    tasks = Path(tasks_dir) if tasks_dir is not None else None
    if tasks is not None and not tasks.is_dir():
        raise OwnloopError(f"no folder {tasks}. Pass OSWorld's evaluation_examples folder")
    summary = _summaries(root, found, skipped)
    runs, rates = [], []
    for key in sorted(groups):
        # One folder in memory at a time (screenshots and recordings add up to gigabytes over
        # a run): the responses alone tell the agent first.
        name = agent or tell_agent([t for path, _ in groups[key] for t in traj_responses(path)])
        if name is None or name not in AGENTS:
            raise OwnloopError(
                f"cannot tell which agent wrote the responses ({'/'.join(key)} in {root}): "
                "pass --agent "
                f"({', '.join(sorted(AGENTS))}) to import them with that agent's parser"
            )
        run = run_id or _run_name(*key)
        writer = _Writer(store, run, name, key[2], tasks)
        runs.append(writer.write(groups[key], summary, root, tuple(argv) or tuple(sys.argv)))
        rates.append(writer.parser.rate_line())
    return OsworldImport(runs, rates, skipped)


def _summaries(
    root: Path, found: Sequence[tuple[Path, Coordinates]], skipped: list[str]
) -> dict[Path, list[dict[str, Any]]]:
    """Each example folder's entries in the summary/results.json of its own result_dir (at or
    below ``root``, never above: import reads nothing outside DIR; else ``root``'s)."""
    read: dict[Path, dict[tuple[str, str], list[dict[str, Any]]]] = {}
    entries: dict[Path, list[dict[str, Any]]] = {}
    for path, where in found:
        up = path.parents[3 + len(where.model.split("/"))] if where.model else root
        result_dir = up if up == root or root in up.parents else root
        if result_dir not in read:
            lines: list[str] = []
            read[result_dir] = read_summary(result_dir, lines)
            place = result_dir.relative_to(root).as_posix()
            skipped.extend(line if place == "." else f"{place}/{line}" for line in lines)
        entries[path] = read[result_dir].get((where.domain, where.example_id), [])
    return entries


def _run_name(action_space: str, observation_type: str, model: str) -> str:
    parts = [model.replace("/", "-") or "model"]
    if observation_type != "screenshot":
        parts.append(observation_type)
    if action_space != "pyautogui":
        parts.append(action_space)
    return "osworld-" + (_UNSAFE.sub("-", "-".join(parts)).strip("-") or "run")[:120]


@dataclass
class _Writer:
    """The events of one run's import."""

    store: Store
    run_id: str
    agent: str
    model: str
    tasks: Path | None
    parser: ResponseParser = field(init=False)  # the agent's, counting the responses it read

    def __post_init__(self) -> None:
        self.parser = ResponseParser(self.agent)

    def write(
        self,
        folders: list[tuple[Path, Coordinates]],
        summary: dict[Path, list[dict[str, Any]]],
        root: Path,
        argv: tuple[str, ...],
    ) -> ImportResult:
        refuse_if_sealed(self.store, self.run_id, "import into another run with --run NAME")
        seen, attempts = (
            imported_folders(self.store, self.run_id),
            task_attempts(self.store, self.run_id),
        )
        counts: Counter[str] = Counter()
        skipped: list[str] = []
        imported = already = 0
        stream = None
        try:
            for path, where in folders:
                example = read_example(path, where)
                if example.sha256 in seen:
                    already += 1
                    continue
                seen.add(example.sha256)
                if stream is None:
                    stream = self.store.stream()
                    stream.append([self._run_started(argv, example, root)])
                entries = summary.get(example.path, [])
                events = self._session(example, root, entries, attempts)
                stream.append(events)
                counts.update(e.status for e in events if isinstance(e, E.SessionEnded))
                imported += 1
                if example.skipped:
                    place = visible_name(path.relative_to(root).as_posix() or path.name)
                    skipped.append(f"{place}: skipped {', '.join(example.skipped)}")
            if stream is not None:
                stream.append([E.RunEnded(at=E.now(), run_id=self.run_id, counts=dict(counts))])
        finally:
            if stream is not None:
                stream.close()
        if stream is not None:
            self.store.sync()
        return ImportResult(self.run_id, imported, already, dict(counts), skipped)

    def _run_started(self, argv: tuple[str, ...], first: Example, root: Path) -> E.RunStarted:
        shots = list(first.shots.values())
        return E.RunStarted(
            at=E.now(),
            run_id=self.run_id,
            argv=tuple(clean_text(a, 4000) for a in argv),
            agent=self.agent,
            agent_settings={"imported": True},
            model=clean_text(self.model, 500),
            viewport=(shots[0].width, shots[0].height) if shots else OSWORLD_SCREEN,
            suite=f"osworld:{clean_text(root.name, 200)}",
            versions=E.Versions(ownloop=__version__, python=sys.version.split()[0]),
        )

    def _session(
        self,
        example: Example,
        root: Path,
        entries: list[dict[str, Any]],
        attempts: dict[str, int],
    ) -> list[E.Event]:
        ids = SessionIds(run_id=self.run_id, session_id=new_id())
        where = example.where
        task_id = safe_id(where.example_id)
        task_file = (
            read_task_file(self.tasks, where.domain, where.example_id) if self.tasks else None
        )
        if self.tasks is not None and task_file is None:
            name = visible_name(f"{where.domain}/{where.example_id}.json")
            example.skipped.append(f"task file {name} (not found)")
        instruction = instruction_of(example, task_file)
        attempt = attempts.get(task_id, 0) + 1
        attempts[task_id] = attempt
        steps = steps_of(example)
        first = next(iter(example.shots.values()), None)
        screen = (first.width, first.height) if first is not None else OSWORLD_SCREEN
        task = E.Task(
            task_id=task_id,
            prompt=instruction,
            start_url="",
            suite=f"osworld:{safe_id(where.domain)}",
        )
        events: list[E.Event] = [
            E.SessionStarted(
                at=E.now(),
                **ids,
                task=task,
                agent=self.agent,
                model=clean_text(self.model, 500),
                attempt=attempt,
                viewport=screen,
            ),
            _evidence(
                ids,
                "imported_folder",
                {
                    "folder": example.path.relative_to(root).as_posix(),
                    "sha256": example.sha256,
                    "summary": "osworld",
                    "where": list(where),
                },
            ),
        ]
        if task_file is not None:
            events.append(_evidence(ids, "osworld_task", task_file))
        history: list[PastStep] = []
        seen = example.shots.get("step_0.png")
        for number, lines in steps:
            events.extend(self._step(ids, example, number, lines, seen, screen, history))
            last = lines[-1].fields.get("screenshot_file")
            seen = example.shots.get(last) if isinstance(last, str) else None
        if seen is not None and steps:
            events.append(self._shot(ids, steps[-1][0] + 1, seen))
        events.extend(self._files(ids, example, entries))
        events.append(ended(ids, example, steps, entries))
        grade = graded(ids, example, entries)
        if grade is not None:
            events.append(grade)
        return events

    def _shot(self, ids: SessionIds, step: int, shot: Shot) -> E.ScreenshotTaken:
        return E.ScreenshotTaken(
            at=E.now(),
            **ids,
            step=step,
            sha256=self.store.put_blob(shot.data),
            width=shot.width,
            height=shot.height,
        )

    def _step(
        self,
        ids: SessionIds,
        example: Example,
        number: int,
        lines: list[TrajLine],
        seen: Shot | None,
        screen: tuple[int, int],
        history: list[PastStep],
    ) -> list[E.Event]:
        events: list[E.Event] = []
        shot_event = self._shot(ids, number, seen) if seen is not None else None
        if shot_event is not None:
            events.append(shot_event)
        size = (seen.width, seen.height) if seen is not None else screen
        response = lines[0].fields.get("response")
        call_id = new_id()
        text = clean_text(response) if isinstance(response, str) else None
        settings = self.parser.agent.settings if self.parser.agent is not None else None
        events.append(
            E.ModelCalled(
                at=E.now(),
                **ids,
                step=number,
                call_id=call_id,
                model=clean_text(self.model, 500),
                response=text,
                served_by="import",
                # The agent's loop acts only on a response that stopped (OpenCUA's call_llm
                # retries until it does), so a response it acted on had finish reason "stop".
                finish_reason="stop" if settings is not None and settings.stop_only else None,
                error=None if text is not None else "the run kept no response text",
            )
        )
        parsed = Parsed()
        if text is not None:
            event = self.parser.parse(ids, number, call_id, text, size, history)
            events.append(event)
            if event.error is None:
                parsed = Parsed(
                    thought=event.thought, actions=event.actions, model_size=event.model_size
                )
        image = E.ImagePart(
            sha256=shot_event.sha256 if shot_event else "", width=size[0], height=size[1]
        )
        history.append(PastStep(Observation(number, image, ""), text or "", parsed))
        for line in lines:
            events.append(self._line(ids, example, line))
        return events

    def _line(self, ids: SessionIds, example: Example, line: TrajLine) -> E.EvidenceCaptured:
        fields = {k: v for k, v in line.fields.items() if k != "response"}
        name = fields.get("screenshot_file")
        shot = example.shots.get(name) if isinstance(name, str) else None
        if isinstance(name, str) and shot is None:
            example.skipped.append(f"{visible_name(name)} (missing)")
        # The line's keys in order: export writes the line back as it was, the response (kept
        # once, in the step's model call) in its place.
        value = plain_json({"line": line.line, "keys": list(line.fields), "fields": fields})
        if len(value) > _MAX_FIELDS_JSON:
            example.skipped.append(f"traj.jsonl line {line.line} fields (over 256 KB: left out)")
            value = plain_json({"line": line.line, "fields": {}, "left_out": True})
        return E.EvidenceCaptured(
            at=E.now(),
            **ids,
            name="osworld_line",
            value_json=value,
            sha256=self.store.put_blob(shot.data) if shot is not None else None,
            media_type="image/png" if shot is not None else "application/json",
            source=f"traj.jsonl line {line.line}",
        )

    def _files(
        self, ids: SessionIds, example: Example, entries: list[dict[str, Any]]
    ) -> list[E.Event]:
        events: list[E.Event] = []
        for name, data, media in (
            ("runtime.log", example.runtime_log, "text/plain"),
            ("recording.mp4", example.recording, "video/mp4"),
        ):
            if data is not None:
                events.append(
                    E.EvidenceCaptured(
                        at=E.now(),
                        **ids,
                        name=f"osworld:{name}",
                        sha256=self.store.put_blob(data),
                        media_type=media,
                        source=name,
                    )
                )
        if len(entries) == 1:
            events.append(_evidence(ids, "osworld_summary", entries[0], "summary/results.json"))
        return events


def _evidence(ids: SessionIds, name: str, value: Any, source: str = "") -> E.EvidenceCaptured:
    return E.EvidenceCaptured(
        at=E.now(), **ids, name=name, source=source, value_json=plain_json(value)
    )
