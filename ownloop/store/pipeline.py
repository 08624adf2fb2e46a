"""A sync's ingest: which streams have new bytes, and how their lines reach DuckDB.

From nothing (or with many new bytes) worker processes check and decode shares of the streams
while this process's DuckDB writes what they send back (``ingest.Decoders``); else, and for
streams too big for one batch, it is done here, pipelined (``_ingest_here``). Each batch is
written in one transaction, with each stream's byte offset: a sync that stops keeps whole
batches. ``index.py`` decides when to sync and owns the files; this module only feeds it.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path
from typing import NamedTuple

import duckdb

from ownloop.errors import OwnloopError
from ownloop.store.ingest import (
    Decoded,
    Decoders,
    Task,
    _Batch,
    _complete_lines,
    plan,
)
from ownloop.store.ingest_rows import _Mark, write_rows
from ownloop.store.journal import ChainState

__all__ = ["SyncResult", "ingest_streams", "ingested_marks"]

_BATCH = 32 << 20  # bytes of lines decoded before they are written to DuckDB
# New bytes from which a sync decodes in worker processes (a rebuild of about 150,000 events):
# below it, starting them costs more than they save.
_PARALLEL_BYTES = 64 << 20
_WRITE_MOST = 256 << 20  # journal bytes whose rows the workers' ingest writes in one go


def _cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class SyncResult(NamedTuple):
    """What one sync did."""

    streams: int  # streams that had new bytes
    events: int  # events ingested
    skipped: int  # complete lines that did not decode (see the skipped_lines table)
    rebuilt: bool  # the index was created or rebuilt from nothing
    damaged: int = 0  # lines whose checksum or chain failed (see the damage view)
    accepted: bool = False  # damaged lines were projected all the same (--accept-damaged)

    def summary(self) -> str:
        what = "rebuilt" if self.rebuilt else "up to date"
        line = f"index {what}: {self.events} new events from {self.streams} streams"
        if self.damaged:
            fate = (
                "projected all the same (--accept-damaged)"
                if self.accepted
                else "quarantined, not projected"
            )
            line += (
                f"; {self.damaged} damaged lines {fate}: see "
                'ownloop sql "select * from damage" and run: ownloop verify'
            )
        if self.skipped:
            line += (
                f"; {self.skipped} lines did not decode (see the skipped_lines table and "
                "run: ownloop verify)"
            )
        return line


def ingested_marks(con: duckdb.DuckDBPyConnection) -> dict[str, _Mark]:
    """Where the index stands in each stream (its ``streams`` table): the bytes ingested, the
    size last seen and the chain's state there."""
    return {
        s: _Mark(i, z, ChainState(p or "", q or 0))
        for s, i, z, p, q in con.execute(
            "select stream, ingested, size, last_sum, last_seq from streams"
        ).fetchall()
    }


def ingest_streams(
    con: duckdb.DuckDBPyConnection,
    journal_dir: Path,
    sizes: dict[str, int],
    known: dict[str, _Mark],
    runs: set[str],
    accept: bool,
    processes: int | None,
) -> SyncResult:
    """Read every stream whose size changed (``sizes``: each stream's size now); ``known``
    (``ingested_marks``) is updated to what was committed, and ``runs`` gets the runs whose
    scored units the committed rows may change (``write_rows``). ``accept``: project damaged
    lines all the same; ``processes``: as for ``Index.sync``.

    Raises:
        OwnloopError: a stream is shorter than the index says.
    """
    work = _work(sizes, known)
    done = SyncResult(len(work), 0, 0, False)
    count = processes
    if count is None:
        new = sum(size - ingested for _, ingested, size, _ in work)
        count = _cpus() if new >= _PARALLEL_BYTES else 0
    with _cyclic_gc_off():
        if count > 1 and work:
            tasks, work = plan(work, count, _BATCH)
            try:
                decoders = Decoders(count, str(journal_dir), accept)
            except OSError:  # no interpreter to start (e.g. an embedded Python): do it here
                work = [item for task in tasks for item in task.streams] + work
                work.sort()
            else:
                # DuckDB's writer on the cores the decoding workers leave it: on two cores, one
                # thread; a second one only competes with the workers. (Without workers,
                # DuckDB's own threads shorten a big in-process ingest, for the same CPU.) The
                # setting is the database's: given back however the workers end.
                con.execute(f"set threads = {max(1, _cpus() - count)}")
                try:
                    done = _write_decoded(con, decoders, tasks, known, runs, done)
                finally:
                    decoders.close()
                    con.execute("reset threads")
        return _ingest_here(con, journal_dir, work, known, runs, accept, done)


def _work(sizes: dict[str, int], known: dict[str, _Mark]) -> list[tuple[str, int, int, ChainState]]:
    """(stream, bytes ingested, size now, the chain there) of each stream whose size changed."""
    work: list[tuple[str, int, int, ChainState]] = []
    for stream, size in sorted(sizes.items()):
        ingested, seen, chain = known.get(stream, _Mark(0, -1, ChainState()))
        if size == seen:
            continue
        if size < ingested:
            raise OwnloopError(
                f"journal stream {stream} is shorter than the index says ({size} < "
                f"{ingested} bytes). Check it with: ownloop verify; then: ownloop index "
                "--rebuild"
            )
        work.append((stream, ingested, size, chain))
    return work


@contextmanager
def _cyclic_gc_off() -> Iterator[None]:
    """Decoding allocates millions of small objects that all stay alive until they are written:
    the cyclic GC would rescan them again and again (quadratic), and there are no cycles to
    find."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _write_decoded(
    con: duckdb.DuckDBPyConnection,
    decoders: Decoders,
    tasks: list[Task],
    known: dict[str, _Mark],
    runs: set[str],
    done: SyncResult,
) -> SyncResult:
    """Write what the workers send back, in task order, while they decode what follows: a
    third of the whole per transaction (at least a batch's worth, at most ``_WRITE_MOST``;
    the parent holds them as Arrow tables, about 40% of their journal bytes). DuckDB
    writes a transaction that large straight to its file; smaller ones go through its
    WAL first, which costs it more than the inserts themselves."""
    total = sum(size - ingested for task in tasks for _, ingested, size, _ in task.streams)
    most = min(_WRITE_MOST, max(_BATCH, total // 3 + 1))
    pending: list[Decoded] = []

    def write() -> SyncResult:
        runs.update(write_rows(con, [decoded.rows() for decoded in pending]))
        for decoded in pending:
            known.update(decoded.marks)
        return done._replace(
            events=done.events + sum(decoded.events for decoded in pending),
            skipped=done.skipped + sum(decoded.skipped for decoded in pending),
            damaged=done.damaged + sum(decoded.damaged for decoded in pending),
        )

    # While DuckDB writes a transaction, the workers go on with as many tasks again.
    ahead = -(-most * len(tasks) // max(1, total))
    with closing(decoders.run(tasks, ahead)) as decoding:
        for decoded_run in decoding:
            pending += decoded_run
            if sum(decoded.nbytes for decoded in pending) >= most:
                done, pending = write(), []
    return write() if pending else done


def _ingest_here(
    con: duckdb.DuckDBPyConnection,
    journal_dir: Path,
    work: list[tuple[str, int, int, ChainState]],
    known: dict[str, _Mark],
    runs: set[str],
    accept: bool,
    done: SyncResult,
) -> SyncResult:
    """Ingest ``work`` in this process, adding to ``done``. Batches are pipelined: while
    DuckDB writes one batch (on a thread of its own; it runs without the GIL), the next is
    read, checked, decoded and turned into Arrow tables."""
    if not work:
        return done
    batch, events, skipped, damaged = _Batch(accept), 0, 0, 0
    journal = str(journal_dir)
    with ThreadPoolExecutor(1, thread_name_prefix="ownloop-ingest") as writer:
        writing: Future[set[str]] | None = None
        marks: dict[str, _Mark] = {}  # the marks of the batch being written

        def write(batch: _Batch) -> None:
            nonlocal writing, marks
            rows = batch.rows()  # while the batch before is still being written
            if writing is not None:
                runs.update(writing.result())  # its error, if any, is this sync's error
                known.update(marks)
            writing, marks = writer.submit(rows.write, con), batch.marks

        for stream, ingested, size, chain in work:
            end = ingested
            for base, chunk in _complete_lines(
                os.path.join(journal, stream + ".jsonl"), ingested, size
            ):
                chain = batch.add(stream, base, chunk, chain)
                end = base + len(chunk)
                if batch.nbytes >= _BATCH:
                    batch.marks[stream] = _Mark(end, -1, chain)  # not finished yet
                    write(batch)
                    events += len(batch.events)
                    skipped += len(batch.skipped[0])
                    damaged += len(batch.damaged)
                    batch = _Batch(accept)
            batch.marks[stream] = _Mark(end, size, chain)
        write(batch)
        assert writing is not None
        runs.update(writing.result())
        known.update(marks)
    events += len(batch.events)
    skipped += len(batch.skipped[0])
    damaged += len(batch.damaged)
    return done._replace(
        events=done.events + events,
        skipped=done.skipped + skipped,
        damaged=done.damaged + damaged,
    )
