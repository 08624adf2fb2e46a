"""Tasks files are decoded into typed Structs: each problem is one line naming the file and the
JSON path of the bad field, every grader is checked while reading, and a file that fails leaves
nothing behind in the store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ownloop.errors import OwnloopError
from ownloop.world.suites import load_suite

OK = {"task_id": "a", "prompt": "p", "start": "http://x/"}


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "tasks.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[", "tasks.json is not valid JSON (Expecting value: line 1 column 2 (char 1))"),
        (3, 'tasks.json: $: expected a list of tasks (or {"tasks": [...]}), got int'),
        ([], 'tasks.json: $: expected a non-empty list of tasks (or {"tasks": [...]})'),
        (
            {"tasks": []},
            'tasks.json: $.tasks: expected a non-empty list of tasks (or {"tasks": [...]})',
        ),
        (
            {"tasks": [OK], "extra": 1},
            "tasks.json: $: unknown field 'extra' (allowed: tasks, setup, capture, grader)",
        ),
        ({"setup": ["x"]}, "tasks.json: $: missing field 'tasks'"),
        ([OK, 1], "tasks.json: $[1]: expected an object, got int"),
        ([{"prompt": "p", "start": "s"}], "tasks.json: $[0]: missing field 'task_id'"),
        ([{**OK, "task_id": 7}], "tasks.json: $[0].task_id: expected text, got int"),
        ([{**OK, "task_id": " "}], "tasks.json: $[0].task_id: expected non-empty text"),
        ([{**OK, "start": ""}], "tasks.json: $[0].start: expected non-empty text"),
        (
            [{**OK, "needs_login": "yes"}],
            "tasks.json: $[0].needs_login: expected true or false, got text",
        ),
        (
            [OK, {**OK, "task_id": "b", "grader": 3}],
            "tasks.json: $[1].grader: expected a grader spec (text, or an object with a "
            '"type"), got int',
        ),
        (
            [{**OK, "grade": "x"}],
            "tasks.json: $[0]: unknown field 'grade' (allowed: task_id, prompt, "
            "start, needs_login, grader)",
        ),
        ([{**OK, "start": "{BASE}/"}], "tasks.json: $[0].start: uses {BASE}; pass --base URL"),
        ({"setup": "{BASE}", "tasks": [OK]}, "tasks.json: $.setup: expected a list, got text"),
        (
            {"capture": ["{BASE}/r"], "tasks": [OK]},
            "tasks.json: $.capture[0]: uses {BASE}; pass --base URL",
        ),
        (
            [OK, {**OK, "task_id": "b"}, {**OK, "prompt": "q"}],
            "tasks.json: $[2].task_id: duplicate 'a' (first at $[0])",
        ),
        (
            [OK, OK | {"task_id": "b", "grader": "answer:bogus:1"}],
            "tasks.json: $[1].grader: bad grader spec 'answer:bogus:1': unknown answer mode "
            "'bogus'. "
            "Use answer:MODE:VALUE with MODE exact, normalized, contains, regex, number or "
            "any, e.g. "
            'answer:contains:42, answer:number:3.5:0.01, answer:any:["yes","y"]',
        ),
        (
            {"grader": {"type": "nope"}, "tasks": [OK]},
            'tasks.json: $.grader: bad grader spec \'{"type":"nope"}\': unknown or missing '
            "grader type "
            '\'nope\'. Use a JSON object with a "type", e.g. {"type":"answer","contains":"42"}',
        ),
    ],
)
def test_a_bad_file_names_the_path_of_the_bad_field(
    tmp_path: Path, data: Any, message: str
) -> None:
    with pytest.raises(OwnloopError) as caught:
        load_suite(tasks_file=str(_write(tmp_path, data)))
    assert str(caught.value) == message


def test_a_grader_object_is_kept_as_compact_text(tmp_path: Path) -> None:
    grader = {"type": "answer", "contains": "42"}
    [task] = load_suite(tasks_file=str(_write(tmp_path, [{**OK, "grader": grader}]))).tasks()
    assert task.grader == '{"contains":"42","type":"answer"}'


@pytest.mark.slow
def test_record_with_a_bad_grader_writes_nothing(tmp_path: Path) -> None:
    tasks = [{**OK, "task_id": f"t{n}"} for n in range(4)]
    tasks[3]["grader"] = {"type": "answer", "kind": "exact"}
    store = tmp_path / "store"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ownloop",
            "--store",
            str(store),
            "record",
            "uitars",
            "--tasks",
            str(_write(tmp_path, tasks)),
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(
        "Error: tasks.json: $[3].grader: bad grader spec "
        '\'{"kind":"exact","type":"answer"}\': unknown field \'kind\' for type \'answer\'.'
    )
    assert done.stderr.count("\n") == 1 and done.stdout == ""
    assert [p for p in store.rglob("*") if p.is_file()] == []
