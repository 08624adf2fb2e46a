"""``ownloop export --format osworld``: a run written in OSWorld's result layout.

Each task's latest session becomes ``{out}/{action_space}/{observation_type}/{model}/{domain}/
{example_id}/`` (see ``osworld_layout.py``), so OSWorld's own tools (``show_result.py`` reads the
``result.txt`` files) read ownloop's runs. A session imported from OSWorld is written back as it
came: its folder's place, its traj.jsonl lines field for field (the response from the step's model
call), its screenshots under their names, result.txt, runtime.log and recording.mp4. A session
ownloop recorded gets one traj.jsonl line per step that called the model: ``step_num``,
``action_timestamp`` (``%Y%m%d@%H%M%S%f``, the step's screenshot time), ``action`` (``DONE``,
``FAIL``, or the step's operations), ``response``, ``reward`` 0, ``done``, ``info`` and
``screenshot_file``, the screen after the step saved as ``step_{n}_{timestamp}.png``; the screen
before the first step is ``step_0.png`` and the instruction ``instruction.txt``, as some OSWorld
runners write them. ``summary/results.json`` lists every example.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from ownloop.grading.evidence import read_value
from ownloop.replay.fold import Session, Step, fold
from ownloop.replay.render import actions_text, op_text
from ownloop.store import Store
from ownloop.store.events import EvidenceCaptured, Fail, Finish, now
from ownloop.transfer.batches import ExportResult, blob_or_skip, run_to_export

__all__ = ["export_osworld"]

_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}")
_SHOT_NAME = re.compile(r"step_\d{1,6}(?:_[0-9A-Za-z@._-]{1,40})?\.png")
_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]+")


def export_osworld(store: Store, run_id: str, out: str | Path) -> ExportResult:
    """Write every task of ``run_id`` (its latest session) in OSWorld's layout under ``out``.

    Raises:
        OwnloopError: the run has no sessions, or ``out`` is not a new or empty folder.
    """
    rows, root = run_to_export(store, run_id, out)
    model = _run_model(store, run_id)
    latest: dict[str, str] = {}
    for row in rows:
        latest[row.task_id or row.session_id] = row.session_id  # by task, then attempt
    writer = _Writer(store, root, model)
    for session_id in latest.values():
        writer.session(fold(store.session_events(session_id), session_id))
    summary = root / "summary" / "results.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text(json.dumps(writer.summary, indent=2, ensure_ascii=False) + "\n")
    written = [
        f"{root}: {writer.examples} example folders, {writer.lines} traj.jsonl lines, "
        f"{writer.screens} screenshots; {summary}"
    ]
    return ExportResult(root, written, writer.skipped)


def _run_model(store: Store, run_id: str) -> str:
    rows = store.sql("select model, agent from runs where run_id = $run", {"run": run_id}).rows
    model, agent = rows[0] if rows else ("", "")
    return str(model or agent or "model")


def _part(name: str, default: str) -> str:
    """A folder name: ``name`` when it is a plain name, else with its odd characters dashed."""
    if _PART.fullmatch(name):
        return name
    return _UNSAFE.sub("-", name).strip("-.")[:200] or default


def _stamp(at: datetime) -> str:
    return at.strftime("%Y%m%d@%H%M%S%f")


def _evidence(session: Session, name: str) -> list[EvidenceCaptured]:
    return [item for item in session.evidence if item.name == name]


def _value(item: EvidenceCaptured) -> Any:
    try:
        return read_value(item)
    except ValueError:
        return None


class _Writer:
    def __init__(self, store: Store, root: Path, model: str) -> None:
        self.store = store
        self.root = root
        self.model = model
        self.examples = self.lines = self.screens = 0
        self.skipped: list[str] = []
        self.summary: list[dict[str, Any]] = []

    def session(self, session: Session) -> None:
        where = self._where(session)
        folder = self.root.joinpath(*where)
        if folder.exists():
            self.skipped.append(f"skipped {session.session_id}: {folder} is written already")
            return
        folder.mkdir(parents=True)
        self.examples += 1
        imported = _evidence(session, "osworld_line")
        lines = (
            self._imported(session, imported, folder)
            if imported
            else self._recorded(session, folder)
        )
        (folder / "traj.jsonl").write_text(
            "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        )
        self.lines += len(lines)
        for name in ("runtime.log", "recording.mp4"):
            for item in _evidence(session, f"osworld:{name}"):
                if item.sha256:
                    self._blob(item.sha256, folder / name)
        grade = session.latest_grade
        if grade is not None:
            (folder / "result.txt").write_text(f"{grade.score}\n")
        error = session.outcome.error if session.outcome is not None else None
        entry: dict[str, Any] = {
            "application": where[-2],
            "task_id": where[-1],
            "status": "error" if error else "success",
            "score": grade.score if grade is not None else 0.0,
            "timestamp": (session.started_at or now()).strftime("%Y-%m-%d %H:%M:%S"),
        }
        if error:
            entry["err_message"] = error
        self.summary.append(entry)

    def _where(self, session: Session) -> list[str]:
        """The folder's place: as an import read it, else from the run's model and the task."""
        for item in _evidence(session, "imported_folder"):
            value = _value(item)
            where = value.get("where") if isinstance(value, dict) else None
            if (
                isinstance(where, list)
                and len(where) == 5
                and all(isinstance(w, str) for w in where)
            ):
                *head, model, domain, example = where
                models = [_part(p, "model") for p in model.split("/")]
                return [
                    *(_part(h, "x") for h in head),
                    *models,
                    _part(domain, "domain"),
                    _part(example, "example"),
                ]
        suite = session.task.suite if session.task is not None else ""
        domain = suite.removeprefix("osworld:") if suite.startswith("osworld:") else "browser"
        example = session.task_id or session.session_id
        if suite.startswith("osworld:") and "/" in example:  # recorded before ids were OSWorld's
            domain, example = example.split("/", 1)
        models = [_part(p, "model") for p in (session.model or self.model).split("/")]
        return [
            "pyautogui",
            "screenshot",
            *models,
            _part(domain, "browser"),
            _part(example, "example"),
        ]

    def _imported(
        self, session: Session, items: list[EvidenceCaptured], folder: Path
    ) -> list[dict[str, Any]]:
        """The traj.jsonl lines as the import read them, field for field."""
        responses: dict[int, str | None] = {s.step: s.response for s in session.steps}
        lines = []
        for item in items:
            value = _value(item)
            if not isinstance(value, dict) or not isinstance(value.get("fields"), dict):
                continue
            fields: dict[str, Any] = value["fields"]
            keys = [k for k in value.get("keys") or list(fields) if isinstance(k, str)]
            step = fields.get("step_num")
            response = responses.get(step) if isinstance(step, int) else None
            lines.append({key: response if key == "response" else fields.get(key) for key in keys})
            name = fields.get("screenshot_file")
            if item.sha256 and isinstance(name, str) and _SHOT_NAME.fullmatch(name):
                self._blob(item.sha256, folder / name)
        first = session.steps[0].screenshot if session.steps else None
        if first is not None and first.step == 1:
            self._blob(first.sha256, folder / "step_0.png")  # the screen before the first step
        return lines

    def _recorded(self, session: Session, folder: Path) -> list[dict[str, Any]]:
        """One line per step that called the model, the screen after it as its screenshot."""
        steps = [s for s in session.steps if s.calls]
        shots = {s.step: s.screenshot for s in session.steps if s.screenshot is not None}
        first = shots.get(steps[0].step) if steps else None
        if first is not None:
            self._blob(first.sha256, folder / "step_0.png")
        if session.task is not None and session.task.prompt:
            (folder / "instruction.txt").write_text(session.task.prompt)
        ending = session.outcome is not None and session.outcome.status in ("finished", "fail")
        lines = []
        for index, step in enumerate(steps):
            after = shots.get(step.step + 1)
            at = after.at if after is not None else step.calls[-1].at
            name = f"step_{step.step}_{_stamp(at)}.png" if after is not None else None
            if after is not None and name is not None:
                self._blob(after.sha256, folder / name)
            last = index == len(steps) - 1
            lines.append(
                {
                    "step_num": step.step,
                    "action_timestamp": _stamp(at),
                    "action": _action(step),
                    "response": step.response,
                    "reward": 0,
                    "done": last and ending,
                    "info": {},
                    "screenshot_file": name,
                }
            )
        return lines

    def _blob(self, sha256: str, target: Path) -> None:
        data = blob_or_skip(self.store, sha256, target, self.skipped)
        if data is None:
            return
        target.write_bytes(data)
        self.screens += target.suffix == ".png"


def _action(step: Step) -> str:
    """What OSWorld would list as the step's action: DONE, FAIL, or what was done."""
    if any(isinstance(a, Finish) for a in step.actions):
        return "DONE"
    if any(isinstance(a, Fail) for a in step.actions):
        return "FAIL"
    if step.effects:
        return "; ".join(op_text(e.op) for e in step.effects)
    return actions_text(step.actions) if step.actions else ""
