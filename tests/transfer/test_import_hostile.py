"""Hostile import folders and hostile recorded file names, through the real CLI in a subprocess.

A symlink is never followed and a FIFO never opened (it would block the import: the subprocess's
timeout makes that a failure, not a hang); each is named in the output. An export never turns a
recorded name with a NUL byte into a path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.store import events as E
from ownloop.store import open_store

SECRET = b"TOP-SECRET-outside-the-folder"


def _ownloop(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _blobs_hold(store: Path, needle: bytes) -> bool:
    return any(
        needle in path.read_bytes() for path in (store / "blobs").rglob("*") if path.is_file()
    )


@pytest.fixture
def hostile(tmp_path: Path, agent_folder: Callable[..., Path]) -> Path:
    """results/ with a good folder full of symlinks and a FIFO, plus a symlinked folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "secret.png").write_bytes(SECRET)
    other = agent_folder(outside, "uitars", "elsewhere")
    (other / "notes.txt").write_bytes(SECRET)
    results = tmp_path / "results"
    folder = agent_folder(results, "uitars", "task-1")
    (folder / "notes.txt").write_bytes(b"a plain file is kept")
    (folder / "leak.txt").symlink_to(outside / "secret.txt")
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    (folder / "screens" / "step_02.png").unlink()
    (folder / "screens" / "step_02.png").symlink_to(outside / "secret.png")
    os.mkfifo(folder / "pipe")
    (results / "task-2").symlink_to(other, target_is_directory=True)
    os.mkfifo(results / "fifo-at-top")
    return results


def test_import_skips_and_names_every_symlink_and_fifo(tmp_path: Path, hostile: Path) -> None:
    store = tmp_path / "store"
    done = _ownloop(store, "import", str(hostile), "--agent", "uitars", "--run", "h1")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "fifo-at-top: skipped (FIFO, not read)",
        "task-2: skipped (symlink, not followed)",
        "task-1: skipped leak.txt (symlink, not followed), linked (symlink, not followed), "
        "pipe (FIFO, not read), screens/step_02.png (symlink, not followed), "
        "screens/step_02.png (missing)",
        "imported 1 session from 1 folder into run h1: 1 finished",
    ]
    assert not _blobs_hold(store, SECRET)
    files = (
        open_store(store)
        .sql("select source from evidence where name = 'import:file' order by source")
        .rows
    )
    assert files == [("notes.txt",)]
    out = tmp_path / "back"
    done = _ownloop(store, "export", "--run", "h1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    exported = [p for p in out.rglob("*") if p.is_file()]
    assert exported and all(SECRET not in p.read_bytes() for p in exported)
    assert (out / "task-1" / "notes.txt").read_bytes() == b"a plain file is kept"


def test_a_symlinked_summary_or_steps_file_is_not_read(
    tmp_path: Path, agent_folder: Callable[..., Path]
) -> None:
    (tmp_path / "secret.json").write_text('{"task_id": "stolen", "answer": "TOP-SECRET"}')
    folder = agent_folder(tmp_path / "results", "uitars", "task-1")
    (folder / "session.json").unlink()
    (folder / "session.json").symlink_to(tmp_path / "secret.json")
    (folder / "steps.jsonl").unlink()
    (folder / "steps.jsonl").symlink_to(tmp_path / "secret.json")
    store = tmp_path / "store"
    done = _ownloop(store, "import", str(tmp_path / "results"), "--agent", "uitars")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        "task-1: skipped session.json (symlink, not followed), steps.jsonl (symlink, not followed)"
    )
    rows = open_store(store).sql("select task_id, status, answer from sessions").rows
    assert rows == [("task-1", "crashed", None)]
    assert not _blobs_hold(store, b"TOP-SECRET")


@pytest.mark.parametrize(
    "name",
    ["notes\x00.txt", "a/\x00", "bell\x07.txt", "..\\x", "../up.txt", "/etc/x", "ok/" + "n" * 300],
)
def test_export_skips_a_recorded_file_name_it_cannot_write_as_is(tmp_path: Path, name: str) -> None:
    store = open_store(tmp_path / "store")
    sha = store.put_blob(b"kept bytes")
    ids = {"run_id": "r", "session_id": "s1"}
    task = E.Task(task_id="t1", prompt="", start_url="", suite="import:x")
    with store.stream("s1") as stream:
        stream.append(
            [
                E.RunStarted(at=E.now(), run_id="r", agent="uitars"),
                E.SessionStarted(
                    at=E.now(), **ids, task=task, agent="uitars", viewport=(1280, 800)
                ),
                E.EvidenceCaptured(at=E.now(), **ids, name="import:file", sha256=sha, source=name),
                E.EvidenceCaptured(
                    at=E.now(), **ids, name="import:file", sha256=sha, source="fine.txt"
                ),
                E.SessionEnded(at=E.now(), **ids, status="finished", answer="a", steps=0),
            ]
        )
    out = tmp_path / "out"
    done = _ownloop(tmp_path / "store", "export", "--run", "r", "--out", str(out))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        f"skipped {out}/t1/{name!r} (not a plain relative file name)",
        f"{out}: 1 task folders, 1 sessions, 0 screenshots",
    ]
    assert (out / "t1" / "fine.txt").read_bytes() == b"kept bytes"
    assert sorted(p.name for p in out.rglob("*")) == [
        "fine.txt",
        "session.json",
        "steps.jsonl",
        "t1",
    ]


_ATIF = Path(__file__).parent / "atif" / "foreign.json"


def _atif_folder(tmp_path: Path) -> Path:
    """in/ with an ATIF file whose images are a symlink and a file in a symlinked folder, a
    symlinked trajectory, a FIFO, a file nested too deep, and one good file."""
    from tests.transfer.conftest import png

    outside = tmp_path / "outside"
    (outside / "screens").mkdir(parents=True)
    (outside / "secret.png").write_bytes(SECRET)
    (outside / "screens" / "0002.png").write_bytes(png((1, 2, 3)) + SECRET)
    (outside / "elsewhere.json").write_bytes(_ATIF.read_bytes().replace(b"foreign", SECRET))
    folder = tmp_path / "in"
    folder.mkdir()
    value = json.loads(_ATIF.read_text())
    value["steps"][2]["observation"]["results"][0]["content"][1]["source"]["path"] = (
        "linked/screens/0002.png"
    )
    (folder / "a.json").write_text(json.dumps(value))
    (folder / "screens").mkdir()
    (folder / "screens" / "0001.png").symlink_to(outside / "secret.png")
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    (folder / "b-link.json").symlink_to(outside / "elsewhere.json")
    os.mkfifo(folder / "c-pipe.json")
    nested = "[" * 100_000 + "]" * 100_000  # deeper than any stack
    (folder / "d-deep.json").write_text(
        _ATIF.read_text().replace('"notes"', f'"x": {nested}, "notes"', 1)
    )
    shutil.copy(_ATIF, folder / "e-good.json")
    return folder


def test_atif_import_never_follows_a_link_nor_opens_a_fifo(tmp_path: Path) -> None:
    folder = _atif_folder(tmp_path)
    result = _ownloop(tmp_path / "store", "import", "--format", "atif", str(folder))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    for line in (
        "b-link.json: skipped (symlink, not followed)",
        "c-pipe.json: skipped (FIFO, not read)",
        "a.json: image 'screens/0001.png' skipped (screens/0001.png: symlink, not followed)",
        "a.json: image 'linked/screens/0002.png' skipped (linked: symlink, not followed)",
        "d-deep.json: skipped (not ATIF: nested too deep)",
    ):
        assert line in lines, result.stdout
    assert "imported 2 ATIF trajectories into run atif-in" in result.stdout
    assert not _blobs_hold(tmp_path / "store", SECRET)


def test_a_symlinked_atif_file_given_is_refused(tmp_path: Path) -> None:
    folder = _atif_folder(tmp_path)
    result = _ownloop(tmp_path / "store", "import", "--format", "atif", str(folder / "b-link.json"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: {folder / 'b-link.json'}: symlink, not followed: import reads regular files "
        "only. Pass the file itself, or a folder of them"
    ]


def _bomb() -> bytes:
    """A 34 kB PNG of 8000x7000 pixels (56 M: over the budget; 168 MB once decoded as RGB)."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (8000, 7000)).save(out, format="PNG")
    return out.getvalue()


_OVER = "8000x7000 pixels, over the 50 M pixel budget"


def test_import_skips_a_screenshot_over_the_pixel_budget(
    tmp_path: Path, agent_folder: Callable[..., Path]
) -> None:
    folder = agent_folder(tmp_path / "results", "uitars", "task-1")
    (folder / "screens" / "step_02.png").write_bytes(_bomb())
    result = _ownloop(tmp_path / "store", "import", str(tmp_path / "results"), "--agent", "uitars")
    assert result.returncode == 0, result.stderr
    assert f"task-1: skipped screens/step_02.png ({_OVER})" in result.stdout.splitlines()


def test_atif_import_skips_an_image_over_the_pixel_budget(tmp_path: Path) -> None:
    from tests.transfer.conftest import png

    folder = tmp_path / "in"
    (folder / "screens").mkdir(parents=True)
    shutil.copy(_ATIF, folder / "a.json")
    (folder / "screens" / "0001.png").write_bytes(_bomb())
    (folder / "screens" / "0002.png").write_bytes(png((1, 2, 3)))
    result = _ownloop(tmp_path / "store", "import", "--format", "atif", str(folder))
    assert result.returncode == 0, result.stderr
    assert f"a.json: image 'screens/0001.png' skipped ({_OVER})" in result.stdout.splitlines()
