"""The viewer's kept index (``ownloop.store.kept``): how fresh its pages are, and that it lets
other processes at the index (real journal, real DuckDB file, a real ``ownloop sql`` process)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.store.kept import KeptIndex
from ownloop.store.locks import IndexBusy, hold_lock
from ownloop.testing.synthetic import at
from ownloop.view.server import ViewServer


def _started(session_id: str, run_id: str = "live", second: float = 0) -> E.SessionStarted:
    task = E.Task(task_id=f"task-{session_id}", prompt="p", start_url="http://x/")
    return E.SessionStarted(at=at(second), run_id=run_id, session_id=session_id, task=task)


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def _store(tmp_path: Path) -> Store:
    store = open_store(tmp_path / "store", fsync=False)
    with store.stream("first") as stream:
        stream.append([_started("first0", "old")])
    return store


def test_events_appended_to_a_stream_show_within_the_interval(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with ViewServer(store) as url, store.stream("live") as stream:
        stream.append([_started("live0")])
        finished = url + "sessions?run=live&status=finished"
        assert 'data-session="live0"' in _page(url + "sessions?run=live")  # a new stream: at once
        assert 'data-session="live0"' not in _page(finished)
        stream.append(
            [
                E.SessionEnded(
                    at=at(5), run_id="live", session_id="live0", status="finished", steps=0
                )
            ]
        )
        deadline = time.monotonic() + 20
        while 'data-session="live0"' not in _page(finished):
            assert time.monotonic() < deadline, "the session's end never showed"
            time.sleep(0.1)
        assert "The index as of the journal at" in _page(url)


def test_the_index_lock_is_let_go_when_no_page_is_read(tmp_path: Path) -> None:
    store = _store(tmp_path)
    lock = store.root / "index.lock"
    with KeptIndex(store, interval=0.05, idle=2.0) as kept:
        with kept.reading() as held:
            assert held.sql("select count(*) from sessions").rows == [(1,)]
        with pytest.raises(IndexBusy), hold_lock(lock, exclusive=True, timeout=0.05):
            pass  # held between reads
        started = time.monotonic()
        with hold_lock(lock, exclusive=True, timeout=30):
            assert time.monotonic() - started >= 1.0  # not before it was idle
        with kept.reading() as held:  # and it comes back for the next read
            assert held.sql("select count(*) from sessions").rows == [(1,)]


def test_another_process_syncs_while_pages_are_read(tmp_path: Path) -> None:
    store = _store(tmp_path)
    stop = threading.Event()
    seen: list[int] = []
    with KeptIndex(store) as kept:

        def browse() -> None:  # someone clicking through the viewer all the while
            while not stop.is_set():
                with kept.reading() as held:
                    seen.append(int(held.sql("select count(*) from sessions").rows[0][0]))
                time.sleep(0.05)

        reader = threading.Thread(target=browse)
        reader.start()
        try:
            with store.stream("second") as stream:
                stream.append([_started("second0", "new", 1)])
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ownloop",
                    "--store",
                    str(store.root),
                    "sql",
                    "select count(*) as n from sessions",
                    "--format",
                    "csv",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "OWNLOOP_LOCK_TIMEOUT": "60"},
                check=False,
            )
        finally:
            stop.set()
            reader.join()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["n", "2"]
    assert seen[-1] == 2


def test_a_waiting_writer_gets_the_lock_while_pages_keep_coming(tmp_path: Path) -> None:
    store = _store(tmp_path)
    lock = store.root / "index.lock"
    stop = threading.Event()
    with KeptIndex(store, interval=0.05, idle=60, linger=1.0) as kept:

        def browse() -> None:
            while not stop.is_set():
                with kept.reading() as held:
                    held.sql("select count(*) from sessions")
                time.sleep(0.02)

        reader = threading.Thread(target=browse)
        reader.start()
        try:
            time.sleep(0.2)
            with pytest.raises(IndexBusy), hold_lock(lock, exclusive=True, timeout=0.1):
                pass  # held while pages come
            with hold_lock(lock, exclusive=True, timeout=20):
                pass  # yet let in within linger
        finally:
            stop.set()
            reader.join()
