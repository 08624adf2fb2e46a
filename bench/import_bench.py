"""``ownloop import --format osworld`` on a generated OSWorld result tree: example folders a second.

    .venv/bin/python bench/import_bench.py            # 1,000 example folders of 15 steps
    .venv/bin/python bench/import_bench.py --quick    # 100 folders
    .venv/bin/python bench/import_bench.py --folders 3000 --steps 50 --keep /tmp/osw

The tree is written as OSWorld's ``lib_run_single.py`` writes one: per example a traj.jsonl of one
line per step (a UI-TARS-style response, the pyautogui code, reward, done, info, the screenshot's
name), a distinct small PNG per step, result.txt, runtime.log; over three domains of one model.
The import runs as a user runs it, ``ownloop import DIR --format osworld`` in its own process
(parsing every response with the uitars parser, writing blobs and journal, then indexing); the
figure is folders over that process's wall time. A second import of the same tree (every folder
already imported: hashing and skipping) is timed too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

_OWNLOOP = str(Path(sys.executable).parent / "ownloop")
_DOMAINS = ("chrome", "gimp", "os")
_SIZE = (64, 36)


def _png(seed: int) -> bytes:
    """A small RGB PNG whose first pixels encode ``seed``: each one distinct."""
    width, height = _SIZE
    first = seed.to_bytes(6, "big")
    row = b"\x00" + first + bytes(3 * width - len(first))
    raw = row + (b"\x00" + bytes([200, 200, 200]) * width) * (height - 1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def build(root: Path, folders: int, steps: int) -> None:
    """``folders`` example folders of ``steps`` steps under ``root`` (an OSWorld result_dir)."""
    base = root / "pyautogui" / "screenshot" / "bench-model"
    shot = 0
    for index in range(folders):
        folder = base / _DOMAINS[index % 3] / f"example-{index:05d}"
        folder.mkdir(parents=True)
        lines = []
        for step in range(1, steps + 1):
            stamp = f"20250601@12{step:02d}00{index:06d}"
            name = f"step_{step}_{stamp}.png"
            shot += 1
            (folder / name).write_bytes(_png(shot))
            last = step == steps
            response = (
                "Thought: Done.\nAction: finished(content='ok')"
                if last
                else f"Thought: Click item {step}.\n"
                f"Action: click(start_box='({10 + step},{5 + step})')"
            )
            lines.append(
                json.dumps(
                    {
                        "step_num": step,
                        "action_timestamp": stamp,
                        "action": "DONE" if last else f"pyautogui.click({10 + step}, {5 + step})",
                        "response": response,
                        "reward": 0,
                        "done": last,
                        "info": {},
                        "screenshot_file": name,
                    }
                )
            )
        (folder / "traj.jsonl").write_text("\n".join(lines) + "\n")
        (folder / "result.txt").write_text(f"{float(index % 2)}\n")
        (folder / "runtime.log").write_text("step\n" * steps)


def _import(tree: Path, store: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [_OWNLOOP, "--store", str(store), "import", str(tree), "--format", "osworld"],
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - started, done.stdout.strip().splitlines()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folders", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="100 folders")
    parser.add_argument("--keep", type=Path, help="write the tree and store here (kept)")
    parser.add_argument("--smoke", action="store_true", help="5 folders of 3 steps: it runs")
    args = parser.parse_args()
    if args.smoke:
        args.folders, args.steps = 5, 3
    folders = 100 if args.quick else args.folders
    work = args.keep or Path(tempfile.mkdtemp(prefix="import-bench-"))
    tree, store = work / "results", work / "store"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.rmtree(store, ignore_errors=True)
    started = time.perf_counter()
    build(tree, folders, args.steps)
    print(f"wrote {folders} folders of {args.steps} steps in {time.perf_counter() - started:.1f} s")
    seconds, line = _import(tree, store)
    print(f"import: {seconds:.1f} s, {folders / seconds:.1f} folders/s ({line})")
    seconds, line = _import(tree, store)
    print(f"again (all already imported): {seconds:.1f} s, {folders / seconds:.1f} folders/s")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
