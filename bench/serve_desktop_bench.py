"""Benchmark: what one request to ``ownloop serve-desktop`` costs, per endpoint, with the editor
and a terminal open (the start of a desktop world step, and the reset between tasks).
Run: .venv/bin/python bench/serve_desktop_bench.py [--rounds 15] [--size 1280x720]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from collections.abc import Callable

from ownloop.desktopserver import Desktop, DesktopServer
from ownloop.desktopserver.display import parse_size

PRELUDE = "import pyautogui; import time; pyautogui.FAILSAFE = False; "


def _call(url: str, path: str, body: object | None = None) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data)
    with urllib.request.urlopen(request, timeout=120) as response:
        return bytes(response.read())


def _timed(fn: Callable[[], object], rounds: int) -> str:
    seconds = []
    for _ in range(rounds):
        started = time.monotonic()
        fn()
        seconds.append(time.monotonic() - started)
    return f"median {statistics.median(seconds) * 1000:.0f} ms, max {max(seconds) * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--smoke", action="store_true", help="2 rounds: it runs")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 2
    server = DesktopServer(Desktop(parse_size(args.size)))
    started = time.monotonic()
    url = server.start()
    print(f"start (Xvfb, openbox, bus): {(time.monotonic() - started) * 1000:.0f} ms")
    try:
        (server.desktop.home / "notes.txt").write_text("hello\n")
        _call(url, "/setup/open_file", {"path": "~/notes.txt"})
        _call(url, "/setup/launch", {"command": ["xterm"]})
        time.sleep(1.5)
        move = {"command": ["python", "-c", PRELUDE + "pyautogui.moveTo(10, 10)"]}
        rows = {
            "GET /screenshot": lambda: _call(url, "/screenshot"),
            "GET /accessibility": lambda: _call(url, "/accessibility"),
            "POST /execute (one pyautogui call)": lambda: _call(url, "/execute", move),
            "POST /execute (a shell command)": lambda: _call(
                url, "/execute", {"command": "true", "shell": True}
            ),
        }
        for name, fn in rows.items():
            print(f"{name} at {args.size}: {_timed(fn, args.rounds)}")
        print(f"POST /reset: {_timed(lambda: _call(url, '/reset', {}), max(3, args.rounds // 3))}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
