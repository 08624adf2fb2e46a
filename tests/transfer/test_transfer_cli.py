"""``ownloop import`` and ``ownloop export`` through the CLI: output lines and one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.store import open_store


def _run(store: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args])
    return result.exit_code, result.output


def test_import_then_export_writes_the_folder_back(
    tmp_path: Path, agent_folder: Callable[..., Path]
) -> None:
    folder = agent_folder(tmp_path / "results", "molmoweb", "shop-3")
    code, out = _run(
        tmp_path / "s", "import", str(tmp_path / "results"), "--agent", "molmoweb", "--run", "m1"
    )
    assert (code, out) == (0, "imported 1 session from 1 folder into run m1: 1 finished\n")
    code, out = _run(tmp_path / "s", "export", "--run", "m1", "--out", str(tmp_path / "back"))
    assert (code, out) == (0, f"{tmp_path / 'back'}: 1 task folders, 1 sessions, 3 screenshots\n")
    back = tmp_path / "back" / "shop-3"
    assert json.loads((back / "session.json").read_text()) == json.loads(
        (folder / "session.json").read_text()
    )
    read = [json.loads(line) for line in (back / "steps.jsonl").read_text().splitlines()]
    assert read == [json.loads(line) for line in (folder / "steps.jsonl").read_text().splitlines()]
    for png in (folder / "screens").iterdir():
        assert (back / "screens" / png.name).read_bytes() == png.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["import", "{tmp}/nowhere", "--agent", "uitars"],
            "Error: no folder {tmp}/nowhere. Pass a folder of result folders (one per task)",
        ),
        (
            ["import", "{tmp}", "--agent", "gpt"],
            "Error: unknown agent 'gpt'. Choose one of: fara7b, glmv, holo, molmoweb, opencua, "
            "pyautogui, qwen3vl, uitars",
        ),
        (
            ["import", "{tmp}/empty", "--agent", "uitars"],
            "Error: no result folders in {tmp}/empty: expected one folder per task with "
            "session.json "
            "or steps.jsonl",
        ),
        (["export", "--out", "{tmp}/o"], "Error: session-dir needs a run: pass --run R"),
        (
            ["export", "--run", "nope", "--out", "{tmp}/o"],
            "Error: no sessions in run 'nope'. List runs with: ownloop --store {tmp}/s sql "
            '"select '
            'run_id, agent, sessions from runs"',
        ),
        (
            ["export", "--run", "nope", "--format", "parquet", "--out", "{tmp}/o"],
            "Error: no run 'nope' in the store. List runs with: ownloop --store {tmp}/s sql "
            '"select '
            'run_id, agent, sessions from runs"',
        ),
    ],
)
def test_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "empty").mkdir()
    open_store(tmp_path / "s").sync()  # export reads a store that is there
    code, out = _run(tmp_path / "s", *(a.format(tmp=tmp_path) for a in args))
    assert (code, out.strip().splitlines()[-1]) == (1, message.format(tmp=tmp_path))


def test_export_refuses_a_folder_with_files(
    tmp_path: Path, agent_folder: Callable[..., Path]
) -> None:
    agent_folder(tmp_path / "results", "uitars")
    assert _run(tmp_path / "s", "import", str(tmp_path / "results"), "--agent", "uitars")[0] == 0
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "keep.txt").write_text("mine")
    code, out = _run(
        tmp_path / "s", "export", "--run", "import-results", "--out", str(tmp_path / "o")
    )
    assert (code, out.strip()) == (
        1,
        f"Error: {tmp_path / 'o'} is not an empty folder. Pass a new --out folder",
    )
