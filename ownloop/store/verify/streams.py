"""Each stream and each blob checked alone, in worker processes (one a core) when there are
enough of them, into small summaries that the checks spanning streams work on."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
import sys
import threading
import warnings
from collections.abc import Collection, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeVar

import msgspec

from ownloop.store.blobs import COMPACTED, BlobStore
from ownloop.store.events import (
    BrowserActed,
    Event,
    EvidenceCaptured,
    ImagePart,
    ModelCalled,
    RunSealed,
    RunStarted,
    ScreenshotTaken,
    SessionGraded,
    SessionStarted,
    StreamHead,
    StreamsCataloged,
)
from ownloop.store.filestat import GONE, RACY, blob_stat, file_stat
from ownloop.store.journal import StreamCheck, check_stream
from ownloop.store.packs import PACKS, PackIndex
from ownloop.store.verify.report import Problem

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = [
    "Checked",
    "Hashed",
    "Summary",
    "blob_references",
    "check_blobs",
    "check_in_parallel",
    "listed_blobs",
    "stream_files",
]

_T = TypeVar("_T")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")  # a blob's file name
_PARALLEL_FROM = 64  # fewer streams or blobs than this are checked in this process


def blob_references(event: Event) -> Iterator[str]:
    """The sha256 of every blob an event refers to."""
    if isinstance(event, ScreenshotTaken):
        yield event.sha256
    elif isinstance(event, ModelCalled):
        for message in event.messages:
            for part in message.parts:
                if isinstance(part, ImagePart):
                    yield part.sha256
        if event.response_blob:
            yield event.response_blob
    elif isinstance(event, EvidenceCaptured) and event.sha256:
        yield event.sha256
    elif isinstance(event, BrowserActed) and event.download:
        yield event.download


class Summary(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """What checking one stream found, kept in ``verify.state`` for the next check: where the
    file stood (inode, mtime, size), how far its lines were checked (bytes, their sha256, the
    chain's head there) and what the checks that span streams need of it."""

    inode: int
    mtime_ns: int
    file_size: int
    size: int  # bytes of complete lines checked
    digest: str  # sha256 of those bytes
    lines: int
    head: str  # the last line's sum
    events: int
    first_session: str = ""  # the session its first event starts, when it starts one
    started_sessions: tuple[str, ...] = ()
    started_runs: tuple[str, ...] = ()
    named_runs: dict[str, int] = {}  # run -> the first line naming it
    run_lines: dict[str, int] = {}  # run -> its last line that a seal must cover
    catalog: tuple[tuple[int, StreamHead], ...] = ()
    seals: tuple[tuple[int, RunSealed], ...] = ()
    ctime_ns: int = 0


class Checked(NamedTuple):
    """One stream read and checked (in a worker process)."""

    stream: str
    summary: Summary | None  # None: the file is gone
    problems: list[Problem]
    references: dict[str, int]  # blob -> the first line referring to it
    stable: bool  # the file did not change while it was read


def _check_streams(jobs: list[tuple[str, Summary | None]]) -> list[Checked]:
    return [_check_one(Path(path), old) for path, old in jobs]


def _check_one(path: Path, old: Summary | None) -> Checked:
    """Check one stream's chain; with ``old`` (the last check's summary), also that the lines
    checked then are still there, unchanged."""
    where = f"journal/{path.name}"
    try:
        before = os.stat(path)
        data = path.read_bytes()
        check = check_stream(path)
        after = os.stat(path)
    except FileNotFoundError:
        return Checked(
            path.stem,
            None,
            [Problem("error", where, "missing stream", "the index lists it; the file is gone")],
            {},
            False,
        )
    problems = _chain_problems(where, check)
    end = data.rfind(b"\n") + 1
    digest = _digest(where, memoryview(data)[:end], check, old, problems)
    found = _Found.of(check)
    first = check.events[0][1] if check.events else None
    summary = Summary(
        inode=before.st_ino,
        mtime_ns=before.st_mtime_ns,
        ctime_ns=before.st_ctime_ns,
        file_size=before.st_size,
        size=end,
        digest=digest,
        lines=len(check.sums),
        head=check.sums[-1] if check.sums else "",
        events=len(check.events),
        first_session=first.session_id if isinstance(first, SessionStarted) else "",
        started_sessions=tuple(found.sessions),
        started_runs=tuple(found.runs),
        named_runs=found.named,
        run_lines=found.run_lines,
        catalog=tuple(found.catalog),
        seals=tuple(found.seals),
    )
    stable = file_stat(before) == file_stat(after) and after.st_size == len(data)
    return Checked(path.stem, summary, problems, found.references, stable)


def _chain_problems(where: str, check: StreamCheck) -> list[Problem]:
    """What the chain check found, as problems (a torn tail is a warning), and an empty stream."""
    problems: list[Problem] = []
    for p in check.problems:
        severity: Literal["error", "warning"] = "warning" if p.kind == "torn tail" else "error"
        problems.append(Problem(severity, f"{where}:{p.line}", p.kind, p.detail))
    if not check.sums and not check.problems:
        problems.append(
            Problem(
                "warning",
                where,
                "empty stream",
                "no writer leaves an empty stream: its lines were removed, "
                "or it predates ownloop 0.2",
            )
        )
    return problems


def _digest(
    where: str, lines: memoryview, check: StreamCheck, old: Summary | None, problems: list[Problem]
) -> str:
    """The sha256 of the stream's complete ``lines``; with ``old``, a stream with fewer lines
    than the last check saw, or whose first lines changed, is added to ``problems``."""
    digest = hashlib.sha256()
    if old is None:
        digest.update(lines)
        return digest.hexdigest()
    digest.update(lines[: old.size])
    if len(check.sums) < old.lines:
        problems.append(
            Problem(
                "error",
                where,
                "truncated stream",
                f"{len(check.sums)} lines; the last verify checked {old.lines}",
            )
        )
    elif (old.size > len(lines) or digest.hexdigest() != old.digest) and not any(
        p.severity == "error" for p in problems
    ):
        problems.append(
            Problem(
                "error",
                where,
                "rewritten stream",
                f"its first {old.lines} lines are not the ones the last verify checked",
            )
        )
    digest.update(lines[old.size :])
    return digest.hexdigest()


class _Found(NamedTuple):
    """What the checks that span streams need of one stream's events."""

    sessions: list[str]  # the sessions it starts
    runs: list[str]  # the runs it starts
    named: dict[str, int]  # run -> the first line naming it
    run_lines: dict[str, int]  # run -> its last line that a seal must cover
    catalog: list[tuple[int, StreamHead]]
    seals: list[tuple[int, RunSealed]]
    references: dict[str, int]  # blob -> the first line referring to it

    @classmethod
    def of(cls, check: StreamCheck) -> _Found:
        found = cls([], [], {}, {}, [], [], {})
        for number, event in check.events:
            found.named.setdefault(event.run_id, number)
            if not (isinstance(event, SessionGraded) and event.against_seal) and not isinstance(
                event, RunSealed
            ):
                found.run_lines[event.run_id] = number
            if isinstance(event, SessionStarted):
                found.sessions.append(event.session_id)
            elif isinstance(event, RunStarted):
                found.runs.append(event.run_id)
            elif isinstance(event, StreamsCataloged):
                found.catalog.extend((number, head) for head in event.heads)
            elif isinstance(event, RunSealed):
                found.seals.append((number, event))
            for sha256 in blob_references(event):
                found.references.setdefault(sha256, number)
        return found


class Hashed(NamedTuple):
    """One blob checked: what is wrong (None: nothing), and its file's stat before."""

    sha256: str
    wrong: str | None
    stat: tuple[int, int, int, int]


def check_blobs(job: tuple[str, list[str]]) -> list[Hashed]:
    """Each blob name checked (in a worker process)."""
    blobs = BlobStore(Path(job[0]), fsync=False)
    checked: list[Hashed] = []
    for sha256 in job[1]:
        if not _SHA256.match(sha256):
            checked.append(Hashed(sha256, "not a sha256 name", RACY))
            continue
        stat = blob_stat(job[0], sha256)  # before reading: a later change shows next time
        wrong = blobs.check(sha256)
        # A packed blob has no file to stat: read again at every check until it is one.
        checked.append(Hashed(sha256, wrong, RACY if wrong is None and stat == GONE else stat))
    return checked


def stream_files(journal: Path) -> list[str]:
    """The journal's stream files (``store.stream_paths``, as names: at 100k streams, sorting
    Path objects alone takes a second)."""
    try:
        return sorted(entry.name for entry in os.scandir(journal) if entry.name.endswith(".jsonl"))
    except FileNotFoundError:
        return []


def listed_blobs(root: Path, only: Collection[str] | None = None) -> set[str]:
    """The blobs in the store (``BlobStore``'s listing, without sorting or Path objects); with
    ``only``, in those shard folders alone (and the packs, always: few, and read whole)."""
    names = PackIndex(root / PACKS).names()
    try:
        shards = [
            entry.path
            for entry in os.scandir(root)
            if entry.is_dir() and (only is None or entry.name in only)
        ]
    except FileNotFoundError:
        return names
    for shard in shards:
        for name in os.listdir(shard):
            if name.endswith(COMPACTED):  # compacted by ownloop compact: named by its PNG
                name = name[: -len(COMPACTED)]
            if _SHA256.match(name):
                names.add(name)
    return names


def check_in_parallel(
    store: Store,
    jobs: list[tuple[str, Summary | None]],
    blob_names: list[str],
    workers: int | None,
) -> tuple[dict[str, Checked], dict[str, Hashed]]:
    """Check the streams and hash the blobs, in worker processes when there are enough of them
    (the checks are Python code: threads would take turns).

    The workers are forked: a spawned or forkserver worker imports ``__main__`` again, which
    a user's script without a ``__main__`` guard does not survive. A process with threads of
    its own is not forked (a lock held by another thread would stay held in the child): it
    checks everything itself.
    """
    workers = workers or len(os.sched_getaffinity(0))
    root = str(store.blobs.root)
    if (
        workers < 2
        or max(len(jobs), len(blob_names)) < _PARALLEL_FROM
        or threading.active_count() > 1
        or sys.platform != "linux"
    ):
        checked = _check_streams(jobs)
        blobs = check_blobs((root, blob_names))
    else:
        stream_batches = _batches(jobs, workers)
        blob_batches = [(root, batch) for batch in _batches(blob_names, workers)]
        context = multiprocessing.get_context("fork")
        with (
            warnings.catch_warnings(),
            ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool,
        ):
            # Python 3.12 warns of fork() beside threads it cannot see (a native library's).
            warnings.simplefilter("ignore", DeprecationWarning)
            stream_results = pool.map(_check_streams, stream_batches)
            blob_results = pool.map(check_blobs, blob_batches)
            checked = [c for batch in stream_results for c in batch]
            blobs = [b for batch in blob_results for b in batch]
    return {c.stream: c for c in checked}, {b.sha256: b for b in blobs}


def _batches(items: list[_T], workers: int) -> list[list[_T]]:
    """``items`` in about four batches a worker (few round trips, yet even at the end)."""
    size = max(1, -(-len(items) // (workers * 4)))
    return [items[i : i + size] for i in range(0, len(items), size)]
