"""Claims on real files, raced by real threads and processes (ownloop.store.claims)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ownloop.store.claims import Claims, Counting, holder_alive, lease_seconds, this_holder

# A claimant in its own process: claims TASKS (comma list) under HOLDER (default: itself), prints
# one JSON line per task it won, then sleeps (renewing) until killed.
_CLAIMANT = """
import json, sys, time
from pathlib import Path
from ownloop.store.claims import Claims
root, run, lease, holder, tasks, start = sys.argv[1:7]
claims = Claims(Path(root), run, lease_s=float(lease), holder=holder or None)
while time.time() < float(start):
    time.sleep(0.001)
for task in tasks.split(","):
    claim = claims.claim(task, 1, "s-" + task + "-" + str(__import__("os").getpid()))
    if claim is not None:
        print(json.dumps({"task": task, "took_over": claim.took_over}), flush=True)
print("ready", flush=True)
time.sleep(600)
"""


def _claimant(
    root: Path, tasks: list[str], *, lease: float = 60.0, holder: str = "", start: float = 0.0
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CLAIMANT,
            str(root),
            "r1",
            str(lease),
            holder,
            ",".join(tasks),
            str(start),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def _won(proc: subprocess.Popen[str]) -> list[dict[str, object]]:
    won = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "ready":
            return won
        won.append(json.loads(line))
    raise AssertionError(f"claimant exited with {proc.wait()}")


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.stdout is not None:  # else an unclosed-pipe ResourceWarning
        proc.stdout.close()


def test_a_claim_is_exclusive_until_released_then_the_next_attempt_takes_it(tmp_path: Path) -> None:
    a = Claims(tmp_path, "r1", lease_s=60, holder=this_holder())
    b = Claims(tmp_path, "r1", lease_s=60, holder=this_holder())
    first = a.claim("t1", 1, "s1", attempt=1)
    assert first is not None and first.generation == 1 and first.took_over is None
    assert b.claim("t1", 1, "s2") is None  # held, renewed, its process alive
    assert b.in_flight("t1") == "s1"
    assert b.claim("t2", 1, "s3") is not None  # another task is free
    a.release(first)
    assert b.in_flight("t1") is None
    second = b.claim("t1", 1, "s4", attempt=1)
    assert second is not None and second.generation == 2 and second.attempt == 2
    a.close()
    b.close()
    # Names come from hashes, never from task or run ids.
    names = [p.name for p in tmp_path.rglob("*")]
    assert not any("t1" in n or "r1" in n for n in names), names


def test_the_first_scored_session_wins_and_a_done_task_is_not_claimed(tmp_path: Path) -> None:
    claims = Claims(tmp_path, "r1", lease_s=60)
    claim = claims.claim("t1", 1, "s1")
    assert claim is not None
    assert claims.finish("t1", 1, "s1") == (True, "s1")
    assert claims.finish("t1", 1, "s2") == (False, "s1")
    assert claims.winner("t1") == "s1" and claims.held() == []
    assert claims.claim("t1", 1, "s3") is None
    assert claims.winner("t1", 2) is None and claims.claim("t1", 2, "s4") is not None  # repeat 2
    claims.close()


def test_racing_threads_finish_one_task_one_winner(tmp_path: Path) -> None:
    claims = Claims(tmp_path, "r1", lease_s=60)
    results: list[Counting] = []
    gate = threading.Barrier(8)

    def finish(number: int) -> None:
        gate.wait()
        results.append(claims.finish("t1", 1, f"s{number}"))

    threads = [threading.Thread(target=finish, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = {winner for _, winner in results}
    assert len(winners) == 1 and sum(counted for counted, _ in results) == 1


def test_racing_processes_claim_each_task_exactly_once(tmp_path: Path) -> None:
    tasks = [f"task-{n}" for n in range(30)]
    start = time.time() + 1.5  # every claimant waits for the same moment
    procs = [_claimant(tmp_path, tasks if n % 2 else tasks[::-1], start=start) for n in range(4)]
    try:
        won = [item["task"] for proc in procs for item in _won(proc)]
    finally:
        for proc in procs:
            _kill(proc)
    assert sorted(won) == sorted(tasks)


def test_a_killed_claimant_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    proc = _claimant(tmp_path, ["t1"])
    assert [w["task"] for w in _won(proc)] == ["t1"]
    claims = Claims(tmp_path, "r1", lease_s=600)
    assert claims.claim("t1", 1, "s2") is None  # its holder runs
    holder = json.loads(
        (
            claims.dir / next(p.name for p in claims.dir.iterdir() if p.name.endswith(".1.claim"))
        ).read_text()
    )["holder"]
    assert holder_alive(holder) is True
    _kill(proc)
    assert holder_alive(holder) is False
    taken = claims.claim("t1", 1, "s2")
    assert taken is not None and taken.took_over == holder and taken.generation == 2
    claims.close()


def test_a_renewed_lease_holds_and_an_unrenewed_one_goes_stale(tmp_path: Path) -> None:
    # A holder on another machine: its liveness cannot be checked, only its lease.
    proc = _claimant(tmp_path, ["t1"], lease=0.4, holder="far-host:4242:1")
    assert len(_won(proc)) == 1
    claims = Claims(tmp_path, "r1", lease_s=0.4)
    time.sleep(1.2)  # three leases: only renewal keeps it
    assert claims.claim("t1", 1, "s2") is None
    _kill(proc)
    time.sleep(0.6)
    taken = claims.claim("t1", 1, "s2")
    assert taken is not None and taken.took_over == "far-host:4242:1"
    claims.close()


def test_racing_takers_of_a_stale_claim_have_one_winner(tmp_path: Path) -> None:
    proc = _claimant(tmp_path, ["t1"], lease=0.3, holder="gone-host:1:1")
    _won(proc)
    _kill(proc)
    time.sleep(0.5)
    start = time.time() + 1.5
    takers = [_claimant(tmp_path, ["t1"], lease=0.3, start=start) for _ in range(4)]
    try:
        won = [item for taker in takers for item in _won(taker)]
    finally:
        for taker in takers:
            _kill(taker)
    assert len(won) == 1 and won[0]["took_over"] == "gone-host:1:1", won


def test_crash_marks_and_the_contract_are_written_once(tmp_path: Path) -> None:
    a = Claims(tmp_path, "r1", lease_s=60)
    b = Claims(tmp_path, "r1", lease_s=60)
    assert [a.mark_crashed("s1"), b.mark_crashed("s1")] == [True, False]
    assert a.admit(b'{"max_steps":40}') == b'{"max_steps":40}'
    assert b.admit(b'{"max_steps":20}') == b'{"max_steps":40}'


def test_the_lease_is_the_task_timeout_plus_a_margin_unless_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OWNLOOP_CLAIM_LEASE", raising=False)
    assert lease_seconds(1800) == 1860
    monkeypatch.setenv("OWNLOOP_CLAIM_LEASE", "2.5")
    assert lease_seconds(1800) == 2.5


def test_no_temporary_file_is_left_behind(tmp_path: Path) -> None:
    claims = Claims(tmp_path, "r1", lease_s=60)
    claim = claims.claim("t1", 1, "s1")
    assert claim is not None
    claims.release(claim)
    claims.finish("t1", 1, "s1")
    claims.close()
    assert not [p for p in claims.dir.iterdir() if p.name.endswith(".tmp")]
    assert os.listdir(claims.dir)


def test_a_temporary_file_a_kill_left_is_reported_then_removed_by_the_next_recorder(
    tmp_path: Path,
) -> None:
    from ownloop.store import events as E
    from ownloop.store import open_store
    from ownloop.store.claims import claims_dir

    store = open_store(tmp_path / "store", fsync=False)
    with store.stream("run-r1") as writer:  # a journal: what verify checks
        writer.append([E.RunStarted(at=E.now(), run_id="r1", agent="uitars", model="m")])
    first = Claims(store.root, "r1", lease_s=60.0)
    claim = first.claim("t1", 1, "s1")
    assert claim is not None
    first.close()
    # What a kill -9 between writing the release and linking it leaves (``_create``'s name).
    folder = claims_dir(store.root, "r1")
    stale = folder / f".{claim.path.with_suffix('.released').name}.999999.1.tmp"
    stale.write_bytes(b'{"holder": "killed"}\n')
    os.utime(stale, (time.time() - 120, time.time() - 120))
    fresh = folder / ".other.claim.999998.1.tmp"  # a live writer's, a moment old: kept
    fresh.write_bytes(b"{}\n")
    where = stale.relative_to(store.root).as_posix()

    def verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(Path(sys.executable).with_name("ownloop")), "--store", str(store.root), "verify"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    before = verify()
    assert before.returncode == 0, before.stderr
    assert before.stdout.splitlines()[0] == (
        f"warning: {where}: stale temporary file: left by a recorder killed while writing a "
        "claim; the next recorder of the run removes it (or delete it)"
    )
    Claims(store.root, "r1", lease_s=60.0).close()  # the next recorder of the run
    assert not stale.exists() and fresh.exists()
    after = verify()
    assert "stale temporary file" not in after.stdout
