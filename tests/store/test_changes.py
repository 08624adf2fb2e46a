"""The journal's change marker: a query sees every append without a stat of each stream."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from ownloop.store import Store
from ownloop.store import events as E
from ownloop.store.changes import MARKER, RACY_NS, TOUCH_EVERY_NS, look, unchanged
from ownloop.store.index import Index
from ownloop.store.kept import KeptIndex
from tests.store.conftest import at


def _run_event(i: int) -> E.Event:
    return E.RunStarted(at=at(i), run_id=f"r{i}")


def _lines(store: Store) -> int:
    return store.sql("select count(*) from journal").rows[0][0]


def _age(journal: Path, seconds: float) -> None:
    """Set the marker's and the folder's times back, as if nothing was appended for a while."""
    then = time.time() - seconds
    for path in (journal / MARKER, journal):
        os.utime(path, (then, then))


def test_every_append_in_the_same_second_as_a_check_is_seen(store: Store) -> None:
    # Each append lands within a few milliseconds of the check before it: the same tick of the
    # file system's clock, so the marker's time alone could not tell them apart.
    with store.stream("s") as stream:
        for n in range(1, 51):
            stream.append([_run_event(n)])
            assert _lines(store) == n
            assert _lines(store) == n  # a check with nothing new agrees


def test_a_check_never_misses_an_append_a_concurrent_writer_acknowledged(store: Store) -> None:
    acknowledged = 0
    done, checked = threading.Event(), threading.Event()

    def write() -> None:
        nonlocal acknowledged
        with store.stream("s") as stream, store.stream("t") as other:
            for n in range(1, 201):
                (stream if n % 2 else other).append([_run_event(n)])
                acknowledged = n
                if n % 10 == 0:  # let a check in now and then, however the threads are run
                    checked.wait()
                    checked.clear()
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    checks = 0
    while not done.is_set() or checks == 0:
        before = acknowledged  # acknowledged before the check began: it must be seen
        assert _lines(store) >= before
        with KeptIndex(store, keep=False) as kept, kept.reading() as reading:  # `sessions`
            assert reading.sql("select count(*) from journal").rows[0][0] >= before
        checks += 1
        checked.set()
    writer.join()
    assert _lines(store) == 200
    assert checks >= 20


def test_an_old_marker_is_trusted_and_the_next_append_moves_it(store: Store) -> None:
    with store.stream("t") as other:
        other.append([_run_event(0)])
    with store.stream("s") as stream:
        stream.append([_run_event(1)])
        store.sync()
        index = Index(store)
        _age(store.journal_dir, 10)
        store.sync()  # remembers the journal as it is now: nothing changed for 10 s
        assert index.unchanged_since(look(store.journal_dir)) is not None
        # A line added by hand, not by a writer, does not move the marker: the look alone
        # (what a query takes) does not see it; `ownloop index` (a sync) stats every stream.
        with open(store.journal_dir / "t.jsonl", "ab") as f:
            f.write(b'{"seq":2')  # the start of a line
        assert index.current()
        assert not index.up_to_date()
        store.sync()
        _age(store.journal_dir, 10)
        store.sync()
        assert index.current() and _lines(store) == 2
        stream.append([_run_event(2)])  # within the same second as that sync
        assert not index.current()
        assert _lines(store) == 3


def test_a_look_taken_in_the_same_tick_as_the_marker_is_not_trusted(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    journal.mkdir()
    (journal / MARKER).touch()
    now = look(journal)
    assert not unchanged(now, look(journal))  # changed within RACY_NS of the look
    _age(journal, RACY_NS / 1e9 + 1)
    old = look(journal)
    assert unchanged(old, look(journal))
    (journal / "s.jsonl").touch()  # a new stream changes the folder
    assert not unchanged(old, look(journal))


def test_a_journal_without_a_marker_is_checked_stream_by_stream(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    journal.mkdir()
    then = time.time() - 10
    os.utime(journal, (then, then))
    old = look(journal)
    assert not unchanged(old, look(journal))


def _marker(store: Store) -> tuple[int, int]:
    stat = os.stat(store.journal_dir / MARKER)
    return stat.st_mtime_ns, stat.st_ctime_ns


def test_a_writer_touches_the_marker_once_a_second_and_no_append_is_missed(store: Store) -> None:
    with store.stream("s") as stream:
        started = time.time_ns()
        stream.append([_run_event(1)])
        first = _marker(store)
        stream.append([_run_event(2)])
        again = _marker(store)
        if time.time_ns() - started >= TOUCH_EVERY_NS:
            pytest.skip("the machine paused for over a second between the two appends")
        assert again == first  # the second append left the marker as the first did
        assert _lines(store) == 2  # and a query sees both: the marker moved under a second ago
        stream.append([_run_event(3)])  # (as every append of the same-second test above)
        assert _lines(store) == 3


def test_a_marker_moved_by_anything_else_is_touched_again(store: Store) -> None:
    with store.stream("s") as stream:
        stream.append([_run_event(1)])
        _age(store.journal_dir, 10)  # e.g. the clock was set back
        aged = _marker(store)
        stream.append([_run_event(2)])
        assert _marker(store) != aged
