"""The README's screenshots of ``ownloop view``, taken from a demo store at 1280x900.

    .venv/bin/python docs/make_screenshots.py                 # records a demo store, then shoots
    .venv/bin/python docs/make_screenshots.py --store DIR     # reuse DIR (recorded when empty)

The demo store is two real recordings of the uitars agent on six MiniWoB tasks, three repeats
each, against the scripted expert endpoint: one run without noise and one where a step answers a
plausible wrong action with probability 0.3, so the runs disagree on some tasks.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

from ownloop.demo import DEMO_TASKS
from ownloop.modelserver.endpoint import Serving, make_server
from ownloop.store import Store, open_store
from ownloop.view.grid import build_grid
from ownloop.view.server import ViewServer
from ownloop.world.browser import open_browser

DOCS = Path(__file__).resolve().parent
RUNS = (("expert", 0.0), ("noisy", 0.3))


def record(root: Path) -> None:
    for run, noise in RUNS:
        with make_server("miniwob", "uitars", serving=Serving(noise=noise, noise_seed=3)) as url:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ownloop",
                    "--store",
                    str(root),
                    "record",
                    "uitars",
                    "--suite",
                    "miniwob:" + ",".join(DEMO_TASKS),
                    "--endpoint",
                    url,
                    "--model",
                    "expert",
                    "--run",
                    run,
                    "--repeat",
                    "3",
                    "--workers",
                    "2",
                    "--max-steps",
                    "12",
                    "--settle",
                    "0.1",
                ],
                check=False,
            )


def shoot(store: Store) -> None:
    grid = build_grid(store, [run for run, _ in RUNS])
    flipped = next((row for row in grid.rows if row.flipped or row.mixed), grid.rows[0])
    pair = next(cell.pair_url for cell in flipped.cells[1:] if cell.pair_url)
    session, step = store.sql(
        "select session_id, min(step) from actions where kind = 'click' and session_id in "
        "(select session_id from sessions where run_id = 'noisy' and steps > 2) "
        "group by session_id order by session_id limit 1"
    ).rows[0]
    word = "click"
    launched = open_browser()
    try:
        with ViewServer(store, port=0) as url:
            page: Any = launched.browser.new_page(viewport={"width": 1280, "height": 900})

            def save(name: str, path: str, then: Any = None) -> None:
                page.goto(url + path)
                page.wait_for_load_state("networkidle")
                if then is not None:
                    then()
                page.wait_for_timeout(300)
                page.screenshot(path=str(DOCS / f"view-{name}.png"))
                print(f"docs/view-{name}.png  /{path}")

            save("runs", "")
            save("run", "run/noisy")
            save("compare", "compare?" + urllib.parse.urlencode([("run", run) for run, _ in RUNS]))

            def crop() -> None:  # MiniWoB draws its task in a corner of a grey page
                page.locator("button.crop").first.click()
                page.wait_for_timeout(800)
                page.locator("section.step.current").scroll_into_view_if_needed()

            save("pair", pair.lstrip("/"), crop)
            save("search", "search?q=" + word)

            def magnify() -> None:
                page.click(f"#step-{step} button.magnify")
                page.mouse.move(10, 10)
                page.evaluate("window.scrollTo(0, 0)")

            save("session", f"session/{session}#step-{step}", magnify)
            page.close()
    finally:
        launched.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path)
    args = parser.parse_args()
    root = args.store or Path(tempfile.mkdtemp(prefix="view-docs-")) / "store"
    if not (root / "journal").exists():
        record(root)
    shoot(open_store(root))


if __name__ == "__main__":
    main()
