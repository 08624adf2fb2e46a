"""Turning journal lines into the index's rows: checked, decoded and built as Arrow tables.

``_Batch`` checks and decodes lines and builds their rows (``ingest_rows._Rows``), which
``write_rows`` inserts in one DuckDB transaction. ``Decoders`` runs that work in worker
processes (plain ``python -c`` children started with ``subprocess``, never a copy of the
caller's main module), each taking a share of the streams and sending the rows back as Arrow
IPC bytes over its stdout while the parent's DuckDB writes: used when an ingest has many new
bytes, e.g. from nothing (``pipeline.py`` decides). The workers do not import DuckDB and open
nothing but the journal files they are given.
"""

from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Generator, Iterator, Sequence
from itertools import accumulate, repeat
from operator import itemgetter
from pathlib import Path
from queue import SimpleQueue
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from ownloop.errors import OwnloopError
from ownloop.store.events import Event
from ownloop.store.ingest_rows import _Mark, _marks_table, _Rows
from ownloop.store.journal import (
    ChainState,
    DecodedLines,
    check_chain,
    decode_intact,
    decode_lines,
)
from ownloop.store.schema import SESSION_FACT_KINDS, TABLE_BY_TYPE, TABLES

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_CHUNK = 16 << 20  # bytes read from a stream at a time
_CODE_BY_TYPE = {table.event_type: code for code, table in enumerate(TABLES)}


class _Batch:
    """Decoded lines waiting to be written, as flat columns in journal order, and skipped lines.

    Each line's checksum and link to the line before are checked first: a damaged line is
    quarantined (listed in ``damaged_lines``, not projected) unless ``accept_damaged``.
    """

    def __init__(self, accept_damaged: bool = False) -> None:
        self.accept_damaged = accept_damaged
        # (stream, byte offset, byte length, kind, detail) of each damaged line: rare, so rows
        self.damaged: list[tuple[str, int, int, str, str]] = []
        self.nbytes = 0
        self.events: list[Event] = []
        self.streams: list[str] = []
        self.seqs: list[int] = []
        self.offsets: list[int] = []
        self.lengths: list[int] = []
        self.skipped: tuple[list[str], list[int], list[str]] = ([], [], [])
        self.marks: dict[str, _Mark] = {}

    def add(self, stream: str, base: int, chunk: bytes, chain: ChainState) -> ChainState:
        """Check and decode ``chunk`` (complete lines of ``stream`` from byte ``base``, where
        the chain stood at ``chain``); returns the chain's state after it."""
        raw_lines = chunk.split(b"\n")
        raw_lines.pop()  # the chunk ends with a newline
        lengths = list(map((1).__add__, map(len, raw_lines)))
        offsets = list(accumulate(lengths[:-1], initial=base))
        intact = decode_intact(raw_lines, chain)
        if intact is not None:  # the common case: nothing damaged, everything decodes
            decoded, chain = intact
            self._keep(stream, decoded, offsets, lengths, len(chunk))
            return chain
        damaged, chain = check_chain(raw_lines, chain)
        if damaged:
            self.damaged += [
                (stream, offsets[i], lengths[i], kind, detail) for i, kind, detail in damaged
            ]
            if not self.accept_damaged:
                bad = {i for i, _, _ in damaged}
                keep = [i for i in range(len(raw_lines)) if i not in bad]
                raw_lines = [raw_lines[i] for i in keep]
                lengths = [lengths[i] for i in keep]
                offsets = [offsets[i] for i in keep]
        decoded = decode_lines(raw_lines)
        for i, error in decoded.errors:
            self.skipped[0].append(stream)
            self.skipped[1].append(offsets[i])
            self.skipped[2].append(error)
        if decoded.positions is not None:
            offsets = [offsets[i] for i in decoded.positions]
            lengths = [lengths[i] for i in decoded.positions]
        self._keep(stream, decoded, offsets, lengths, len(chunk))
        return chain

    def _keep(
        self,
        stream: str,
        decoded: DecodedLines,
        offsets: list[int],
        lengths: list[int],
        nbytes: int,
    ) -> None:
        # Only C-level list operations per event here: grouping by kind waits for write().
        self.events += decoded.events
        self.seqs += decoded.seqs
        self.offsets += offsets
        self.lengths += lengths
        self.streams += repeat(stream, len(decoded.events))
        self.nbytes += nbytes

    def _by_kind(self) -> Iterator[tuple[type, slice, list[int]]]:
        """Each kind present, the slice of the kind-ordered rows it holds, and that ordering."""
        codes = list(map(_CODE_BY_TYPE.__getitem__, map(type, self.events)))
        # A stable sort of positions by kind keeps each kind's rows in journal order.
        order = sorted(range(len(codes)), key=codes.__getitem__)
        counts = Counter(codes)
        start = 0
        for code in sorted(counts):
            end = start + counts[code]
            yield TABLES[code].event_type, slice(start, end), order
            start = end

    def rows(self) -> _Rows:
        """Build every row to write as Arrow tables: the Python share of writing the batch."""
        import pyarrow as pa  # only a sync that has lines to ingest pays for it

        inserts: list[tuple[str, pa.Table]] = []
        journal = []
        touched = []  # session ids whose session_facts row the new events change
        if self.events:
            parts = list(self._by_kind())
            order = parts[0][2]
            take = itemgetter(*order) if len(order) > 1 else (lambda rows: (rows[order[0]],))
            events, streams, seqs = take(self.events), take(self.streams), take(self.seqs)
            offsets, lengths = take(self.offsets), take(self.lengths)
            for kind, rows_of, _ in parts:
                table = TABLE_BY_TYPE[kind]
                rows = table.arrow_table(
                    streams[rows_of], seqs[rows_of], events[rows_of], offsets[rows_of]
                )
                inserts.append((table.name, rows))
                if table.name in SESSION_FACT_KINDS:
                    touched.append(rows.column("session_id"))
                # The journal rows reuse the columns just built for the kind's table.
                journal.append(
                    pa.table(
                        {
                            "stream": rows.column("stream"),
                            "byte_offset": pa.array(offsets[rows_of], pa.int64()),
                            "byte_length": pa.array(lengths[rows_of], pa.int64()),
                            "seq": rows.column("seq"),
                            "kind": pa.array([table.name] * rows.num_rows, pa.string()),
                            "session_id": rows.column("session_id"),
                            "run_id": rows.column("run_id"),
                            "time": rows.column("time"),
                        }
                    )
                )
        if journal:
            inserts.append(("journal", pa.concat_tables(journal)))
        if self.skipped[0]:
            inserts.append(
                (
                    "skipped_lines",
                    pa.table(
                        {
                            "stream": self.skipped[0],
                            "byte_offset": self.skipped[1],
                            "error": self.skipped[2],
                        }
                    ),
                )
            )
        if self.damaged:
            streams, offsets, lengths, kinds, details = map(list, zip(*self.damaged, strict=True))
            inserts.append(
                (
                    "damaged_lines",
                    pa.table(
                        {
                            "stream": streams,
                            "byte_offset": pa.array(offsets, pa.int64()),
                            "byte_length": pa.array(lengths, pa.int64()),
                            "kind": kinds,
                            "detail": details,
                            "projected": [self.accept_damaged] * len(streams),
                        }
                    ),
                )
            )
        marks = _marks_table(self.marks) if self.marks else None
        facts = None
        if touched:
            facts = pa.table(
                {
                    "session_id": pa.chunked_array(
                        [chunk for column in touched for chunk in column.chunks], pa.string()
                    )
                }
            )
        return _Rows(inserts, facts, marks)

    def write(self, con: duckdb.DuckDBPyConnection) -> set[str]:
        """Insert everything and move the streams' offsets, in one transaction; the runs whose
        scored units it may change."""
        return self.rows().write(con)


def _complete_lines(path: str | Path, start: int, size: int) -> Iterator[tuple[int, bytes]]:
    """Chunks of ``path`` between ``start`` and ``size`` that end with a newline, with offsets."""
    # os-level reads: most streams are small, and a buffered file object costs more than them.
    fd = os.open(path, os.O_RDONLY)
    try:
        offset, pending, position = start, b"", start
        while position < size:
            piece = os.pread(fd, min(_CHUNK, size - position), position)
            if not piece:
                return
            position += len(piece)
            data = pending + piece if pending else piece
            cut = data.rfind(b"\n") + 1
            if cut:
                yield offset, data[:cut]
                offset += cut
            pending = data[cut:]
    finally:
        os.close(fd)


# ------------------------------------------------------------------ decoding in worker processes
class Task(NamedTuple):
    """A share of the streams for one worker: each read from its ingested offset to its size."""

    number: int  # tasks are written in this order
    streams: list[tuple[str, int, int, ChainState]]  # (stream, ingested, size, chain there)


class Decoded(NamedTuple):
    """A task's rows as Arrow IPC bytes, what a worker sends back."""

    number: int
    nbytes: int  # journal bytes read
    events: int
    skipped: int
    damaged: int
    marks: dict[str, _Mark]
    inserts: list[tuple[str, bytes]]  # (table, IPC stream), in the order they are inserted
    touched: bytes | None

    def rows(self) -> _Rows:
        """The rows, read from the IPC bytes without copying them."""
        import pyarrow as pa

        def table(data: bytes) -> pa.Table:
            return pa.ipc.open_stream(data).read_all()

        return _Rows(
            [(name, table(data)) for name, data in self.inserts],
            None if self.touched is None else table(self.touched),
            _marks_table(self.marks) if self.marks else None,
        )


class _Failed(NamedTuple):
    """A task that raised: what to raise in the parent."""

    number: int
    errno: int | None  # an OSError's
    strerror: str | None
    filename: str | None
    text: str

    def error(self) -> Exception:
        if self.errno is not None:
            return OSError(self.errno, self.strerror, self.filename)
        return OwnloopError(f"an index ingest worker failed: {self.text}; run: ownloop verify")


def decode_task(journal: str, accept_damaged: bool, task: Task) -> Decoded:
    """Check and decode a task's streams and build their rows (what a worker does)."""
    batch = _Batch(accept_damaged)
    for stream, ingested, size, start in task.streams:
        chain, end = start, ingested
        for base, chunk in _complete_lines(
            os.path.join(journal, stream + ".jsonl"), ingested, size
        ):
            chain = batch.add(stream, base, chunk, chain)
            end = base + len(chunk)
        batch.marks[stream] = _Mark(end, size, chain)
    rows = batch.rows()
    return Decoded(
        task.number,
        batch.nbytes,
        len(batch.events),
        len(batch.skipped[0]),
        len(batch.damaged),
        batch.marks,
        [(name, _ipc(table)) for name, table in rows.inserts],
        None if rows.touched is None else _ipc(rows.touched),
    )


def _ipc(table: pa.Table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _send(out: IO[bytes], message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(len(data).to_bytes(8, "little"))
    out.write(data)
    out.flush()


def _receive(source: IO[bytes]) -> Any:
    """The next message, or None at the end of the pipe."""
    header = source.read(8)
    if len(header) < 8:
        return None
    size = int.from_bytes(header, "little")
    data = source.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # only ever from this module's other end


def _widen(pipe: IO[bytes]) -> None:
    """Let a pipe hold up to 1 MiB (Linux; else as it is): a task's rows then cross it in a few
    writes instead of one per 64 KiB, each of which waits for both processes to be scheduled."""
    import fcntl

    setting = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setting is None:
        return
    try:
        fcntl.fcntl(pipe.fileno(), setting, 1 << 20)
    except OSError:
        pass  # above /proc/sys/fs/pipe-max-size: the default stays


# What a worker runs: this module imported by its name (so that what it sends back unpickles
# as this module's classes), then ``_serve``.
_WORKER = "from ownloop.store.ingest import _serve; _serve()"


class _WithoutPandas:
    """An import finder that refuses pandas: pyarrow imports pandas (when installed) at a
    process's first ``pa.array`` to look for pandas objects, about 0.6 s of CPU per worker,
    and a worker only ever gives it lists. Without pandas pyarrow skips that check."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError("an index ingest worker does not use pandas", name=fullname)


def _serve() -> None:
    """A worker's life: tasks in on stdin, ``Decoded`` (or ``_Failed``) out, until stdin ends."""
    import signal

    sys.meta_path.insert(0, _WithoutPandas())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops its workers itself
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, not into the replies
    gc.disable()  # as in the parent: many objects, no cycles
    source = sys.stdin.buffer
    while True:
        message = _receive(source)
        if message is None:
            return
        journal, accept_damaged, task = message
        try:
            reply: Decoded | _Failed = decode_task(journal, accept_damaged, task)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent
            if isinstance(exc, OSError):
                reply = _Failed(task.number, exc.errno, exc.strerror, exc.filename, str(exc))
            else:
                reply = _Failed(task.number, None, None, None, f"{type(exc).__name__}: {exc}")
        _send(out, reply)


class Decoders:
    """Worker processes that decode tasks while the caller writes: results in task order.

    Each worker has one task at a time and gets the next as soon as it sends a result back;
    at most ``3 * count`` results (plus what ``run`` is told) wait to be written.
    """

    def __init__(self, count: int, journal: str, accept_damaged: bool) -> None:
        self._journal, self._accept = journal, accept_damaged
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (package_root, env.get("PYTHONPATH"))))
        self._workers: list[subprocess.Popen[bytes]] = []
        try:
            for _ in range(count):
                worker = subprocess.Popen(
                    [sys.executable, "-c", _WORKER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                )
                self._workers.append(worker)
                assert worker.stdout is not None
                _widen(worker.stdout)
        except BaseException:
            self.close(kill=True)
            raise

    def run(self, tasks: Sequence[Task], ahead: int = 0) -> Generator[list[Decoded], None, None]:
        """Decode ``tasks``; yields runs of consecutive results as soon as they are in order.
        Up to ``ahead`` more results than three per worker may wait while the caller writes."""
        results: SimpleQueue[Decoded | _Failed | None] = SimpleQueue()
        todo = iter(tasks)
        lock = threading.Lock()
        room = threading.Semaphore(3 * len(self._workers) + ahead)
        stop = threading.Event()

        def next_task() -> Task | None:
            room.acquire()
            if stop.is_set():
                return None
            with lock:
                task = next(todo, None)
            if task is None:
                room.release()
            return task

        def feed(worker: subprocess.Popen[bytes]) -> None:
            assert worker.stdin is not None and worker.stdout is not None
            try:
                task = next_task()
                while task is not None:
                    _send(worker.stdin, (self._journal, self._accept, task))
                    reply = _receive(worker.stdout)
                    if reply is None:
                        results.put(None)
                        return
                    results.put(reply)
                    task = None if isinstance(reply, _Failed) else next_task()
            except Exception as exc:  # noqa: BLE001 - the parent must hear of it, not wait
                results.put(_Failed(-1, None, None, None, f"{type(exc).__name__}: {exc}"))

        threads = [
            threading.Thread(target=feed, args=(worker,), name="ownloop-ingest-feed", daemon=True)
            for worker in self._workers
        ]
        for thread in threads:
            thread.start()
        try:
            ready: dict[int, Decoded] = {}
            following = 0
            while following < len(tasks):
                reply = results.get()
                if reply is None:
                    raise OwnloopError(
                        "an index ingest worker stopped unexpectedly; run the command again, "
                        "or: ownloop index --rebuild"
                    )
                if isinstance(reply, _Failed):
                    raise reply.error()
                ready[reply.number] = reply
                run = []
                while following in ready:
                    run.append(ready.pop(following))
                    following += 1
                if run:
                    yield run
                    room.release(len(run))
        finally:
            stop.set()
            room.release(len(threads))
            if following < len(tasks):
                self.close(kill=True)  # feeders blocked on a pipe see it close
            for thread in threads:
                thread.join()

    def close(self, *, kill: bool = False) -> None:
        """Stop the workers (at once with ``kill``) and wait for them."""
        for worker in self._workers:
            if kill:
                worker.kill()
            elif worker.stdin is not None:
                try:
                    worker.stdin.close()
                except OSError:
                    pass
        for worker in self._workers:
            worker.wait()
            for pipe in (worker.stdin, worker.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
        self._workers = []


def plan(
    work: Sequence[tuple[str, int, int, ChainState]], workers: int, most: int
) -> tuple[list[Task], list[tuple[str, int, int, ChainState]]]:
    """Share ``work`` (streams with new bytes, in order) into tasks of about equal bytes, a
    few per worker and at most half of ``most`` bytes each; streams with more new bytes than
    ``most`` are returned apart (read in the parent, batch by batch)."""
    total = sum(size - ingested for _, ingested, size, _ in work)
    target = max(1 << 20, min(most // 2, total // (3 * workers) + 1))
    tasks: list[Task] = []
    big = []
    current: list[tuple[str, int, int, ChainState]] = []
    held = 0
    for item in work:
        new = item[2] - item[1]
        if new > most:
            big.append(item)
            continue
        if current and (held + new > target or len(current) >= 2000):
            tasks.append(Task(len(tasks), current))
            current, held = [], 0
        current.append(item)
        held += new
    if current:
        tasks.append(Task(len(tasks), current))
    return tasks, big
