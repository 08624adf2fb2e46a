"""Real processes: many writers and ``ownloop sql`` at once, and writers killed with SIGKILL."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ownloop.store import open_store
from ownloop.store.blobs import file_system
from ownloop.store.compact import unpack

pytestmark = pytest.mark.slow

_WRITER = str(Path(__file__).with_name("writer_process.py"))
_OWNLOOP = str(Path(sys.executable).with_name("ownloop"))


def start_writer(
    root: Path,
    session: str,
    events: int,
    batch: int,
    fsync: bool,
    payload: int,
    *,
    blobs: str = "",
) -> subprocess.Popen[str]:
    """A writer process (``writer_process.py``); ``blobs``: "blobs" (a file each) or "packed"
    (a pack), a new blob each step."""
    return subprocess.Popen(
        [
            sys.executable,
            _WRITER,
            str(root),
            session,
            str(events),
            str(batch),
            "1" if fsync else "0",
            str(payload),
            *([blobs] if blobs else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_sql(root: Path, query: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [_OWNLOOP, "--store", str(root), "sql", "--format", "csv", query],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish_sql(process: subprocess.Popen[str]) -> int:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert err == ""
    return int(out.splitlines()[1])


def test_four_writers_and_concurrent_sql(tmp_path: Path) -> None:
    root = tmp_path / "store"
    writers = [start_writer(root, f"w{i}", 10_000, 10, True, 100) for i in range(4)]
    for writer in writers:  # the store is there before the first query, however slow the start
        assert writer.stdout is not None
        assert writer.stdout.readline().startswith("acked ")
    query = "select count(*) from model_called"
    counts = []
    while any(w.poll() is None for w in writers):
        # Two `ownloop sql` at once, both while the writers append: both must succeed.
        pair = [start_sql(root, query), start_sql(root, query)]
        counts += [finish_sql(p) for p in pair]
    for w in writers:
        out, err = w.communicate()
        assert w.returncode == 0, err
        assert out.splitlines()[-1] == "acked 10000"
    assert finish_sql(start_sql(root, query)) == 40_000
    assert counts, "the writers finished before any query ran"
    assert all(0 <= c <= 40_000 for c in counts)
    store = open_store(root)
    assert store.sql(
        "select session_id, count(*), count(distinct step), min(step), max(step) "
        "from model_called group by all order by 1"
    ).rows == [(f"w{i}", 10_000, 10_000, 0, 9_999) for i in range(4)]
    assert store.verify().problems == []


def test_writers_killed_at_random_moments_lose_nothing_acknowledged(tmp_path: Path) -> None:
    root = tmp_path / "store"
    rng = random.Random(os.getpid())
    acked: dict[str, int] = {}
    try:
        for i in range(20):
            # Big batches make a kill in the middle of a write (a torn tail) likely; half the
            # writers fsync, as recorders do, half do not, which tears more often.
            with start_writer(root, f"k{i}", 2_000, 100, i % 2 == 0, 8_000) as writer:
                assert writer.stdout is not None
                first = writer.stdout.readline()
                assert first.startswith("acked ")
                time.sleep(rng.uniform(0, 0.15))
                writer.send_signal(signal.SIGKILL)
                # Read the rest through the same buffered reader: readline() may already hold
                # the later acks (communicate() would read the raw pipe and miss them).
                acks = [first] + writer.stdout.read().splitlines()
            acked[f"k{i}"] = int(acks[-1].split()[1])
        store = open_store(root, fsync=False)
        present = dict(store.sql("select session_id, count(*) from model_called group by all").rows)
        for session, n in acked.items():
            assert n <= present[session] <= n + 100, (session, n, present[session])
        for path in store.stream_paths():
            if path.stem.startswith("start-"):
                continue
            steps = [e.step for e in store.read_stream(path.stem)]  # type: ignore[attr-defined]
            assert steps == list(range(len(steps)))
        report = store.verify()
        torn = sum(not p.read_bytes().endswith(b"\n") for p in store.stream_paths())
        assert [p.kind for p in report.problems] == ["torn tail"] * torn
        assert report.errors == 0 and report.exit_code() == 0
        # A later writer appends normally, and its events are queryable.
        later = start_writer(root, "later", 50, 10, True, 10)
        out, err = later.communicate(timeout=60)
        assert later.returncode == 0, err
        assert store.sql("select count(*) from model_called where session_id = 'later'").rows == [
            (50,)
        ]
        print(f"{torn} of 20 kills left a torn tail")
    finally:
        shutil.rmtree(root, ignore_errors=True)  # up to ~150 MB of journal


@pytest.mark.parametrize(("blobs", "kills"), [("blobs", 12), ("packed", 8)])
def test_steps_killed_at_random_moments_name_only_blobs_that_are_there(
    tmp_path: Path, blobs: str, kills: int
) -> None:
    # Each step stores a new 200 kB blob, then appends the line naming it: the line's fsync is
    # the step's one sync where the file system allows it (ext4, XFS), else each blob is
    # fsync'd first. Killed anywhere, no line names a blob that is missing or cut short; with
    # packs (a recorder's default), the packs the kills left are written out as files after.
    root = tmp_path / "store"
    store = open_store(root)
    assert store.blobs.synced_with_journal is (file_system(tmp_path) in ("ext4", "ext3", "xfs"))
    rng = random.Random(os.getpid())
    acked: dict[str, int] = {}
    for i in range(kills):
        with start_writer(root, f"b{i}", 400, 2, True, 200_000, blobs=blobs) as writer:
            assert writer.stdout is not None
            first = writer.stdout.readline()
            assert first.startswith("acked "), writer.stderr.read() if writer.stderr else ""
            time.sleep(rng.uniform(0, 0.3))
            writer.send_signal(signal.SIGKILL)
            acks = [first] + writer.stdout.read().splitlines()
        acked[f"b{i}"] = int(acks[-1].split()[1])
    shots = dict(store.sql("select session_id, count(*) from screenshots group by all").rows)
    for session, n in acked.items():
        assert n // 2 <= shots[session] <= n // 2 + 1, (session, n, shots[session])
    report = store.verify()
    torn = sum(not p.read_bytes().endswith(b"\n") for p in store.stream_paths())
    assert [p.kind for p in report.problems] == ["torn tail"] * torn
    assert report.errors == 0 and report.exit_code() == 0
    if blobs == "packed":
        named = {sha for (sha,) in store.sql("select sha256 from screenshots").rows}
        assert named <= store.blobs.packed_names() and not list(root.glob("blobs/??/*"))
        assert unpack(store.blobs).unpacked == kills  # the kills left them unlocked
        assert not list(store.blobs.packs.iterdir())
        assert all(store.blobs.check(sha) is None for sha in named)
        full = store.verify()
        assert full.errors == 0 and full.exit_code() == 0, full.problems
