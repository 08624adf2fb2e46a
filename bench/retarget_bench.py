"""Retarget benchmark: replaying MiniWoB sessions on other seeds, ``ignore`` vs ``retarget``.

    .venv/bin/python bench/retarget_bench.py                    # six task types, 20 seeds each
    .venv/bin/python bench/retarget_bench.py --seeds 5 --tasks focus-text,click-dialog

One session per task type is recorded with the scripted expert (uitars, on the task's default
seed), then re-executed with ``--execute ops`` on each of ``--seeds`` other seeds of the same
task, once with ``--on-diverge ignore`` (act at the recorded points) and once with ``retarget``
(find the recorded element again). A replay earns a reward when the new episode's MiniWoB reward
is positive. Also replayed once per policy on the recorded seed, where both must earn it. Printed:
per task, the rewards of each policy out of the replays, and the rung counts of their operations.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.modelserver.endpoint import make_server
from ownloop.replay.execute import execute_session
from ownloop.replay.fidelity import RUNGS
from ownloop.replay.fold import Session, fold
from ownloop.replay.options import ReplayOptions
from ownloop.store import Store, open_store
from ownloop.world.suites.miniwob import default_seed

TASKS = "click-button,click-dialog,click-link,enter-text,focus-text,click-tab"
POLICIES = ("ignore", "retarget")


def record(store_path: Path, tasks: str) -> dict[str, Session]:
    """One expert session per task type, on its default seed; keyed by task name."""
    with make_server("miniwob", "uitars") as url:
        result = CliRunner().invoke(
            cli,
            [
                "--store",
                str(store_path),
                "record",
                "uitars",
                "--suite",
                f"miniwob:{tasks}",
                "--endpoint",
                url,
                "--model",
                "expert",
                "--run",
                "bench",
                "--settle",
                "0.1",
                "--workers",
                "1",
            ],
            catch_exceptions=False,
        )
    if result.exit_code != 0:
        raise SystemExit(result.output)
    store = open_store(store_path)
    sessions = {}
    for (session_id,) in store.sql(
        "select session_id from sessions where status = 'finished' and passed"
    ).rows:
        session = fold(store.session_events(session_id), session_id)
        sessions[session.task_id.rsplit("-", 1)[0]] = session
    return sessions


def replay(store: Store, parent: Session, policy: str, seed: int) -> tuple[bool, list[int]]:
    """Whether the replay on ``seed`` earned a reward, and its operations per rung."""
    done = execute_session(
        store, parent, "ops", ReplayOptions(on_diverge=policy, seed=seed, settle_s=0.1)
    )
    grade = done.child.latest_grade
    counts = [0] * len(RUNGS)
    for step in done.child.steps:
        if step.fidelity is not None:
            for i, rung in enumerate(RUNGS):
                counts[i] += getattr(step.fidelity, f"{rung}_ops")
    return bool(grade and grade.passed), counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--seeds", type=int, default=20, help="other seeds per task")
    parser.add_argument(
        "--smoke", action="store_true", help="one task, one other seed, no same-seed replay"
    )
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.seeds = "focus-text", 1
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="retarget-bench-") as folder:
        sessions = record(Path(folder) / "store", args.tasks)
        store = open_store(Path(folder) / "store")
        header = (
            f"{'task':<18} {'same seed':>10} "
            + " ".join(f"{policy + ' reward':>16}" for policy in POLICIES)
            + "   rungs ("
            + "/".join(RUNGS)
            + ") ignore | retarget"
        )
        print(header)
        totals = {policy: 0 for policy in POLICIES}
        replays = 0
        for name in args.tasks.split(","):
            parent = sessions.get(name)
            if parent is None:
                print(f"{name:<18} (the expert's recording did not pass: skipped)")
                continue
            recorded_seed = (
                parent.task.seed
                if parent.task and parent.task.seed is not None
                else default_seed(name)
            )
            # --smoke: only the other seed's replays (the same function on the recorded seed)
            same = [
                replay(store, parent, policy, recorded_seed)[0]
                for policy in POLICIES
                if not args.smoke
            ]
            seeds = [s for s in range(1, args.seeds + 2) if s != recorded_seed][: args.seeds]
            rewards = {policy: 0 for policy in POLICIES}
            rungs = {policy: [0] * len(RUNGS) for policy in POLICIES}
            for seed in seeds:
                for policy in POLICIES:
                    passed, counts = replay(store, parent, policy, seed)
                    rewards[policy] += passed
                    rungs[policy] = [a + b for a, b in zip(rungs[policy], counts, strict=True)]
            replays += len(seeds)
            for policy in POLICIES:
                totals[policy] += rewards[policy]
            print(
                f"{name:<18} {'/'.join('yes' if s else 'NO' for s in same):>10} "
                + " ".join(f"{rewards[p]:>10}/{len(seeds):<5}" for p in POLICIES)
                + "   "
                + " | ".join("/".join(map(str, rungs[p])) for p in POLICIES),
                flush=True,
            )
        print(
            f"{'all':<18} {'':>10} " + " ".join(f"{totals[p]:>10}/{replays:<5}" for p in POLICIES)
        )
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
