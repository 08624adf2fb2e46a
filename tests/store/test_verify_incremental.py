"""Incremental ``verify``: after a check without an error, only what changed is read again, yet an
edit, a truncation and a removal made since are all found; seals are checked in full every time.

Real stores in tmp_path. The files and folders are dated a minute back before the first check:
a file changed within 2 s of a check is read again by the next one whatever its mtime says, and a
folder changed that recently is listed again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.store import Store
from ownloop.store import events as E
from ownloop.store.seal import seal_run
from tests.store.conftest import at
from tests.store.test_seal import write_run

_OWNLOOP = str(Path(sys.executable).with_name("ownloop"))


def age(store: Store, seconds: float = 60.0, *, files: bool = True) -> None:
    """Date every journal and blob file (unless not ``files``) and the folders holding them
    ``seconds`` back, as if written that long ago."""
    then = time.time() - seconds
    blob_files = [p for p in store.blobs.root.glob("*/*") if p.is_file()]
    for path in [*store.stream_paths(), *blob_files] if files else ():
        os.utime(path, (then, then))
    folders = [store.journal_dir, store.blobs.root]
    folders += [path for path in store.blobs.root.iterdir() if path.is_dir()]
    for folder in folders:
        os.utime(folder, (then, then))


def lines(store: Store, *, full: bool = False) -> list[str]:
    return [p.line() for p in store.verify(incremental=not full).problems]


@pytest.fixture
def checked(store: Store, record_session: Callable[..., str]) -> Store:
    """Three recorded sessions, checked once without an error."""
    for name in ("a", "b", "c"):
        record_session(name, steps=2)
    age(store)
    report = store.verify(incremental=True)
    assert report.problems == [] and report.unchanged_streams == 0
    return store


def test_an_unchanged_store_is_not_read_again(checked: Store) -> None:
    report = checked.verify(incremental=True)
    assert report.problems == []
    assert (report.streams, report.unchanged_streams, report.unchanged_blobs) == (4, 4, 3)
    assert report.summary() == (
        "verify: 4 streams, 40 events, 3 blobs: 0 errors, 0 warnings (4 streams and 3 blobs as "
        "the last check found them; ownloop verify --full reads them again)"
    )
    full = checked.verify()
    assert (full.problems, full.unchanged_streams, full.events) == ([], 0, 40)


def test_an_edit_after_a_check_is_found(checked: Store) -> None:
    path = checked.journal_dir / "b.jsonl"
    data = path.read_bytes()
    at_byte = data.index(b'"response":"click 1"') + len(b'"response":"click ')
    path.write_bytes(data[:at_byte] + b"7" + data[at_byte + 1 :])
    assert lines(checked) == [
        "error: journal/b.jsonl:3: bad checksum: the line's bytes were changed"
    ]
    assert checked.verify(incremental=True).unchanged_streams == 3  # only b.jsonl was read


def test_a_whole_rewritten_stream_is_found_though_its_chain_holds(
    checked: Store, record_session: Callable[..., str]
) -> None:
    # The same session recorded again, differently (another screenshot): a sound chain, but not
    # the lines the last check found.
    (checked.journal_dir / "b.jsonl").unlink()
    record_session("b", steps=2, png=b"another")
    assert lines(checked) == [
        "error: journal/b.jsonl: rewritten stream: its first 13 lines are not the ones the last "
        "verify checked"
    ]


def test_a_truncation_at_a_line_break_is_found(checked: Store) -> None:
    path = checked.journal_dir / "c.jsonl"
    kept = path.read_bytes().splitlines(keepends=True)[:-2]
    path.write_bytes(b"".join(kept))  # a sound chain, two lines short
    expected = ["error: journal/c.jsonl: truncated stream: 11 lines; the last verify checked 13"]
    assert lines(checked) == expected
    assert lines(checked, full=True) == expected  # --full compares with what was checked too


def test_a_removed_stream_is_found(checked: Store) -> None:
    (checked.journal_dir / "a.jsonl").unlink()
    assert lines(checked) == [
        "error: journal/a.jsonl: missing stream: the last verify checked it with 13 events; the "
        "file is gone"
    ]


def test_a_removed_blob_is_found(checked: Store) -> None:
    [blob] = [sha for sha in checked.blobs if checked.blobs.path(sha).read_bytes().endswith(b"c")]
    checked.blobs.path(blob).unlink()
    assert lines(checked) == [
        f"error: blob {blob}: missing blob: missing (referenced by journal/c.jsonl:2)"
    ]


def test_problems_found_are_found_again_until_mended(checked: Store) -> None:
    path = checked.journal_dir / "a.jsonl"
    original = path.read_bytes()
    path.write_bytes(original[:-1] + b" ")  # the last newline replaced
    first = lines(checked)
    assert first and first == lines(checked)  # an error is never remembered as sound
    path.write_bytes(original)
    assert lines(checked) == []


def test_an_edit_that_keeps_size_and_mtime_is_found_by_its_ctime(checked: Store) -> None:
    """An edit in place with the size and mtime put back still moves the file's ctime, which no
    user can set back: the incremental check reads the stream again."""
    path = checked.journal_dir / "b.jsonl"
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[data.index(b'"click 1"') + 7] = ord("7")
    with open(path, "r+b") as f:  # in place: the same inode
        f.write(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    assert (
        lines(checked)
        == lines(checked, full=True)
        == ["error: journal/b.jsonl:3: bad checksum: the line's bytes were changed"]
    )


def test_a_truncation_regrown_to_the_same_size_is_found(checked: Store) -> None:
    path = checked.journal_dir / "c.jsonl"
    data = path.read_bytes()
    last = data.splitlines(keepends=True)[-1]
    path.write_bytes(data[: -len(last)])  # two writes: truncated, then grown back
    with open(path, "ab") as f:
        f.write(last.replace(b'"score":1.0', b'"score":0.0'))
    assert path.stat().st_size == len(data)
    assert lines(checked) == [
        "error: journal/c.jsonl:13: bad checksum: the line's bytes were changed"
    ]


def test_a_new_blob_is_hashed_and_a_bad_one_found(checked: Store) -> None:
    bad = "f" * 64
    checked.blobs.path(bad).parent.mkdir(exist_ok=True)
    checked.blobs.path(bad).write_bytes(b"not what its name says")
    report = checked.verify(incremental=True)
    assert [p.line() for p in report.problems] == [
        f"error: blob {bad}: bad blob: bytes do not match the name (not referenced)"
    ]
    assert (report.unchanged_streams, report.unchanged_blobs) == (4, 3)


def test_an_unreferenced_blob_removed_is_forgotten_and_the_rest_kept(checked: Store) -> None:
    extra = checked.put_blob(b"referenced by no event")
    age(checked)
    assert checked.verify(incremental=True).blobs == 4
    checked.blobs.path(extra).unlink()  # its folder is listed again; the others are not
    report = checked.verify(incremental=True)
    assert (report.problems, report.blobs, report.unchanged_blobs) == ([], 3, 3)
    age(checked, files=False)  # the folder's change, long enough ago to trust
    again = checked.verify(incremental=True)
    assert (again.problems, again.blobs, again.unchanged_streams) == ([], 3, 4)


def test_warnings_are_reported_again_when_nothing_changed(checked: Store) -> None:
    with checked.stream("stray") as writer:  # names a run that never started
        writer.append(
            [E.SessionGraded(at=at(9), run_id="ghost", session_id="a", grader="g", score=0.0)]
        )
    age(checked)
    first = checked.verify(incremental=True)
    assert [p.kind for p in first.problems] == ["missing run"]
    again = checked.verify(incremental=True)
    assert (again.problems, again.unchanged_streams) == (first.problems, 5)
    assert again.summary().startswith("verify: 5 streams, 41 events, 3 blobs: 0 errors, 1 warning")


def test_a_damaged_state_makes_the_next_check_read_everything(checked: Store) -> None:
    state = checked.root / "verify.state"
    data = bytearray(state.read_bytes())
    data[-20:] = b"\xc1" * 20  # the remembered summaries, not the header
    state.write_bytes(bytes(data))
    assert checked.verify(incremental=True).unchanged_streams == 4  # nothing changed: not read
    path = checked.journal_dir / "b.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"response":"click 1"', b'"response":"click 7"'))
    report = checked.verify(incremental=True)
    assert [p.line() for p in report.problems] == [
        "error: journal/b.jsonl:3: bad checksum: the line's bytes were changed"
    ]
    assert report.unchanged_streams == 0  # without the summaries, every stream was read
    state.write_bytes(b"a state an older ownloop wrote")
    assert checked.verify(incremental=True).unchanged_streams == 0


def test_folders_changed_just_before_a_check_are_listed_once_more(
    store: Store, record_session: Callable[..., str]
) -> None:
    for name in ("a", "b"):
        record_session(name, steps=1)
    then = time.time() - 60
    for path in [*store.stream_paths(), *store.blobs.root.glob("*/*")]:
        os.utime(path, (then, then))
    store.verify(incremental=True)  # its folders changed within 2 s: not yet trusted
    for folder in [store.journal_dir, store.blobs.root, *store.blobs.root.iterdir()]:
        os.utime(folder, (then, then))  # as if that check had been made later
    assert store.verify(incremental=True).unchanged_streams == 3
    state = store.root / "verify.state"
    data = bytearray(state.read_bytes())
    data[-20:] = b"\xc1" * 20  # a check that needed the remembered summaries would read all
    state.write_bytes(bytes(data))
    report = store.verify(incremental=True)
    assert (report.problems, report.streams, report.unchanged_streams) == ([], 3, 3)
    assert state.read_bytes() == data  # nothing new to remember


def test_a_new_stream_is_read_and_the_rest_is_not(
    checked: Store, record_session: Callable[..., str]
) -> None:
    record_session("d", steps=1)
    with checked.stream("e") as writer:  # a stream whose blob is missing
        writer.append(
            [
                E.ScreenshotTaken(
                    at=at(1),
                    run_id="r1",
                    session_id="d",
                    step=9,
                    sha256="0" * 64,
                    width=1,
                    height=1,
                )
            ]
        )
    report = checked.verify(incremental=True)
    assert [p.line() for p in report.problems] == [
        f"error: blob {'0' * 64}: missing blob: missing (referenced by journal/e.jsonl:1)"
    ]
    assert (report.streams, report.unchanged_streams) == (6, 4)


def test_a_seal_is_checked_in_full_every_time(store: Store) -> None:
    write_run(store)
    assert seal_run(store, "r1").seal is not None
    age(store)
    assert lines(store) == []
    assert store.verify(incremental=True).unchanged_streams == 5  # nothing read again
    with store.stream("late") as writer:  # an event for the sealed run, in a stream of its own
        writer.append(
            [
                E.SessionGraded(
                    at=at(200), run_id="r1", session_id="r1-t1", grader="answer", score=0.0
                )
            ]
        )
    report = store.verify(incremental=True, run_id="r1")
    assert [p.kind for p in report.problems] == ["appended after the seal"]
    assert report.unchanged_streams == 0  # --run reads every stream of the run again


def test_the_command_checks_incrementally_and_full_on_demand(checked: Store) -> None:
    def verify(*args: str) -> str:
        done = subprocess.run(
            [_OWNLOOP, "--store", str(checked.root), "verify", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, "")
        return done.stdout

    assert verify() == (
        "verify: 4 streams, 40 events, 3 blobs: 0 errors, 0 warnings (4 streams and 3 blobs as "
        "the last check found them; ownloop verify --full reads them again)\n"
    )
    assert verify("--full") == "verify: 4 streams, 40 events, 3 blobs: 0 errors, 0 warnings\n"


def test_a_full_check_in_worker_processes_finds_what_one_process_finds(
    store: Store, record_session: Callable[..., str]
) -> None:
    for n in range(70):  # enough streams for worker processes
        record_session(f"s{n:02d}", steps=1)
    path = store.journal_dir / "s42.jsonl"
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"response":"click 1"', b'"response":"click 7"'))
    done = subprocess.run(
        [_OWNLOOP, "--store", str(store.root), "verify", "--full"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout.splitlines() == [
        *(p.line() for p in store.verify(incremental=False).problems),
        "verify: 71 streams, 561 events, 70 blobs: 1 error, 0 warnings",
    ]
    assert done.stdout.splitlines()[0] == (
        "error: journal/s42.jsonl:3: bad checksum: the line's bytes were changed"
    )
