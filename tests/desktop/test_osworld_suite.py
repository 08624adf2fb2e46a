"""The desktop suite in OSWorld's task format (tests/desktop/osworld): well formed, every task
scores 0 when nobody acts (its getters' raw values on the untouched start state fail its rule),
and the desktop expert's answers, read back by each agent's own parser and performed on the
test desktop, reach the state the task's rule wants.

The getters and metrics here are a few lines reading raw values (``/execute`` output, ``/file``
bytes) for these tasks only: ownloop's own OSWorld graders live with the desktop world.
"""

from __future__ import annotations

import base64
import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from ownloop.agents import make_agent
from ownloop.modelserver.desktop_expert import TASKS, DesktopExpert
from ownloop.store.events import CallUser, Click, Fail, Finish, Hotkey, TypeText
from tests.desktop.fixtures import TestDesktop

SUITE = Path(__file__).with_name("osworld")
STEP_TYPES = {"launch", "open", "execute", "sleep"}  # all OSWorld setup step types
METRICS = {"exact_match", "check_include_exclude", "compare_text_file", "infeasible"}
GETTERS = {"vm_command_line", "vm_file", "rule"}


def _tasks() -> list[dict[str, Any]]:
    index = json.loads((SUITE / "test_all.json").read_text())
    return [
        json.loads((SUITE / "examples" / domain / f"{task_id}.json").read_text())
        for domain, ids in index.items()
        for task_id in ids
    ]


def test_the_suite_is_well_formed_and_the_expert_knows_every_task() -> None:
    index = json.loads((SUITE / "test_all.json").read_text())
    files = sorted(p.relative_to(SUITE / "examples") for p in SUITE.glob("examples/*/*.json"))
    listed = sorted(Path(domain) / f"{i}.json" for domain, ids in index.items() for i in ids)
    assert files == listed and len(files) >= 5
    tasks = _tasks()
    assert {t["id"] for t in tasks} == {t.id for t in TASKS}
    planned = {t.id: t for t in TASKS}
    for task in tasks:
        assert planned[task["id"]].instruction == task["instruction"]
        assert {step["type"] for step in task["config"]} <= STEP_TYPES
        evaluator = task["evaluator"]
        assert evaluator["func"] in METRICS
        assert planned[task["id"]].infeasible == (evaluator["func"] == "infeasible")
        for getter in (evaluator.get("result"), evaluator.get("expected")):
            assert getter is None or getter["type"] in GETTERS
    apps = {app for task in tasks for app in task["related_apps"]}
    assert {"terminal", "mousepad", "chromium"} <= apps


# ---------------------------------------------------------------------- on the desktop


def _prepare(desktop: TestDesktop, task: dict[str, Any]) -> None:
    """Run the task's setup steps as a harness would."""
    for step in task["config"]:
        kind, parameters = step["type"], step["parameters"]
        if kind == "execute":
            assert desktop.post("/setup/execute", parameters)["returncode"] == 0, step
        elif kind == "launch":
            desktop.post("/setup/launch", parameters)
        elif kind == "open":
            assert "opened" in desktop.post("/setup/open_file", parameters)
        elif kind == "sleep":
            time.sleep(parameters["seconds"])


def _get(desktop: TestDesktop, getter: dict[str, Any]) -> Any:
    """A getter's raw value: command output, file bytes (None when absent), or the rules."""
    if getter["type"] == "vm_command_line":
        return desktop.post(
            "/execute", {"command": getter["command"], "shell": getter.get("shell", False)}
        )["output"]
    if getter["type"] == "vm_file":
        try:
            return urllib.request.urlopen(
                urllib.request.Request(
                    desktop.url + "/file",
                    data=urllib.parse.urlencode({"file_path": getter["path"]}).encode(),
                ),
                timeout=30,
            ).read()
        except urllib.error.HTTPError:
            return None
    return getter["rules"]


def _passes(desktop: TestDesktop, task: dict[str, Any], ending: str) -> bool:
    evaluator = task["evaluator"]
    if evaluator["func"] == "infeasible":
        return ending == "fail"
    result = _get(desktop, evaluator["result"])
    expected = _get(desktop, evaluator["expected"])
    if evaluator["func"] == "exact_match":
        return bool(result == expected["expected"])
    if evaluator["func"] == "check_include_exclude":
        return all(s in result for s in expected["include"]) and not any(
            s in result for s in expected["exclude"]
        )
    return result is not None and expected is not None and result == expected


def _request(instruction: str, png: bytes, steps: int) -> dict[str, Any]:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}
    image["image_url"]["url"] += base64.b64encode(png).decode()
    return {
        "model": "ownloop-desktop",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"Task: {instruction}"}]},
            *({"role": "assistant", "content": "earlier step"} for _ in range(steps)),
            {"role": "user", "content": [image]},
        ],
    }


def _pyautogui(action: Any) -> str:
    if isinstance(action, Click):
        return f"pyautogui.click({round(action.x)}, {round(action.y)})"
    if isinstance(action, TypeText):
        return f"pyautogui.write({action.text!r})"
    if isinstance(action, Hotkey):
        return f"pyautogui.hotkey({', '.join(repr(k) for k in action.keys)})"
    raise AssertionError(f"no pyautogui for {action!r}")


def _play(desktop: TestDesktop, agent_name: str, task: dict[str, Any]) -> str:
    """Ask the expert step by step, parse with the agent, perform; the ending's kind (a
    stand-in for the recorder's loop: pyautogui written here from the parsed actions)."""
    expert, agent = DesktopExpert(agent_name), make_agent(agent_name)
    for step in range(10):
        png = desktop.get("/screenshot")
        text = expert(_request(task["instruction"], png, step)).text
        parsed = agent.parse(text, desktop.size)
        for action in parsed.actions:
            if isinstance(action, Finish):
                return "done"
            if isinstance(action, Fail | CallUser):
                return "fail"
            answer = desktop.pyautogui(_pyautogui(action))
            assert answer["returncode"] == 0, answer
        time.sleep(0.1)
    return "none"


def _blank_png(size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "white").save(out, "PNG")
    return out.getvalue()


@pytest.mark.parametrize("agent_name", ["uitars", "opencua"])
def test_the_expert_answers_every_step_in_each_agents_grammar(agent_name: str) -> None:
    """No desktop: each answer reads back, by the agent's own parser, as the planned step
    (clicks in the middle of any screen size; the agent's own ending)."""
    expert, agent = DesktopExpert(agent_name), make_agent(agent_name)
    for size in ((1280, 720), (1920, 1080)):
        png = _blank_png(size)
        for task in TASKS:
            for index, step in enumerate(task.steps):
                text = expert(_request(task.instruction, png, index)).text
                got = agent.parse(text, size).actions
                want = step.actions
                assert [type(a) for a in got] == [
                    CallUser if isinstance(a, Fail) and agent_name == "uitars" else type(a)
                    for a in want
                ], text
                for action in got:
                    if isinstance(action, Click):
                        assert abs(action.x - size[0] / 2) <= 2 and abs(action.y - size[1] / 2) <= 2
            # past the plan's end, the ending again
            again = agent.parse(expert(_request(task.instruction, png, 40)).text, size).actions
            assert type(again[-1]) in (Finish, Fail, CallUser)


@pytest.mark.desktop
@pytest.mark.slow
def test_every_task_scores_zero_untouched(desktop: TestDesktop) -> None:
    """On the real desktop, task by task: after the setup, the getters' raw values fail the
    task's rule (a do-nothing agent scores 0). That the expert's answers pass every task, for
    both agents, through the recorder's own loop, is tests/world's end-to-end recording."""
    passing = []
    for task in _tasks():
        desktop.post("/reset")
        _prepare(desktop, task)
        if _passes(desktop, task, ending="none"):
            passing.append(task["id"])
    assert passing == []


@pytest.mark.desktop
def test_typing_the_experts_answer_passes_a_task(desktop: TestDesktop) -> None:
    """One task end to end without the recorder: the expert's answers, parsed by OpenCUA and
    performed here, reach the state the task's rule wants (and the rule can pass)."""
    task = next(t for t in _tasks() if t["id"] == "term-create-file")
    desktop.post("/reset")
    _prepare(desktop, task)
    assert _play(desktop, "opencua", task) == "done"
    desktop.wait_for(lambda: _passes(desktop, task, "done"), "the task passes")
