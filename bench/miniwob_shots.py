"""Real MiniWoB screenshots for the benchmarks, taken in headless Chromium and cached.

``real_screenshots(sessions, steps)`` gives, per session, the PNG of the page after each of its
steps: a MiniWoB task (ten kinds, a seed per session) started through ownloop's own suite code,
then per step a click at a seeded random point of the task area or typing a word, as an agent
acts. Many steps change nothing on the page (a click on blank space, typing with no field
focused), so consecutive screenshots often repeat, as in real runs.

The PNGs are kept in the temporary folder, keyed by the ownloop and miniwob versions and the
steps per session (session ``s`` is always the same task, seed and actions), so a rerun reads them
back in a second instead of driving the browser again, and a shorter run reuses a longer one's.
"""

from __future__ import annotations

import importlib.metadata
import random
import sys
import tempfile
import time
from pathlib import Path

TASKS = (
    "click-button,click-checkboxes,enter-text,click-link,click-option,focus-text,click-dialog,"
    "click-tab,login-user,choose-list"
)
WORDS = ("hello", "Kasey", "blue", "ok", "42", "submit", "Nathalie", "yes")


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def cache_folder(steps: int) -> Path:
    key = f"ownloop-{_version('ownloop')}-miniwob-{_version('miniwob')}-{steps}-steps"
    return Path(tempfile.gettempdir()) / "ownloop-bench-shots" / key


def real_screenshots(sessions: int, steps: int, folder: Path | None = None) -> list[list[bytes]]:
    """``steps`` screenshots for each of ``sessions`` MiniWoB sessions (cached in ``folder``,
    by default the temporary folder's, see above)."""
    folder = folder or cache_folder(steps)
    missing = [s for s in range(sessions) if not (folder / f"{s:04d}" / "done").exists()]
    if missing:
        _capture(folder, missing, steps)
    return [
        [(folder / f"{s:04d}" / f"{i:02d}.png").read_bytes() for i in range(steps)]
        for s in range(sessions)
    ]


def _capture(folder: Path, sessions: list[int], steps: int) -> None:
    from ownloop.store import events as E
    from ownloop.world.browser import BrowserSession
    from ownloop.world.chromium import open_browser
    from ownloop.world.suites.miniwob import MiniwobSuite

    names = TASKS.split(",")
    per_name = max(sessions) // len(names) + 1
    print(f"  capturing {len(sessions)} x {steps} MiniWoB screenshots in Chromium ...", flush=True)
    started = time.perf_counter()
    launched = open_browser()
    try:
        with MiniwobSuite(TASKS, seeds=f"1-{per_name}", browser=launched.browser) as suite:
            # Session s: task kind s % 10, seed s // 10 + 1.
            by_id = {task.task_id: task for task in suite.tasks()}
            for n, s in enumerate(sessions):
                task = by_id[f"{names[s % len(names)]}-{s // len(names) + 1}"]
                rng = random.Random(s)
                session = BrowserSession(
                    launched.browser, (1280, 800), settle_s=0.02, event_grace_s=0.0
                )
                target = folder / f"{s:04d}"
                target.mkdir(parents=True, exist_ok=True)
                try:
                    suite.prepare(session, task)
                    for i in range(steps):
                        op: E.Op
                        if rng.random() < 0.75:
                            op = E.MouseClick(x=rng.uniform(5, 155), y=rng.uniform(55, 205))
                        else:
                            op = E.KeyboardType(text=rng.choice(WORDS))
                        session.execute(op)
                        session.settle(download_grace=False)
                        (target / f"{i:02d}.png").write_bytes(session.screenshot().png)
                    (target / "done").write_text("")
                finally:
                    session.close()
                if n % 10 == 9:
                    print(
                        f"    {n + 1} sessions, {time.perf_counter() - started:.0f} s", flush=True
                    )
    finally:
        launched.close()


if __name__ == "__main__":
    # bench/miniwob_shots.py [N]: N sessions of 20 steps (default 2); --smoke: one session of two
    # steps, taken afresh into a folder of its own (a check that capturing still works)
    if sys.argv[1:] == ["--smoke"]:
        with tempfile.TemporaryDirectory() as fresh:
            shots = real_screenshots(1, 2, Path(fresh))
    else:
        shots = real_screenshots(int(sys.argv[1]) if len(sys.argv) > 1 else 2, 20)
    flat = [png for session in shots for png in session]
    print(f"{len(flat)} PNGs, {len(set(flat))} distinct, {sum(map(len, flat)) / 1e6:.1f} MB")
