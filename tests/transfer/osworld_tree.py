"""OSWorld result trees written the way OSWorld's ``lib_run_single.py`` writes them (our own data).

Two models over the same three examples, one per domain: UI-TARS-style responses under the model
path ``ByteDance-Seed/UI-TARS-1.5-7B`` (two folders, as OSWorld makes of a model name with a
slash) and OpenCUA-style responses under ``opencua-7b``; plus, for OpenCUA, a damaged example (a
line that is not JSON, a screenshot missing, an empty result.txt). Screens are small PNGs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from tests.transfer.conftest import png

SCREEN = (320, 180)
UITARS_MODEL = "ByteDance-Seed/UI-TARS-1.5-7B"
OPENCUA_MODEL = "opencua-7b"
EXAMPLES = {  # domain -> example id
    "chrome": "0d8b7de3-e8de-4d86-b9fd-dd2dce58a217",
    "gimp": "7a4deb26-d57d-4ea9-9a73-630f66a7b568",
    "os": "94d95f96-9699-4208-98ba-3c3119edf9c2",
}
DAMAGED = ("os", "5812b315-e7bd-4265-b51f-863c02174c28")
INSTRUCTIONS = {
    "chrome": "Make Bing the default search engine.",
    "gimp": "Make the picture's background transparent.",
    "os": "Open a terminal in the home folder.",
}
# Scores per model and domain: chrome flips between the two models.
SCORES = {
    UITARS_MODEL: {"chrome": 1.0, "gimp": 0.0, "os": 1.0},
    OPENCUA_MODEL: {"chrome": 0.0, "gimp": 0.0, "os": 1.0},
}


class Step(NamedTuple):
    response: str
    actions: tuple[str, ...]  # the pyautogui code OSWorld ran, one traj.jsonl line each


def uitars_steps(domain: str) -> list[Step]:
    """UI-TARS-1.5 answers: Thought:/Action: with points in the screen's smart_resize space."""
    second = (
        "Thought: Type the text.\nAction: type(content='bing')"
        if domain == "chrome"
        else "Thought: Press enter.\nAction: hotkey(key='enter')"
    )
    return [
        Step(
            "Thought: Open the menu at the top.\nAction: click(start_box='(100,40)')",
            ("import pyautogui\npyautogui.click(100, 40, button='left')",),
        ),
        Step(second, ("pyautogui.typewrite('bing')", "pyautogui.press('enter')")),
        Step("Thought: It is done.\nAction: finished(content='done')", ("DONE",)),
    ]


def opencua_steps(domain: str) -> list[Step]:
    """OpenCUA answers: ## Thought / ## Action / ## Code sections with a pyautogui block."""

    def block(thought: str, action: str, code: str) -> str:
        return f"## Thought:\n{thought}\n\n## Action:\n{action}\n\n## Code:\n```python\n{code}\n```"

    middle = (
        block("The field is open.", "Type the engine's name.", "pyautogui.write(message='b')")
        if domain == "chrome"
        else block("The menu is open.", "Click the middle.", "pyautogui.click(x=0.5, y=0.5)")
    )
    return [
        Step(
            block("I see the window.", "Click the menu.", "pyautogui.click(x=100, y=40)"),
            ("pyautogui.click(100, 40)",),
        ),
        Step(middle, ("pyautogui.click(60, 90)",)),
        Step(
            block("Finished.", "Stop.", "computer.terminate(status='success')"),
            ("DONE",),
        ),
    ]


def _stamp(at: datetime) -> str:
    return at.strftime("%Y%m%d@%H%M%S%f")


def write_example(
    folder: Path, steps: list[Step], score: float | None, *, colour: int, initial: bool = False
) -> list[str]:
    """One example folder as lib_run_single writes it; returns its screenshot names in order."""
    folder.mkdir(parents=True)
    at = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
    names = []
    lines = []
    if initial:
        (folder / "step_0.png").write_bytes(png((colour, 10, 10), SCREEN))
    shade = 0
    for number, step in enumerate(steps, start=1):
        for action in step.actions:
            at += timedelta(seconds=3, microseconds=1234)
            name = f"step_{number}_{_stamp(at)}.png"
            shade += 20
            (folder / name).write_bytes(png((colour, shade, 40), SCREEN))
            names.append(name)
            done = action in ("DONE", "FAIL")
            lines.append(
                {
                    "step_num": number,
                    "action_timestamp": _stamp(at),
                    "action": action,
                    "response": step.response,
                    "reward": 0,
                    "done": done,
                    "info": {"done": True} if done else {},
                    "screenshot_file": name,
                }
            )
    with (folder / "traj.jsonl").open("w", encoding="utf-8") as file:
        for line in lines:
            file.write(json.dumps(line, ensure_ascii=False) + "\n")
    if score is not None:
        (folder / "result.txt").write_text(f"{score}\n")
    (folder / "runtime.log").write_text("Step 1 ...\nStep 2 ...\n")
    (folder / "recording.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom")
    return names


def write_tree(root: Path, *, damaged: bool = True) -> Path:
    """``root`` as an OSWorld result_dir of both models; returns ``root``."""
    summary: list[dict[str, Any]] = []
    for model, steps_of, colour in (
        (UITARS_MODEL, uitars_steps, 200),
        (OPENCUA_MODEL, opencua_steps, 90),
    ):
        base = root / "pyautogui" / "screenshot" / model
        for domain, example_id in EXAMPLES.items():
            score = SCORES[model][domain]
            write_example(
                base / domain / example_id,
                steps_of(domain),
                score,
                colour=colour,
                initial=model == OPENCUA_MODEL,
            )
            summary.append(
                {
                    "application": domain,
                    "task_id": example_id,
                    "status": "success",
                    "score": score,
                    "timestamp": "2025-06-01 12:00:00",
                }
            )
    if damaged:
        folder = root / "pyautogui" / "screenshot" / OPENCUA_MODEL / DAMAGED[0] / DAMAGED[1]
        names = write_example(folder, opencua_steps("os"), None, colour=30)
        (folder / names[1]).unlink()  # a screenshot missing
        with (folder / "traj.jsonl").open("a", encoding="utf-8") as file:
            file.write('{"step_num": 4, "action": "pyautogui.cl\n')  # a line cut short
        (folder / "result.txt").write_text("")  # empty
    (root / "summary").mkdir()
    (root / "summary" / "results.json").write_text(json.dumps(summary, indent=2))
    return root


def write_tasks(root: Path) -> Path:
    """An evaluation_examples folder with each example's task file."""
    for domain, example_id in EXAMPLES.items():
        folder = root / "examples" / domain
        folder.mkdir(parents=True, exist_ok=True)
        task = {
            "id": example_id,
            "snapshot": domain,
            "instruction": INSTRUCTIONS[domain],
            "source": "test",
            "config": [{"type": "launch", "parameters": {"command": [domain]}}],
            "related_apps": [domain],
            "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line"}},
        }
        (folder / f"{example_id}.json").write_text(json.dumps(task))
    return root
