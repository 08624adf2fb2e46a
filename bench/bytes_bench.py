"""Bytes on disk: the same steps as the seed's plain folder and as ownloop's store (every full
request kept), as ``record --keep-png`` leaves it and as ``record`` does by default (each
session's screenshots compacted in the background as it ends), against the plain folder.

    .venv/bin/python bench/bytes_bench.py             # 100 sessions x 20 steps
    .venv/bin/python bench/bytes_bench.py --quick     # 20 sessions x 20 steps
    .venv/bin/python bench/bytes_bench.py --miniwob 6 # also: WebP/PNG on real MiniWoB screenshots

Each step has a distinct 1280x800 page-like PNG (``store_bench.screenshots``) and a UI-TARS
request carrying the last five screenshots, as the agents send them. Bytes are file sizes (what
``du --apparent-size`` counts). ``store_bytes(root)`` gives a store's bytes by part, for other
benchmarks (``bench/peers_bench.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_bench import T0, screenshots, step_events  # noqa: E402

from ownloop.store import events as E  # noqa: E402
from ownloop.store import open_store  # noqa: E402
from ownloop.store.compact import compact_blobs  # noqa: E402
from ownloop.store.compactor import BackgroundCompaction  # noqa: E402

WINDOW = 5
PROMPT = (
    "You are a GUI agent. You are given a task and your action history, with screenshots. You "
    "need to perform the next action to complete the task.\n\n## Output Format\n```\nThought: "
    "...\nAction: ...\n```\n\n## Action Space\nclick(start_box='<|box_start|>(x1,y1)<|box_end|>')"
    "\ntype(content='')\nscroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or "
    "up')\nwait()\nfinished(content='xxx')\n\n## User Instruction\n"
)


def folder_bytes(root: Path) -> int:
    """The sizes of every file under ``root``."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            total += os.stat(os.path.join(folder, name)).st_size
    return total


def store_bytes(root: Path) -> dict[str, int]:
    """A store's bytes by part: ``journal``, ``blobs`` (compacted ones included), ``index``
    (index.duckdb and its write-ahead log), ``other`` (locks, verify's state), ``total``."""
    parts = {"journal": 0, "blobs": 0, "index": 0, "other": 0}
    for entry in os.scandir(root):
        if entry.is_dir():
            size = folder_bytes(Path(entry.path))
        else:
            size = entry.stat().st_size
        if entry.name in ("journal", "blobs"):
            parts[entry.name] += size
        elif entry.name.startswith("index.duckdb"):
            parts["index"] += size
        else:
            parts["other"] += size
    parts["total"] = sum(parts.values())
    return parts


def write_plain(root: Path, pngs: list[bytes], sessions: int, steps: int) -> None:
    """The seed's layout: a folder per session, ``traj.jsonl`` (a line per step: response,
    action) and a PNG per step."""
    for s in range(sessions):
        folder = root / f"session-{s:04d}"
        folder.mkdir(parents=True)
        (folder / "instruction.txt").write_text(f"Click on the button labelled {s % 20}.")
        with open(folder / "traj.jsonl", "w") as log:
            for i in range(steps):
                at = T0 + timedelta(seconds=s * 60 + i * 2)
                name = f"step_{i + 1}_{at:%Y%m%d@%H%M%S}.png"
                (folder / name).write_bytes(pngs[s * steps + i])
                line = {
                    "step_num": i + 1,
                    "action_timestamp": f"{at:%Y%m%d@%H%M%S}",
                    "action": f"pyautogui.click({i * 10}, {200 + s})",
                    "response": f"Thought: I click OK.\nAction: click(start_box='({i},200)')",
                    "reward": 0,
                    "done": i == steps - 1,
                    "info": {},
                    "screenshot_file": name,
                }
                log.write(json.dumps(line) + "\n")
        (folder / "result.txt").write_text("1.0\n")


def write_store(
    root: Path,
    pngs: list[bytes],
    sessions: int,
    steps: int,
    ended: Callable[[str], None] = lambda session: None,
) -> None:
    """The same steps through the store, each request whole: system and task text, the past
    responses, the last five screenshots; ``ended`` is told each session as it ends (as a
    recorder tells its background compaction)."""
    store = open_store(root, fsync=False)
    with store.stream() as stream:
        stream.append([E.RunStarted(at=T0, run_id="r", agent="uitars", model="m", max_steps=20)])
    for s in range(sessions):
        session = f"session-{s:04d}"
        task = E.Task(
            task_id=f"miniwob.click-button.{s}",
            prompt=f"Click on the button labelled {s % 20}.",
            start_url="http://127.0.0.1:8312/miniwob/click-button.html",
        )
        with store.stream(session) as stream:
            stream.append([E.SessionStarted(at=T0, run_id="r", session_id=session, task=task)])
            history: list[tuple[str, str]] = []
            for i in range(steps):
                sha = store.put_blob(pngs[s * steps + i])
                at = T0 + timedelta(seconds=s * 60 + i * 2)
                events = step_events("r", session, i, sha, at)
                called = events[1]
                assert isinstance(called, E.ModelCalled)
                messages = [E.Message(role="user", parts=(E.TextPart(text=PROMPT + task.prompt),))]
                for j, (old, response) in enumerate(history):
                    if j >= len(history) - (WINDOW - 1):
                        messages.append(E.Message(role="user", parts=(E.ImagePart(sha256=old),)))
                    messages.append(E.Message(role="assistant", parts=(E.TextPart(text=response),)))
                messages.append(E.Message(role="user", parts=(E.ImagePart(sha256=sha),)))
                events[1] = msgspec.structs.replace(called, messages=tuple(messages))
                stream.append(events)
                history.append((sha, called.response or ""))
            stream.append(
                [
                    E.SessionEnded(
                        at=at, run_id="r", session_id=session, status="finished", steps=steps
                    ),
                    E.SessionGraded(
                        at=at, run_id="r", session_id=session, grader="g", score=1.0, passed=True
                    ),
                ]
            )
        ended(session)
    store.sync()


def _parts(parts: dict[str, int], plain: int) -> str:
    shown = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in parts.items() if k != "total" and v)
    return f"{parts['total'] / plain:.2f} of the plain folder ({shown})"


def miniwob_screenshots(tasks: int) -> list[bytes]:
    """Real MiniWoB screenshots: the expert's run of ``tasks`` tasks through the recorder."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from record_bench import TASKS, _run

    from ownloop.modelserver.endpoint import make_server

    with tempfile.TemporaryDirectory() as tmp, make_server("miniwob", "uitars") as endpoint:
        store = open_store(Path(tmp) / "store", fsync=False)
        _run(store, endpoint, ",".join(TASKS.split(",")[:tasks]), "shots", keep_png=True)
        return [store.get_blob(sha) for sha in store.blobs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 sessions instead of 100")
    parser.add_argument("--miniwob", type=int, default=0, metavar="N", help="real tasks too")
    parser.add_argument("--smoke", action="store_true", help="2 sessions x 3 steps (a check)")
    args = parser.parse_args()
    sessions, steps = (2, 3) if args.smoke else (20, 20) if args.quick else (100, 20)
    load = os.getloadavg()[0]
    print(f"bytes: {sessions} sessions x {steps} steps, load {load:.1f}")
    pngs = screenshots(sessions * steps)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_plain(work / "plain", pngs, sessions, steps)
        plain = folder_bytes(work / "plain")
        write_store(work / "store", pngs, sessions, steps)
        print(f"  plain folder: {plain / 1e6:.1f} MB = 1.00")
        before = store_bytes(work / "store")
        print(f"  ownloop with record --keep-png (PNGs as captured): {_parts(before, plain)}")
        compaction = BackgroundCompaction(work / "default")
        began = time.perf_counter()
        write_store(work / "default", pngs, sessions, steps, compaction.add)
        written = time.perf_counter() - began
        end = compaction.finish(wait_s=3600)
        seconds = time.perf_counter() - began
        after = store_bytes(work / "default")
        print(f"  ownloop by default (compacted in the background): {_parts(after, plain)}")
        print(
            f"  background compaction: {end.compacted} blobs, CPU {end.cpu_s:.1f} s at the lowest "
            f"priority ({1000 * end.cpu_s / max(end.compacted, 1):.0f} ms a blob), done "
            f"{seconds - written:.1f} s after the last write; load {os.getloadavg()[0]:.1f}; "
            f"without the index (a cache: ownloop index --rebuild makes it again): "
            f"{(after['total'] - after['index']) / plain:.2f}"
        )
        shutil.rmtree(work / "plain")
    if args.miniwob:
        real = miniwob_screenshots(args.miniwob)
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(Path(tmp) / "store", fsync=False)
            for png in real:
                store.put_blob(png)
            report = compact_blobs(store.blobs)
        print(
            f"  real MiniWoB screenshots ({len(real)}, {report.bytes_before / len(real) / 1e3:.1f}"
            f" kB a PNG): WebP {report.bytes_after / report.bytes_before:.2f} of the PNG bytes"
        )


if __name__ == "__main__":
    main()
