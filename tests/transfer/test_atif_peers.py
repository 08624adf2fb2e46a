"""Issue 30: ATIF both ways against the peer's own models (the MIT ``atif`` package, ATIF v1.8).

Two trajectories are made with ``atif``'s pydantic models: a computer-use one as Harbor writes it
by default now (v1.8, no ``session_id``, an ``audio`` part, a click and a finish) and a coding
agent's tool-calling one (v1.7, calls ownloop cannot map, text observations). Through the real
CLI they are imported, exported and validated by ``atif`` again, with nothing lost that ATIF
holds: messages, reasoning, tool calls and their arguments, observation texts, tokens, times.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ownloop.store import open_store
from tests.transfer.conftest import invoke_ownloop, png

atif = pytest.importorskip("atif")


def _computer_use() -> Any:
    part = atif.ContentPart
    return atif.Trajectory(
        schema_version="ATIF-v1.8",
        agent=atif.Agent(name="cua-agent", version="2.1", model_name="cua-large"),
        steps=[
            atif.Step(
                step_id=1,
                source="user",
                timestamp="2026-03-01T09:00:00Z",
                message=[
                    part(type="text", text="Open the settings page."),
                    part(type="audio", source={"media_type": "audio/wav", "path": "a/q.wav"}),
                    part(type="image", source={"media_type": "image/png", "path": "s/1.png"}),
                ],
            ),
            atif.Step(
                step_id=2,
                source="agent",
                timestamp="2026-03-01T09:00:03Z",
                message="Clicking Settings.",
                reasoning_content="Settings is top right.",
                tool_calls=[
                    atif.ToolCall(
                        tool_call_id="c1", function_name="click", arguments={"x": 700, "y": 40}
                    )
                ],
                observation=atif.Observation(
                    results=[
                        atif.ObservationResult(
                            source_call_id="c1",
                            content=[
                                part(type="text", text="The settings page opened."),
                                part(
                                    type="image",
                                    source={"media_type": "image/png", "path": "s/2.png"},
                                ),
                            ],
                        )
                    ]
                ),
                metrics=atif.Metrics(prompt_tokens=900, completion_tokens=30),
            ),
            atif.Step(
                step_id=3,
                source="agent",
                timestamp="2026-03-01T09:00:07Z",
                message="Done.",
                tool_calls=[
                    atif.ToolCall(
                        tool_call_id="c2", function_name="finish", arguments={"answer": "opened"}
                    )
                ],
                metrics=atif.Metrics(prompt_tokens=950, completion_tokens=8),
            ),
        ],
    )


def _tool_calling() -> Any:
    calls = [("bash", {"command": "ls -la /srv"}), ("read_file", {"path": "/srv/app.py"})]
    outputs = ["total 8\napp.py\n", "print('hello')\n"]
    steps = [
        atif.Step(
            step_id=1,
            source="user",
            message="Find the app's entry point.",
            timestamp="2026-03-02T10:00:00Z",
        ),
    ]
    for index, ((name, arguments), output) in enumerate(zip(calls, outputs, strict=True)):
        steps.append(
            atif.Step(
                step_id=index + 2,
                source="agent",
                timestamp=f"2026-03-02T10:00:0{2 * index + 2}Z",
                message=f"Running {name}.",
                tool_calls=[
                    atif.ToolCall(tool_call_id=f"t{index}", function_name=name, arguments=arguments)
                ],
                observation=atif.Observation(
                    results=[atif.ObservationResult(source_call_id=f"t{index}", content=output)]
                ),
                metrics=atif.Metrics(prompt_tokens=100 + index, completion_tokens=10 + index),
            )
        )
    return atif.Trajectory(
        schema_version="ATIF-v1.7",
        session_id="code-42",
        agent=atif.Agent(name="coder", version="0.3", model_name="code-small"),
        steps=steps,
    )


def _write(folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True)
    (folder / "s").mkdir()
    (folder / "s" / "1.png").write_bytes(png((10, 20, 30), (800, 600)))
    (folder / "s" / "2.png").write_bytes(png((30, 20, 10), (800, 600)))
    made = {"cua": _computer_use(), "code": _tool_calling()}
    for name, trajectory in made.items():
        (folder / f"{name}.json").write_text(json.dumps(trajectory.to_json_dict()))
    return made


def _agent_content(trajectory: Any) -> list[Any]:
    """What ATIF holds of each agent step, for comparison."""
    out = []
    for step in trajectory.steps:
        if step.source != "agent":
            continue
        texts = [
            p.text if not isinstance(p, str) else p
            for r in (step.observation.results if step.observation else ())
            for p in (r.content if isinstance(r.content, list) else [r.content])
            if isinstance(p, str) or p.type == "text"
        ]
        out.append(
            (
                step.message,
                step.reasoning_content,
                step.timestamp.replace("Z", "+00:00"),
                [(c.function_name, c.arguments) for c in step.tool_calls or ()],
                texts,
                (step.metrics.prompt_tokens, step.metrics.completion_tokens),
            )
        )
    return out


def test_peer_trajectories_round_trip_through_import_and_export(tmp_path: Path) -> None:
    made = _write(tmp_path / "in")
    store = tmp_path / "store"
    imported = invoke_ownloop(
        store, "import", "--format", "atif", str(tmp_path / "in"), "--run", "p"
    )
    assert imported.returncode == 0, imported.stderr
    assert "cua.json: 1 'audio' part skipped (ownloop keeps text and image parts)" in (
        imported.stdout.splitlines()
    )
    assert "imported 2 ATIF trajectories into run p" in imported.stdout
    rows = (
        open_store(store)
        .sql("select task_id, status, parse_failures, started_at, seconds from sessions order by 1")
        .rows
    )
    # The coding agent's calls cannot run in a browser: not "finished with 0 parse failures";
    # both sessions' times are the trajectories' own.
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        ("code-42", "parse_error", 2, 4.0),
        ("cua", "finished", 0, 7.0),
    ]
    assert [r[3].isoformat()[:19] for r in rows] == ["2026-03-02T10:00:00", "2026-03-01T09:00:00"]

    out = tmp_path / "out"
    exported = invoke_ownloop(store, "export", "--format", "atif", "--run", "p", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert "2 ATIF trajectories (ATIF-v1.8)" in exported.stdout
    again = {
        path.stem: atif.Trajectory.model_validate_json(path.read_text())
        for path in out.glob("*.json")
    }
    assert {t.schema_version for t in again.values()} == {"ATIF-v1.8"}
    by_task = {t.extra["ownloop"]["task"]["task_id"]: t for t in again.values()}
    for name, original in made.items():
        task = "code-42" if name == "code" else "cua"
        assert _agent_content(by_task[task]) == _agent_content(original), name
    assert "no browser operation" not in "".join(p.read_text() for p in out.glob("*.json"))
    assert by_task["code-42"].session_id == "code-42"


def test_an_import_that_skips_every_file_fails(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "bad.json").write_text('{"schema_version": "ATIF-v1.9", "agent": {}, "steps": []}')
    result = invoke_ownloop(tmp_path / "store", "import", "--format", "atif", str(folder))
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: no trajectory imported from {folder}: bad.json: skipped")
    assert last.endswith("Pass ATIF v1.0-v1.8 files")
