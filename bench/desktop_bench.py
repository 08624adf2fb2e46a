"""Per-step time of ownloop's desktop loop against the desktop server's own floor.

Both on one test desktop (``ownloop serve-desktop``'s server, in-process, 1280x720, xterm), in
the same run: the floor is one ``GET /screenshot`` plus one ``POST /execute`` of a pyautogui
click, straight over HTTP; the loop is ``ownloop record uitars`` on one OSWorld task whose model
(the shipped ``ModelServer``) clicks every step, settle 0, with the model's own latency taken out
of each step. Prints both medians and their ratio.

    .venv/bin/python bench/desktop_bench.py [--steps 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.desktopserver import Desktop, DesktopServer
from ownloop.modelserver import ModelServer, Reply
from ownloop.store import open_store
from ownloop.world.desktop import command_of
from ownloop.world.guest import Guest


def _task(root: Path) -> Path:
    (root / "examples" / "os").mkdir(parents=True)
    task = {
        "id": "clicks",
        "instruction": "click the terminal again and again",
        "config": [{"type": "launch", "parameters": {"command": ["xterm"]}}],
        "evaluator": {"func": "infeasible"},
    }
    (root / "examples" / "os" / "clicks.json").write_text(json.dumps(task))
    (root / "test_all.json").write_text(json.dumps({"os": ["clicks"]}))
    return root


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--smoke", action="store_true", help="2 steps: it runs")
    args = parser.parse_args()
    steps = 2 if args.smoke else args.steps
    server = DesktopServer(Desktop((1280, 720), ["xterm"]))
    url = server.start()
    try:
        guest = Guest(url)
        click = command_of("pyautogui.click(x=640, y=360, clicks=1, button='left')")
        floor = []
        for _ in range(steps):
            began = time.perf_counter()
            guest.screenshot()
            guest.execute(click)
            floor.append(time.perf_counter() - began)
        with (
            tempfile.TemporaryDirectory() as tmp,
            ModelServer(
                lambda request: Reply("Thought: t\nAction: click(start_box='(640,360)')")
            ) as model,
        ):
            argv = [
                "--store",
                f"{tmp}/s",
                "record",
                "uitars",
                "--suite",
                f"osworld:{_task(Path(tmp) / 't')}",
            ]
            argv += ["--desktop", url, "--endpoint", model, "--model", "m", "--settle", "0"]
            argv += ["--max-steps", str(steps)]
            CliRunner().invoke(cli, argv, catch_exceptions=False)
            store = open_store(f"{tmp}/s")
            shots = store.sql("select step, time from screenshots order by step").rows
            calls = dict(
                store.sql("select step, sum(latency_ms) from model_calls group by step").rows
            )
            loop = [
                (b[1] - a[1]).total_seconds() - float(calls.get(a[0], 0)) / 1000
                for a, b in zip(shots, shots[1:], strict=False)
            ]
    finally:
        server.close()
    f, w = statistics.median(floor), statistics.median(loop)
    print(f"floor (screenshot + execute): median {f * 1000:.0f} ms over {len(floor)}")
    print(f"ownloop desktop step (model latency out): median {w * 1000:.0f} ms over {len(loop)}")
    print(f"ratio: {w / f:.2f}x")


if __name__ == "__main__":
    main()
