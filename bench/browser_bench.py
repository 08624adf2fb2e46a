"""Benchmark: CDP fast screenshots against page.screenshot, and the element look-up's share of a
pointer operation (a click waits for no download: the issue's 164 ms per click was a 0.15 s
wait). Run: .venv/bin/python bench/browser_bench.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from ownloop.store.events import MouseClick, MouseMove
from ownloop.world.browser import BrowserSession
from ownloop.world.chromium import open_browser

WORDS = (
    "ownloop records computer use agents that drive a real browser from screenshots and "
    "replays what they did without calling the model again"
).split()


def text_page(seed: int = 0) -> str:
    """A text-heavy page with a form and buttons, like the pages agents see."""
    rng = random.Random(seed)
    paragraphs = "".join(
        f"<p>{' '.join(rng.choice(WORDS) for _ in range(60))}</p>" for _ in range(30)
    )
    buttons = "".join(f"<button style='margin:4px'>Button {i}</button>" for i in range(40))
    return (
        f"<html><body style='font:15px sans-serif;margin:20px'><h1>Bench</h1>"
        f"<form><input placeholder='Name'> <select><option>A</option></select></form>"
        f"{buttons}{paragraphs}</body></html>"
    )


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def bench_screenshots(session: BrowserSession, rounds: int) -> dict[str, float]:
    fast, slow = [], []
    for _ in range(3):  # warm both paths
        session.screenshot()
        session.page.screenshot(type="png")
    for _ in range(rounds):  # interleaved, so load on the machine hits both alike
        started = time.perf_counter()
        session.screenshot()
        fast.append(time.perf_counter() - started)
        started = time.perf_counter()
        session.page.screenshot(type="png")
        slow.append(time.perf_counter() - started)
    cdp, playwright = statistics.median(fast), statistics.median(slow)
    return {
        "cdp_fast_ms": ms(cdp),
        "page_screenshot_ms": ms(playwright),
        "speedup": round(playwright / cdp, 2),
    }


def bench_lookup(session: BrowserSession, rounds: int, kind: str) -> dict[str, float]:
    rng = random.Random(1)
    lookups, ops = [], []
    for _ in range(rounds):
        x, y = rng.uniform(10, 1200), rng.uniform(10, 780)
        started = time.perf_counter()
        session.element_at(x, y)
        lookups.append(time.perf_counter() - started)
        op = MouseMove(x=x, y=y) if kind == "move" else MouseClick(x=x, y=y)
        ops.append(session.execute(op).duration_ms / 1000)
    lookup, op_time = statistics.median(lookups), statistics.median(ops)
    return {
        "lookup_ms": ms(lookup),
        "op_ms": ms(op_time),
        "lookup_share": round(lookup / op_time, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--smoke", action="store_true", help="two rounds (a check)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 2
    launched = open_browser(args.chromium)
    try:
        print(f"chromium {launched.browser.version}, viewport 1280x800, {args.rounds} rounds")
        session = BrowserSession(launched.browser, (1280, 800), settle_s=0)
        session.page.set_content(text_page())
        shots = bench_screenshots(session, args.rounds)
        print(
            f"screenshot  CDP optimizeForSpeed {shots['cdp_fast_ms']} ms  page.screenshot "
            f"{shots['page_screenshot_ms']} ms  ->  {shots['speedup']}x faster"
        )
        # A click no longer waits for a download that might start (settle picks one up): it
        # costs its own time, about a move's plus the click itself.
        for kind in ("move", "click"):
            got = bench_lookup(session, args.rounds, kind)
            print(
                f"lookup      mouse.{kind:<5}: look-up {got['lookup_ms']} "
                f"ms of {got['op_ms']} ms per op = {got['lookup_share']:.1%}"
            )
        session.close()
    finally:
        launched.close()


if __name__ == "__main__":
    main()
