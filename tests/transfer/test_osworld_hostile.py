"""Hostile OSWorld result trees, through the real CLI in a subprocess: symlinks out of the tree
and FIFOs are named and never followed or opened (a FIFO would block: the timeout makes that a
failure), a screenshot_file that climbs out is not read, a PNG header declaring billions of
pixels is not kept, and hostile field values end as data, never as a crash."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from ownloop.replay.fold import fold
from ownloop.store import open_store
from tests.transfer.conftest import png
from tests.transfer.osworld_tree import SCREEN, uitars_steps, write_example, write_tasks

SECRET = b"TOP-SECRET-outside-the-tree"


def _bomb(width: int, height: int) -> bytes:
    """A tiny PNG whose header declares ``width`` x ``height`` pixels."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    crc = struct.pack(">I", zlib.crc32(chunk))
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(header)) + chunk + crc


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(SECRET)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "task.json").write_text(json.dumps({"instruction": SECRET.decode()}))
    elsewhere = outside / "elsewhere-example"
    write_example(elsewhere, uitars_steps("os"), 1.0, colour=5)
    base = tmp_path / "results" / "pyautogui" / "screenshot" / "m"
    good = base / "chrome" / "aaaa"
    names = write_example(good, uitars_steps("chrome"), 1.0, colour=7)
    (good / names[0]).unlink()
    (good / names[0]).symlink_to(outside / "secret.png")  # a screenshot through a symlink
    (good / names[1]).write_bytes(_bomb(200_000, 200_000))  # 40 billion pixels declared
    (good / "runtime.log").unlink()
    (good / "runtime.log").symlink_to(outside / "secret.txt")
    os.mkfifo(good / "recording.mp4.part")
    (base / "chrome" / "linked").symlink_to(elsewhere, target_is_directory=True)
    odd = base / "gimp" / "bbbb"
    write_example(odd, uitars_steps("gimp"), None, colour=9)
    lines = [
        {"step_num": 1, "response": "Thought: x\ud800\nAction: click(start_box='(1,1)')",
         "action": "x", "reward": float("nan"), "done": False, "info": {"a": [[[[[[[[1]]]]]]]]},
         "screenshot_file": "../../../../../../outside/secret.png"},
        {"step_num": True, "response": {"not": "text"}, "action": None, "screenshot_file": 7},
        {"step_num": -3, "response": "A" * 30_000, "screenshot_file": "/etc/passwd"},
        {"step_num": 10**12, "response": "Thought: y\nAction: wait()", "info": "x" * 300_000},
    ]  # fmt: skip
    (odd / "traj.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (odd / "result.txt").write_text("nan\n")
    (odd / "step_1_x.png").write_bytes(png((1, 2, 3), SCREEN))
    fifo = base / "os" / "cccc"
    fifo.mkdir(parents=True)
    os.mkfifo(fifo / "traj.jsonl")
    (fifo / "result.txt").write_text("1e999\n")
    tasks = write_tasks(tmp_path / "tasks")
    (tasks / "examples" / "chrome" / "aaaa.json").symlink_to(outside / "task.json")
    return tmp_path / "results", tasks


@pytest.mark.slow  # a subprocess import (~11 s on a quiet machine)
def test_a_hostile_tree_is_imported_as_data_and_nothing_outside_is_read(tmp_path: Path) -> None:
    results, tasks = _tree(tmp_path)
    store = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), "import", str(results)]
        + ["--format", "osworld", "--agent", "uitars", "--tasks-dir", str(tasks)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "pyautogui/screenshot/m/chrome/linked: skipped (symlink, not followed)" in out
    chrome = next(
        line for line in out.splitlines() if line.startswith("pyautogui/screenshot/m/chrome/aaaa")
    )
    assert "(symlink, not followed)" in chrome and "recording.mp4.part (FIFO, not read)" in chrome
    assert "(200000x200000 pixels, over the 50 M pixel budget)" in chrome
    assert "task file chrome/aaaa.json (not found)" in chrome
    gimp = next(line for line in out.splitlines() if "m/gimp/bbbb" in line)
    assert "../../../../../../outside/secret.png (missing)" in gimp
    assert "/etc/passwd (missing)" in gimp
    assert "result.txt (not a score from 0 to 1: 'nan')" in gimp
    assert "traj.jsonl line 3 step_num (not a step number)" in gimp
    assert "traj.jsonl line 4 fields (over 256 KB: left out)" in gimp
    fifo = next(line for line in out.splitlines() if "m/os/cccc" in line)
    assert "traj.jsonl (FIFO, not read)" in fifo and "not a score from 0 to 1: '1e999'" in fifo
    blobs = [p for p in (store / "blobs").rglob("*") if p.is_file()]
    assert not any(SECRET in p.read_bytes() for p in blobs)
    opened = open_store(store)
    rows = opened.sql("select session_id, task_id, status, score, prompt from sessions").rows
    assert {task for _, task, *_ in rows} == {"aaaa", "bbbb", "cccc"}
    assert all(SECRET.decode() not in (prompt or "") for *_, prompt in rows)
    [(odd,)] = [(s,) for s, task, *_ in rows if task == "bbbb"]
    session = fold(opened.session_events(odd), odd)
    responses = [c.response for s in session.steps for c in s.calls]
    assert responses[0] is not None and "\ud800" not in responses[0]
    assert None in responses  # the response that was an object: no text, kept in the line
    assert any(p.error and "too long" in p.error for s in session.steps for p in s.parses)
    values = [
        json.loads(e.value_json or "null") for e in session.evidence if e.name == "osworld_line"
    ]
    assert values[0]["fields"]["reward"] is None  # NaN is not JSON: kept as null
