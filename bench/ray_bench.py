"""Sessions per minute: ``--executor threads`` against ``--executor ray`` on a two-node local Ray
cluster, the same MiniWoB tasks and scripted expert, one store; and the numbers a 100-node run
is sized from (docs/performance.md, "Threads and Ray"): journal bytes and events per session,
claim files per task, index ingest speed for the resulting journal.

Runs itself in a fresh network and pid namespace (Linux, root: ``unshare``), where Ray uses
127.0.0.1 and ``ray stop`` sees only the bench's own cluster.

    .venv/bin/python bench/ray_bench.py [--tasks GLOBS] [--seeds N] [--workers N]
    .venv/bin/python bench/ray_bench.py --smoke   # one task, one seed, one worker, one node
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store

TASKS = "click-button,click-link,focus-text,click-checkboxes,enter-text,login-user"
_INSIDE = "OWNLOOP_BENCH_NETNS"
_BIN = Path(sys.executable).parent
_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _ray(*args: str, tries: int = 1) -> None:
    """``ray ARGS``; with ``tries``, again after ``ray stop`` when a node did not come up in
    Ray's own 30 s (on a heavily loaded machine its raylet can take longer to register)."""
    for attempt in range(1, tries + 1):
        done = subprocess.run(
            [str(_BIN / "ray"), *args],
            env={**os.environ, **_ENV},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if not done.returncode:
            return
        if attempt < tries and "timed out during startup" in done.stderr:
            _ray("stop", "--force")
            continue
        sys.exit(f"ray {' '.join(args)}: exit {done.returncode}\n{done.stdout}{done.stderr}")


def _record(store: Path, url: str, run: str, args: argparse.Namespace, *extra: str) -> float:
    """Seconds one ``ownloop record`` took, start to exit (Ray: connecting and actors too)."""
    began = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ownloop",
            "--store",
            str(store),
            "record",
            "uitars",
            "--model",
            "m",
            "--endpoint",
            url,
            "--run",
            run,
            "--suite",
            f"miniwob:{args.tasks}",
            "--seeds",
            f"1-{args.seeds}",
            "--settle",
            "0",
            "--workers",
            str(args.workers),
            *extra,
        ],
        env={**os.environ, **_ENV},
        check=True,
        capture_output=True,
        timeout=3600,
    )
    return time.monotonic() - began


def _journal(store: Path) -> tuple[int, int]:
    """(bytes, lines) of every stream in the store."""
    size = lines = 0
    for path in (store / "journal").glob("*.jsonl"):
        data = path.read_bytes()
        size += len(data)
        lines += data.count(b"\n")
    return size, lines


def bench(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="raybench", dir="/tmp"))
    store = folder / "store"
    common = ["--num-cpus", str(args.cpus), "--disable-usage-stats"]
    _ray(
        "start",
        "--head",
        "--port",
        "6379",
        "--temp-dir",
        str(folder / "h"),
        "--include-dashboard=false",
        *common,
        tries=2,
    )
    if not args.smoke:  # a check needs no second node: the recorder reaches the head alike
        _ray("start", "--address", "127.0.0.1:6379", "--temp-dir", str(folder / "w"), *common)
    try:
        with make_server("miniwob", "uitars") as url:
            threads_s = _record(store, url, "threads", args)
            ray_s = _record(
                store, url, "ray", args, "--executor", "ray", "--ray-address", "127.0.0.1:6379"
            )
        sessions = (
            open_store(store)
            .sql(
                "select run_id, count(*), sum(steps), sum(seconds) from sessions group by run_id "
                "order by run_id"
            )
            .rows
        )
        size, lines = _journal(store)
        claim_files = sum(1 for _ in (store / "claims").rglob("*.*") if _.is_file())
        blobs = sum(p.stat().st_size for p in (store / "blobs").rglob("*") if p.is_file())
        ingest_store = folder / "ingest"
        shutil.copytree(store / "journal", ingest_store / "journal")
        (ingest_store / "blobs").mkdir()
        began = time.monotonic()
        open_store(ingest_store).sync()
        ingest_s = time.monotonic() - began
    finally:
        _ray("stop", "--force")
        shutil.rmtree(folder, ignore_errors=True)
    total = sum(n for _, n, _, _ in sessions)
    steps = sum(s for _, _, s, _ in sessions)
    print(f"cpus per node {args.cpus}, workers {args.workers}, {os.cpu_count()} cores")
    for run, seconds in (("threads", threads_s), ("ray", ray_s)):
        n = next(count for name, count, _, _ in sessions if name == run)
        print(
            f"{run:8} {n} sessions in {seconds:6.1f}s wall: {60 * n / seconds:6.1f} "
            "sessions/min (process start, Ray connect and actor start included)"
        )
    print(
        f"journal: {size / total / 1024:.1f} KiB and {lines / total:.1f} lines per session "
        f"({steps / total:.1f} steps); blobs {blobs / total / 1024:.1f} KiB per session"
    )
    print(
        f"claims: {claim_files / total:.1f} files per session (claim, release or done), "
        "plus one mtime touch per held claim every lease/4"
    )
    print(f"index ingest: {lines} lines in {ingest_s:.2f}s = {lines / ingest_s:,.0f} lines/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=TASKS, help="MiniWoB task globs")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per task (1-N)")
    parser.add_argument("--workers", type=int, default=2, help="browsers at once, both runs")
    parser.add_argument("--cpus", type=int, default=1, help="--num-cpus of each Ray node")
    parser.add_argument(
        "--smoke", action="store_true", help="one task, one seed, a one-node cluster (a check)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.tasks, args.seeds, args.workers = "click-button", 1, 1
    if os.environ.get(_INSIDE) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        bench(args)
        return
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        sys.exit("ray_bench needs root and unshare (it runs its cluster in a network namespace)")
    done = subprocess.run(
        ["unshare", "--net", "--pid", "--fork", "--mount-proc", sys.executable, *sys.argv],
        env={**os.environ, _INSIDE: "1"},
    )
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
