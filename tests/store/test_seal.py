"""``ownloop seal`` and ``verify --run``: a run audited, sealed, and every tampering found.

The runs here are written event by event as the recorder writes them (a run stream with its
RunStarted, a stream per session named after it, a catalog entry as each session ends), so the
seal and the checks see the same shapes as in a recorded run.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.store.journal import check_stream, read_lines
from ownloop.store.lines import checksum
from ownloop.store.seal import RunIsSealed, seal_run, sealed_fingerprint
from tests.store.conftest import at, step_events

_OWNLOOP = str(Path(sys.executable).with_name("ownloop"))


def write_run(
    store: Store,
    run_id: str = "r1",
    tasks: tuple[str, ...] = ("t1", "t2", "t3"),
    *,
    budget: int = 5,
    counted: Callable[[str], bool] = lambda task: True,
    end_run: bool = True,
    budgets: dict[str, int] | None = None,
) -> None:
    """A finished run of ``tasks``: each one session of 2 steps, graded and counted."""
    run = store.stream(f"run-{run_id}")
    run.append(
        [
            E.RunStarted(
                at=at(0), run_id=run_id, agent="uitars", model="m", task_ids=tasks, max_steps=budget
            )
        ]
    )
    for n, task in enumerate(tasks):
        session = f"{run_id}-{task}"
        sha = store.put_blob(f"png {session}".encode())
        events: list[E.Event] = [
            E.SessionStarted(
                at=at(n * 10 + 1),
                run_id=run_id,
                session_id=session,
                task=E.Task(task_id=task, prompt="do it", start_url="http://x/"),
                budget=(budgets or {}).get(task, budget),
            )
        ]
        for step in (1, 2):
            events += step_events(run_id, session, step, sha, n * 10 + 1 + step)
        events += [
            E.SessionEnded(
                at=at(n * 10 + 5),
                run_id=run_id,
                session_id=session,
                status="finished",
                steps=2,
                answer="42",
            ),
            E.SessionGraded(
                at=at(n * 10 + 6),
                run_id=run_id,
                session_id=session,
                grader="answer",
                score=1.0,
                passed=True,
            ),
            E.SessionCounted(
                at=at(n * 10 + 6),
                run_id=run_id,
                session_id=session,
                task_id=task,
                counted=counted(task),
                winner=session,
            ),
        ]
        with store.stream(session) as writer:
            writer.append(events)
        run.append([E.StreamsCataloged(at=at(n * 10 + 7), run_id=run_id, heads=(writer.head(),))])
    if end_run:
        run.append([E.RunEnded(at=at(99), run_id=run_id, counts={"finished": len(tasks)})])
    run.close()


@pytest.fixture(scope="module")
def sealed_made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store whose run r1 is written and sealed (made once; tests take a copy) and the
    seal's fingerprint."""
    store = open_store(tmp_path_factory.mktemp("sealed") / "store", fsync=False)
    write_run(store)
    result = seal_run(store, "r1")
    assert result.reasons == [] and result.seal is not None
    return store.root, result.seal.fingerprint


@pytest.fixture(scope="module")
def unsealed_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose run r1 is written, not yet indexed nor sealed (made once)."""
    store = open_store(tmp_path_factory.mktemp("unsealed") / "store", fsync=False)
    write_run(store)
    return store.root


def _copy(made: Path, tmp_path: Path) -> Store:
    shutil.copytree(made, tmp_path / "store")
    return open_store(tmp_path / "store", fsync=False)


@pytest.fixture
def sealed(sealed_made: tuple[Path, str], tmp_path: Path) -> tuple[Store, str]:
    """A copy of ``sealed_made`` of the test's own."""
    made, fingerprint = sealed_made
    return _copy(made, tmp_path), fingerprint


@pytest.mark.slow
def test_a_complete_run_is_sealed_with_a_fingerprint(sealed: tuple[Store, str]) -> None:
    store, fingerprint = sealed
    assert len(fingerprint) == 64 and sealed_fingerprint(store, "r1") == fingerprint
    report = store.verify(run_id="r1", fingerprint=fingerprint[:16])
    assert report.problems == []
    [seal] = store.sql("select sessions, streams, blobs, budget from run_sealed").rows
    assert seal[2:] == (3, 5)


def test_the_audit_fails_closed_with_every_reason(store: Store) -> None:
    write_run(
        store,
        tasks=("t1", "t2", "t3", "t4"),
        end_run=False,
        counted=lambda task: task != "t2",
        budgets={"t3": 9},
    )
    with store.stream("extra") as writer:  # t4 counted twice
        writer.append(
            [
                E.SessionStarted(
                    at=at(60),
                    run_id="r1",
                    session_id="extra",
                    task=E.Task(task_id="t4", prompt="", start_url=""),
                    budget=5,
                ),
                E.SessionCounted(
                    at=at(61), run_id="r1", session_id="extra", task_id="t4", counted=True
                ),
            ]
        )
    result = seal_run(store, "r1")
    assert result.seal is None and sealed_fingerprint(store, "r1") is None
    assert result.reasons == [
        "the run has no end after its last start: a recorder is running it, or was killed "
        "(resume it with the same ownloop record command)",
        "session extra (t4) has no end",
        "task t2 has 0 counted sessions, not 1: resume the run to record it",
        "task t4 has 2 counted sessions, not 1",
        "mixed step budgets: run r1 declared 5 steps but its sessions ran under 5 and 9; "
        "compare only sessions where comparable (ownloop sessions shows it)",
    ]
    assert result.lines()[-1] == "run r1 was not sealed: 5 reasons above"


@pytest.mark.slow
def test_damage_and_missing_blobs_stop_the_seal(store: Store) -> None:
    write_run(store)
    [sha] = [s for s in store.blobs][:1]
    store.blobs.path(sha).unlink()
    path = store.journal_dir / "r1-t2.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"answer":"42"', b'"answer":"43"'))
    reasons = seal_run(store, "r1").reasons
    assert any("bad checksum" in r and "r1-t2.jsonl" in r for r in reasons)
    assert any("missing blob" in r for r in reasons)


def test_a_sealed_run_takes_nothing_more(sealed: tuple[Store, str]) -> None:
    store, fingerprint = sealed
    with pytest.raises(RunIsSealed, match="is sealed already"):
        seal_run(store, "r1")
    # A regrade is recorded against the seal; the sealed grade stays.
    from ownloop.replay.regrade import regrade

    regrade(store, run_id="r1", grader="answer:exact:nope")
    assert store.sql("select distinct score from sessions where run_id = 'r1'").rows == [(1.0,)]
    assert store.sql(
        "select count(*) from grades where against_seal = $f", {"f": fingerprint}
    ).rows == [(3,)]
    assert store.verify(run_id="r1").problems == []
    # Anything else is found.
    with store.stream("late") as writer:
        writer.append(
            [
                E.SessionGraded(
                    at=at(200), run_id="r1", session_id="r1-t1", grader="answer", score=0.0
                )
            ]
        )
    assert [p.kind for p in store.verify(run_id="r1").problems] == ["appended after the seal"]


def _rechain(path: Path, old: bytes, new: bytes) -> None:
    """Edit a line and recompute every sum after it: the stream's own chain is valid again."""
    out, prev = [], ""
    for line in read_lines(path):
        raw = path.read_bytes()[line.offset : line.end - 1]
        body = raw[raw.index(b',"event":') + len(b',"event":') : -1].replace(old, new)
        total = checksum(prev, line.seq, body)
        out.append(
            b'{"seq":%d,"prev":"%s","sum":"%s","event":%s}\n'
            % (line.seq, prev.encode(), total.encode(), body)
        )
        prev = total
    path.write_bytes(b"".join(out))


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _seal_stream(store: Store) -> Path:
    return next(p for p in store.stream_paths() if b'"kind":"run_sealed"' in p.read_bytes())


_TAMPERING: dict[str, Callable[[Store], None]] = {
    "flip a byte": lambda s: _flip(s.journal_dir / "r1-t2.jsonl"),
    "delete the first line": lambda s: _keep(s.journal_dir / "r1-t2.jsonl", slice(1, None)),
    "delete a middle line": lambda s: _drop(s.journal_dir / "r1-t2.jsonl", 5),
    "delete the last line": lambda s: _keep(s.journal_dir / "r1-t2.jsonl", slice(None, -1)),
    "truncate at a line boundary": lambda s: _keep(s.journal_dir / "r1-t2.jsonl", slice(0, 4)),
    "empty a stream": lambda s: (s.journal_dir / "r1-t2.jsonl").write_bytes(b""),
    "delete a stream": lambda s: (s.journal_dir / "r1-t2.jsonl").unlink(),
    "swap two streams": lambda s: _swap(
        s.journal_dir / "r1-t1.jsonl", s.journal_dir / "r1-t3.jsonl"
    ),
    "delete the run stream": lambda s: (s.journal_dir / "run-r1.jsonl").unlink(),
    "delete the last line of the run stream": lambda s: _keep(
        s.journal_dir / "run-r1.jsonl", slice(None, -1)
    ),
    "delete a blob": lambda s: s.blobs.path(next(iter(s.blobs))).unlink(),
    "corrupt a blob": lambda s: _flip(s.blobs.path(next(iter(s.blobs)))),
    "re-chain an edit": lambda s: _rechain(s.journal_dir / "r1-t2.jsonl", b'"42"', b'"43"'),
    "re-chain the run stream": lambda s: _rechain(
        s.journal_dir / "run-r1.jsonl", b'"finished":3', b'"finished":2'
    ),
    "delete the seal": lambda s: _seal_stream(s).unlink(),
    "re-chain an edit and re-seal it": lambda s: _forge_seal(s),
}


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle] = ord("7") if data[middle] != ord("7") else ord("8")
    path.write_bytes(bytes(data))


def _keep(path: Path, part: slice) -> None:
    path.write_bytes(b"".join(_lines(path)[part]))


def _drop(path: Path, index: int) -> None:
    lines = _lines(path)
    path.write_bytes(b"".join(lines[:index] + lines[index + 1 :]))


def _swap(a: Path, b: Path) -> None:
    data = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(data)


def _forge_seal(store: Store) -> None:
    """A forger who re-chains an edit and writes a fresh, self-consistent seal for it."""
    path = store.journal_dir / "r1-t2.jsonl"
    before = check_stream(path).sums[-1]
    _rechain(path, b'"42"', b'"43"')
    # ... and the run stream's catalog entry for it, re-chained too.
    _rechain(
        store.journal_dir / "run-r1.jsonl", before.encode(), check_stream(path).sums[-1].encode()
    )
    seal_path = _seal_stream(store)
    seal_path.unlink()
    store.rebuild_index()
    assert store.verify().problems == []  # a perfect forgery, but for the cited fingerprint
    assert seal_run(store, "r1").seal is not None


@pytest.mark.parametrize("how", list(_TAMPERING))
@pytest.mark.slow
def test_every_tampering_of_a_sealed_run_is_found(sealed: tuple[Store, str], how: str) -> None:
    store, fingerprint = sealed
    _TAMPERING[how](store)
    report = store.verify(run_id="r1", fingerprint=fingerprint)
    assert report.errors > 0, how


# What `verify` finds without a seal (docs/store.md's table): the catalog of the run's stream
# covers its session streams; the run stream's own tail and a re-chained run stream need the
# seal, and a deleted run stream is only a warning.
_UNSEALED_FOUND = {
    "flip a byte": "error",
    "delete the first line": "error",
    "delete a middle line": "error",
    "delete the last line": "error",
    "truncate at a line boundary": "error",
    "empty a stream": "error",
    "delete a stream": "error",
    "swap two streams": "error",
    "delete the run stream": "warning",
    "delete the last line of the run stream": None,
    "delete a blob": "error",
    "corrupt a blob": "error",
    "re-chain an edit": "error",
    "re-chain the run stream": None,
}


@pytest.mark.parametrize("how", list(_UNSEALED_FOUND))
def test_what_verify_finds_in_an_unsealed_run(
    unsealed_made: Path, tmp_path: Path, how: str
) -> None:
    store = _copy(unsealed_made, tmp_path)
    _TAMPERING[how](store)
    report = store.verify()
    found = "error" if report.errors else "warning" if report.warnings else None
    assert found == _UNSEALED_FOUND[how]


@pytest.mark.slow
def test_seal_and_verify_from_the_command_line(store: Store) -> None:
    write_run(store)
    done = subprocess.run(
        [_OWNLOOP, "--store", str(store.root), "seal", "--run", "r1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "sealed run r1: 3 sessions (3 counted), 4 streams, 3 blobs, budget 5"
    fingerprint = lines[1].split()[1]
    [seal] = store.sql("select fingerprint from run_sealed").rows
    assert seal == (fingerprint,)
    check = subprocess.run(
        [
            _OWNLOOP,
            "--store",
            str(store.root),
            "verify",
            "--run",
            "r1",
            "--fingerprint",
            fingerprint[:12],
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 0, check.stdout
    other = subprocess.run(
        [
            _OWNLOOP,
            "--store",
            str(store.root),
            "verify",
            "--run",
            "r1",
            "--fingerprint",
            hashlib.sha256(b"x").hexdigest(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert other.returncode == 1 and "other fingerprint" in other.stdout
    again = subprocess.run(
        [_OWNLOOP, "--store", str(store.root), "seal", "--run", "r1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 1
    assert again.stderr == (
        f"Error: run r1 is sealed already ({fingerprint[:16]}). Check it "
        f"with: ownloop --store {store.root} verify --run r1\n"
    )


@pytest.mark.slow
def test_import_into_a_sealed_run_is_refused(sealed: tuple[Store, str], tmp_path: Path) -> None:
    store, fingerprint = sealed
    folder = tmp_path / "results" / "task-1"
    folder.mkdir(parents=True)
    (folder / "session.json").write_text('{"task_id": "task-1", "status": "finished"}')
    done = subprocess.run(
        [
            _OWNLOOP,
            "--store",
            str(store.root),
            "import",
            str(tmp_path / "results"),
            "--agent",
            "uitars",
            "--run",
            "r1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: run r1 is sealed ({fingerprint[:16]}) and takes no more "
        "events: import into another run with --run NAME\n"
    )
    assert store.verify(run_id="r1").problems == []
