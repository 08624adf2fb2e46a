"""``ownloop verify``: check every stream's hash chain and every blob, one line per problem.

A torn tail (a writer killed mid-write) is a warning: readers skip it and nothing acknowledged was
lost. Everything else is an error: an edited, reordered or deleted journal line, bytes after the
last newline that no interrupted write leaves, a referenced blob that is missing, or a blob whose
bytes do not match its name. The journal is read directly, never through the index.

Each stream is checked alone (in worker processes, one a core) into a small summary; the checks
that span streams (catalogs, seals, swapped streams, missing runs) work on the summaries. The
summaries of a check without an error are kept in ``verify.state``, so an incremental check reads
only the streams whose files changed, and any check finds a remembered stream gone, shorter or
rewritten. The state starts with what tells that nothing changed (the stream files' names and
stats, the blob folders' stats, what that check reported): a check of an unchanged store reads
that part and takes a stat a stream, and decodes the summaries only when something changed.
"""

from __future__ import annotations

import array
import hashlib
import multiprocessing
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Collection, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeVar

import msgspec

from ownloop.store.blobs import COMPACTED, BlobStore
from ownloop.store.claims import stale_temporaries
from ownloop.store.errors import OwnloopError
from ownloop.store.events import (
    BrowserActed,
    Event,
    EvidenceCaptured,
    ImagePart,
    ModelCalled,
    RunSealed,
    RunStarted,
    ScreenshotTaken,
    SealedSession,
    SessionGraded,
    SessionStarted,
    StreamHead,
    StreamsCataloged,
)
from ownloop.store.filestat import RACY, STAT, blob_stat, changed_blobs, file_stat, pack
from ownloop.store.journal import check_stream

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = ["Problem", "VerifyReport", "blob_references", "seal_fingerprint", "verify_store"]

_T = TypeVar("_T")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")  # a blob's file name


class Problem(NamedTuple):
    """One thing wrong with the store."""

    severity: Literal["error", "warning"]
    where: str  # "journal/<stream>.jsonl:<line>" or "blob <sha256>"
    kind: str
    detail: str

    def line(self) -> str:
        return f"{self.severity}: {self.where}: {self.kind}: {self.detail}"


class VerifyReport(NamedTuple):
    """Every problem found, and how much was checked."""

    problems: list[Problem]
    streams: int
    events: int
    blobs: int
    heads: dict[str, StreamHead] = {}  # where each stream stands (lines, last sum); {}: unchanged
    unchanged_streams: int = 0  # not read again: as the last check found them
    unchanged_blobs: int = 0  # not hashed again: the last check found them sound

    @property
    def errors(self) -> int:
        return sum(p.severity == "error" for p in self.problems)

    @property
    def warnings(self) -> int:
        return sum(p.severity == "warning" for p in self.problems)

    def summary(self) -> str:
        line = (
            f"verify: {self.streams} streams, {self.events} events, {self.blobs} blobs: "
            f"{_count(self.errors, 'error')}, {_count(self.warnings, 'warning')}"
        )
        if self.unchanged_streams:  # (blobs alone: the streams that refer to them were read)
            line += (
                f" ({self.unchanged_streams} streams and {self.unchanged_blobs} blobs as the "
                "last check found them; ownloop verify --full reads them again)"
            )
        return line

    def exit_code(self, *, strict: bool = False) -> int:
        """1 when there is an error (or, with ``strict``, a warning), else 0."""
        return 1 if self.errors or (strict and self.warnings) else 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


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


class _Summary(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
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


class _State(msgspec.Struct, kw_only=True):
    """What the last check without an error found sound (``verify.state``'s bulk, decoded only
    when something changed)."""

    checked_ns: int = 0  # when that check started
    streams: dict[str, _Summary] = {}
    blobs: dict[str, str] = {}  # sha256 -> the first line referring to it ("" if none)


_NEVER = (-1, -1)  # a folder's (inode, mtime_ns) that no folder has: list it again
_STAT = STAT  # a stream's (inode, size, mtime_ns, ctime_ns) in ``_Header.stats``


class _Header(msgspec.Struct, kw_only=True):
    """The start of ``verify.state``: enough to tell, without decoding the rest, that nothing
    changed since that check: the journal's file names, each one's inode, size and mtime, and
    the blob folders' inodes and mtimes (a folder's mtime changes when a file is added to it or
    removed). What that check reported is kept, to be reported again."""

    version: int = 3
    checked_ns: int = 0
    journal: tuple[int, int] = _NEVER  # the journal folder's (inode, mtime_ns)
    names: list[str] = []  # every stream file, sorted
    stats: bytes = b""  # array('q'): (inode, size, mtime_ns, ctime_ns) per name; -1s: read it
    blob_names: list[str] = []  # the blobs found sound, sorted
    blob_stats: bytes = b""  # array('q'): the same four per blob file; -1s: hash it again
    blob_folders: list[tuple[str, int, int]] = []  # ("" for the root, each shard), inode, mtime
    events: int = 0
    blobs: int = 0  # blobs present or referenced
    present: int = 0  # blobs present
    problems: list[Problem] = []  # warnings that check found (a check with an error is not kept)
    bulk: int = 0  # bytes of the encoded ``_State`` after the header


class _Saved:
    """``verify.state`` as read: the header, and the bulk read and decoded on first use."""

    def __init__(self, header: _Header, path: Path | None = None, offset: int = 0) -> None:
        self.header = header
        self._path = path
        self._offset = offset
        self._state: _State | None = None

    @property
    def state(self) -> _State:
        if self._state is None:
            self._state = _State()
            if self._path is not None:
                try:
                    with open(self._path, "rb") as file:
                        file.seek(self._offset)
                        self._state = msgspec.msgpack.decode(file.read(), type=_State)
                except (OSError, msgspec.MsgspecError):
                    pass
            if self._state.checked_ns != self.header.checked_ns:  # not written together
                self._state = _State()
        return self._state


class _Checked(NamedTuple):
    """One stream read and checked (in a worker process)."""

    stream: str
    summary: _Summary | None  # None: the file is gone
    problems: list[Problem]
    references: dict[str, int]  # blob -> the first line referring to it
    stable: bool  # the file did not change while it was read


def _check_streams(jobs: list[tuple[str, _Summary | None]]) -> list[_Checked]:
    return [_check_one(Path(path), old) for path, old in jobs]


def _check_one(path: Path, old: _Summary | None) -> _Checked:
    """Check one stream's chain; with ``old`` (the last check's summary), also that the lines
    checked then are still there, unchanged."""
    where = f"journal/{path.name}"
    try:
        before = os.stat(path)
        data = path.read_bytes()
        check = check_stream(path)
        after = os.stat(path)
    except FileNotFoundError:
        return _Checked(
            path.stem,
            None,
            [Problem("error", where, "missing stream", "the index lists it; the file is gone")],
            {},
            False,
        )
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
    end = data.rfind(b"\n") + 1
    view = memoryview(data)
    digest = hashlib.sha256()
    if old is not None:
        digest.update(view[: min(old.size, end)])
        if len(check.sums) < old.lines:
            problems.append(
                Problem(
                    "error",
                    where,
                    "truncated stream",
                    f"{len(check.sums)} lines; the last verify checked {old.lines}",
                )
            )
        elif (old.size > end or digest.hexdigest() != old.digest) and not any(
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
        digest.update(view[min(old.size, end) : end])
    else:
        digest.update(view[:end])
    sessions: list[str] = []
    runs: list[str] = []
    named: dict[str, int] = {}
    run_lines: dict[str, int] = {}
    catalog: list[tuple[int, StreamHead]] = []
    seals: list[tuple[int, RunSealed]] = []
    references: dict[str, int] = {}
    for number, event in check.events:
        named.setdefault(event.run_id, number)
        if not (isinstance(event, SessionGraded) and event.against_seal) and not isinstance(
            event, RunSealed
        ):
            run_lines[event.run_id] = number
        if isinstance(event, SessionStarted):
            sessions.append(event.session_id)
        elif isinstance(event, RunStarted):
            runs.append(event.run_id)
        elif isinstance(event, StreamsCataloged):
            catalog.extend((number, head) for head in event.heads)
        elif isinstance(event, RunSealed):
            seals.append((number, event))
        for sha256 in blob_references(event):
            references.setdefault(sha256, number)
    first = check.events[0][1] if check.events else None
    summary = _Summary(
        inode=before.st_ino,
        mtime_ns=before.st_mtime_ns,
        ctime_ns=before.st_ctime_ns,
        file_size=before.st_size,
        size=end,
        digest=digest.hexdigest(),
        lines=len(check.sums),
        head=check.sums[-1] if check.sums else "",
        events=len(check.events),
        first_session=first.session_id if isinstance(first, SessionStarted) else "",
        started_sessions=tuple(sessions),
        started_runs=tuple(runs),
        named_runs=named,
        run_lines=run_lines,
        catalog=tuple(catalog),
        seals=tuple(seals),
    )
    stable = file_stat(before) == file_stat(after) and after.st_size == len(data)
    return _Checked(path.stem, summary, problems, references, stable)


class _Hashed(NamedTuple):
    """One blob checked: what is wrong (None: nothing), and its file's stat before."""

    sha256: str
    wrong: str | None
    stat: tuple[int, int, int, int]


def _check_blobs(job: tuple[str, list[str]]) -> list[_Hashed]:
    """Each blob name checked (in a worker process)."""
    blobs = BlobStore(Path(job[0]), fsync=False)
    checked: list[_Hashed] = []
    for sha256 in job[1]:
        if not _SHA256.match(sha256):
            checked.append(_Hashed(sha256, "not a sha256 name", RACY))
            continue
        stat = blob_stat(job[0], sha256)  # before reading: a later change shows next time
        checked.append(_Hashed(sha256, blobs.check(sha256), stat))
    return checked


class _Seen:
    """What the streams' summaries say together, for the checks that span streams."""

    def __init__(self, journal_dir: Path, summaries: dict[str, _Summary]) -> None:
        self.journal_dir = journal_dir
        self.summaries = summaries
        self.loaded: dict[str, list[str]] = {}  # stream -> each line's sum, read when needed
        self.catalog: list[tuple[str, StreamHead]] = []  # (where, head) from every catalog
        self.seals: dict[str, tuple[str, RunSealed]] = {}  # run -> (where, its seal)
        self.started_sessions: set[str] = set()
        self.started_runs: set[str] = set()
        self.named_runs: dict[str, str] = {}  # run id -> a line naming it
        self.run_lines: dict[str, dict[str, int]] = {}  # run -> stream -> lines with its events
        for stream, summary in summaries.items():
            where = f"journal/{stream}.jsonl"
            self.started_sessions.update(summary.started_sessions)
            self.started_runs.update(summary.started_runs)
            for run, number in summary.named_runs.items():
                self.named_runs.setdefault(run, f"{where}:{number}")
            for run, number in summary.run_lines.items():
                self.run_lines.setdefault(run, {})[stream] = number
            self.catalog.extend((f"{where}:{number}", head) for number, head in summary.catalog)
            for number, seal in summary.seals:
                self.seals.setdefault(seal.run_id, (f"{where}:{number}", seal))

    def sum_at(self, stream: str, number: int) -> str:
        """The sum of line ``number`` (1-based) of ``stream``; "" past its end."""
        summary = self.summaries[stream]
        if number == summary.lines:
            return summary.head
        sums = self.loaded.get(stream)
        if sums is None:  # a head that is not the stream's last line: rare, read it again
            try:
                sums = check_stream(self.journal_dir / f"{stream}.jsonl").sums
            except FileNotFoundError:
                sums = []
            self.loaded[stream] = sums
        return sums[number - 1] if number <= len(sums) else ""


def _head_problems(seen: _Seen, where: str, head: StreamHead, what: str) -> Iterator[Problem]:
    """A stream that no longer holds the lines ``head`` says it had."""
    summary = seen.summaries.get(head.stream)
    place = f"journal/{head.stream}.jsonl"
    if summary is None:
        yield Problem(
            "error",
            place,
            "missing stream",
            f"{what} at {where} lists it with {head.events} events; the file is gone",
        )
    elif summary.lines < head.events:
        yield Problem(
            "error",
            place,
            "truncated stream",
            f"{summary.lines} lines; {what} at {where} lists {head.events}",
        )
    elif head.events and seen.sum_at(head.stream, head.events) != head.head:
        yield Problem(
            "error",
            f"{place}:{head.events}",
            "rewritten stream",
            f"line {head.events} is not the one {what} at {where} lists",
        )


def seal_fingerprint(seal: RunSealed) -> str:
    """The sha256 of a seal's manifest, as ``ownloop seal`` computed it."""
    manifest = _SealManifest(
        run_id=seal.run_id,
        streams=seal.streams,
        sessions=seal.sessions,
        blobs=seal.blobs,
        budget=seal.budget,
    )
    return hashlib.sha256(msgspec.json.encode(manifest)).hexdigest()


class _SealManifest(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    streams: tuple[StreamHead, ...]
    sessions: tuple[SealedSession, ...]
    blobs: int
    budget: int | None


def _seal_problems(seen: _Seen, run_id: str, where: str, seal: RunSealed) -> Iterator[Problem]:
    if seal_fingerprint(seal) != seal.fingerprint:
        yield Problem(
            "error",
            where,
            "bad seal",
            "the seal's manifest does not hash to its fingerprint: it was edited",
        )
    sealed = {head.stream: head for head in seal.streams}
    for head in seal.streams:
        yield from _head_problems(seen, where, head, f"the seal of run {run_id}")
    for stream, last in sorted(seen.run_lines.get(run_id, {}).items()):
        listed = sealed.get(stream)
        if listed is None or last > listed.events:
            yield Problem(
                "error",
                f"journal/{stream}.jsonl:{last}",
                "appended after the seal",
                f"run {run_id} was sealed at {where}; it takes no more events",
            )


_STATE = "verify.state"  # in the store's root, beside index.duckdb: a cache, safe to delete
_RACY_NS = 2_000_000_000  # a file changed this close to a check may change again unseen by mtime
_PARALLEL_FROM = 64  # fewer streams or blobs than this are checked in this process


def verify_store(
    store: Store,
    *,
    run_id: str | None = None,
    fingerprint: str | None = None,
    streams: Collection[str] | None = None,
    incremental: bool = False,
    workers: int | None = None,
) -> VerifyReport:
    """Check every journal stream and every blob of ``store`` (with ``streams``: only those
    streams, and the blobs they refer to), on every core.

    Beyond each stream's own chain: every stream a catalog or a seal lists must still hold the
    lines it listed (so removed, truncated, emptied and swapped streams are found), a session's
    own stream carries its name, and every session and run named anywhere has its start.
    With ``run_id``, the run must be sealed (and match ``fingerprint`` when given), and nothing
    may have been added to it since; the run's streams are read and every blob they refer to is
    hashed again, whatever ``incremental`` says (the check a paper cites reads every byte).

    A check of the whole store without an error is remembered (``verify.state``): each stream's
    size, the sha256 of its bytes and its chain's head, and the blobs found sound. Every later
    check reports a remembered stream that is gone, shorter or rewritten. With ``incremental``,
    a stream or blob file whose inode, size, mtime and ctime are as remembered is not read again
    (unless it changed within 2 s of that check; see ``filestat``); seals and catalogs are
    checked in full whenever a stream or a blob changed, and when none did, the last check's
    report stands.
    """
    if store.journal_dir.exists() and not store.journal_dir.is_dir():
        raise OwnloopError(
            f"{store.journal_dir} is a file, not the journal folder: this is not "
            "an ownloop store (or it was damaged). Pass --store DIR"
        )
    whole = streams is None
    saved = _load_state(store) if whole else _Saved(_Header())
    header = saved.header
    started = time.time_ns()
    journal = str(store.journal_dir)
    root = str(store.blobs.root)
    folder = _folder(journal, started)  # before listing it: a file added meanwhile changes it
    blob_folders = _blob_folders(root, started) if whole else []
    if streams is not None:
        names = [f"{stream}.jsonl" for stream in sorted(streams)]
    elif incremental and folder == header.journal != _NEVER:
        names = header.names  # no file was added, removed or renamed
    else:
        names = _stream_names(store.journal_dir)
    restat, same_blobs = (
        changed_blobs(root, header.blob_names, header.blob_stats)
        if incremental and whole
        else (set(header.blob_names), {})
    )
    blobs_as_before = (
        incremental
        and not restat
        and blob_folders == header.blob_folders
        and all(entry[1:] != _NEVER for entry in blob_folders)
    )
    changed = _changed_streams(journal, names, header) if incremental else names
    if (
        incremental
        and whole
        and run_id is None
        and not changed
        and names == header.names
        and blobs_as_before
    ):  # as the last check found it: what that check reported holds
        return VerifyReport(
            list(header.problems) + _claim_problems(store),
            len(names),
            header.events,
            header.blobs,
            {},
            len(names),
            header.present,
        )
    state = saved.state
    remembered = state.checked_ns == header.checked_ns != 0
    if state.checked_ns != header.checked_ns:  # the bulk did not decode: read everything
        changed = names
    if run_id is not None and incremental:  # the run's streams are read again, always
        ours = _run_streams(state, run_id)
        changed = [name for name in names if name in changed or name[:-6] in ours]
    jobs = [(os.path.join(journal, name), state.streams.get(name[:-6])) for name in changed]
    if not whole:
        present: set[str] = set()
    elif blobs_as_before and remembered:
        present = set(state.blobs)  # (a check with a referenced blob missing is not kept)
    elif incremental and remembered:
        # List the shard folders whose mtime changed; the others hold what they held.
        kept = {entry[0] for entry in blob_folders if entry[1:] != _NEVER} & {
            entry[0] for entry in header.blob_folders if entry in blob_folders
        }
        present = {sha256 for sha256 in state.blobs if sha256[:2] in kept}
        present |= _blob_names(store.blobs.root, {e[0] for e in blob_folders} - kept)
    else:
        present = _blob_names(store.blobs.root)
    # A remembered blob is taken as sound only while its own file is as that check found it.
    known = {s: w for s, w in state.blobs.items() if s not in restat} if incremental else {}
    blob_jobs = sorted(present - known.keys())
    results, checked_blobs = _check_in_parallel(store, jobs, blob_jobs, workers)
    if run_id is not None:  # every blob the run's streams refer to, hashed again
        again = sorted(
            {
                sha256
                for checked in results.values()
                if checked.summary is not None and run_id in checked.summary.named_runs
                for sha256 in checked.references
            }
            - checked_blobs.keys()
        )
        checked_blobs.update(_check_in_parallel(store, [], again, workers)[1])
        known = {s: w for s, w in known.items() if s not in checked_blobs}
    for sha256 in [s for s, h in checked_blobs.items() if h.wrong == "missing"]:
        present.discard(sha256)  # gone since it was listed (or remembered): found below
    problems: list[Problem] = []
    summaries: dict[str, _Summary] = {}
    sound: dict[str, _Summary] = {}  # what the next check may take as it is
    referenced: dict[str, str] = {}  # sha256 -> the first line that refers to it
    for name in names:
        stream = name[:-6]
        checked = results.get(stream)
        if checked is None:  # unchanged since the last check
            summaries[stream] = sound[stream] = state.streams[stream]
            continue
        problems.extend(checked.problems)
        if checked.summary is None:
            continue
        summaries[stream] = checked.summary
        if checked.stable and not checked.problems:
            sound[stream] = checked.summary
        for sha256, number in checked.references.items():
            referenced.setdefault(sha256, f"journal/{name}:{number}")
    for sha256, where in (state.blobs if incremental else {}).items():
        if where:  # (a blob hashed again, or gone, keeps the line that refers to it)
            referenced.setdefault(sha256, where)
    for stream in sorted(state.streams.keys() - summaries.keys() if whole else ()):
        problems.append(
            Problem(
                "error",
                f"journal/{stream}.jsonl",
                "missing stream",
                f"the last verify checked it with {state.streams[stream].lines} events; the file "
                "is gone",
            )
        )
    seen = _Seen(store.journal_dir, summaries)
    spanning = list(_store_problems(seen))
    problems.extend(spanning)
    if run_id is not None:
        problems.extend(_run_problems(seen, run_id, fingerprint))
    unlisted = sorted(referenced.keys() - present - known.keys() - checked_blobs.keys())
    checked_blobs.update((h.sha256, h) for h in _check_blobs((root, unlisted)))
    for sha256 in known.keys() - present:
        if sha256 in referenced:
            checked_blobs[sha256] = _Hashed(sha256, "missing", RACY)
    problems.extend(_blob_problems(checked_blobs, referenced))
    problems.extend(_claim_problems(store) if whole else [])
    heads = {
        stream: StreamHead(stream=stream, events=summary.lines, head=summary.head)
        for stream, summary in summaries.items()
    }
    report = VerifyReport(
        problems,
        len(names),
        sum(s.events for s in summaries.values()),
        len(referenced.keys() | present),
        heads,
        len(names) - len(jobs),
        len(present - checked_blobs.keys()),
    )
    unchanged = (  # as the state says (also its folders: one listed again is remembered)
        not jobs
        and not blob_jobs
        and sound.keys() == state.streams.keys()
        and present == known.keys()
        and (names, folder, blob_folders) == (header.names, header.journal, header.blob_folders)
    )
    if whole and not report.errors and not (incremental and unchanged):
        blob_names = sorted(present)
        _save_state(
            store,
            _Header(
                checked_ns=started,
                journal=folder,
                names=names,
                stats=_stream_stats(names, sound, started),
                blob_names=blob_names,
                blob_stats=_blob_stats(blob_names, same_blobs, checked_blobs, started),
                blob_folders=blob_folders,
                events=report.events,
                blobs=report.blobs,
                present=len(present),
                problems=spanning,
            ),
            _State(
                checked_ns=started,
                streams=sound,
                blobs={
                    sha256: referenced.get(sha256, "") for sha256 in referenced.keys() | present
                },
            ),
        )
    return report


def _claim_problems(store: Store) -> list[Problem]:
    """A warning for each temporary claim file a killed recorder left (not journal data: the
    next recorder of the run removes it)."""
    return [
        Problem(
            "warning",
            path.relative_to(store.root).as_posix(),
            "stale temporary file",
            "left by a recorder killed while writing a claim; the next recorder of the run "
            "removes it (or delete it)",
        )
        for path in stale_temporaries(store.root)
    ]


def _run_streams(state: _State, run_id: str) -> set[str]:
    """The streams the last check found holding ``run_id``'s events, and those its seals list."""
    ours = {stream for stream, summary in state.streams.items() if run_id in summary.named_runs}
    for summary in state.streams.values():
        for _, seal in summary.seals:
            if seal.run_id == run_id:
                ours.update(head.stream for head in seal.streams)
    return ours


def _blob_problems(checked: dict[str, _Hashed], referenced: dict[str, str]) -> Iterator[Problem]:
    """A problem for each blob found missing or bad."""
    for sha256, hashed in sorted(checked.items()):
        if hashed.wrong is None:
            continue
        source = referenced.get(sha256)
        if hashed.wrong == "missing" and source is None:
            continue  # an unreferenced blob removed: forgotten
        detail = (
            f"{hashed.wrong} (referenced by {source})"
            if source
            else f"{hashed.wrong} (not referenced)"
        )
        kind = "missing blob" if hashed.wrong == "missing" else "bad blob"
        yield Problem("error", f"blob {sha256}", kind, detail)


def _stream_stats(names: list[str], sound: dict[str, _Summary], started: int) -> bytes:
    """The stats to remember of each stream: -1s for one not found sound, or changed so close to
    the check that a later change might not move its mtime."""
    return pack(
        RACY
        if (summary := sound.get(name[:-6])) is None or summary.mtime_ns > started - _RACY_NS
        else (summary.inode, summary.file_size, summary.mtime_ns, summary.ctime_ns)
        for name in names
    )


def _blob_stats(
    names: list[str],
    same: dict[str, tuple[int, int, int, int]],
    hashed: dict[str, _Hashed],
    started: int,
) -> bytes:
    """The stats to remember of each blob found sound: as compared, or taken before hashing."""
    stats: list[tuple[int, int, int, int]] = []
    for name in names:
        found = hashed.get(name)
        stat = found.stat if found is not None and found.wrong is None else same.get(name)
        if stat is None or stat[2] > started - _RACY_NS:
            stat = RACY
        stats.append(stat)
    return pack(stats)


def _store_problems(seen: _Seen) -> Iterator[Problem]:
    """The checks that span streams: swapped streams, catalogs, missing runs, seals."""
    for stream, summary in seen.summaries.items():  # in the journal's order
        # A recorder names a session's stream after it: a stream named after another session
        # that starts elsewhere was swapped or renamed.
        session_id = summary.first_session
        if session_id and session_id != stream and stream in seen.started_sessions:
            yield Problem(
                "error",
                f"journal/{stream}.jsonl:1",
                "swapped stream",
                f"it starts session {session_id}; session {stream} starts in another file",
            )
    for where, head in seen.catalog:
        yield from _head_problems(seen, where, head, "the catalog")
    for run in sorted(seen.named_runs.keys() - seen.started_runs):
        yield Problem(
            "warning",
            seen.named_runs[run],
            "missing run",
            f"names run {run}, whose RunStarted is in no stream (its run stream was "
            "removed, or these events were written without one)",
        )
    for run, (where, seal) in sorted(seen.seals.items()):
        yield from _seal_problems(seen, run, where, seal)


def _stream_names(journal: Path) -> list[str]:
    """The journal's stream files (``store.stream_paths``, as names: at 100k streams, sorting
    Path objects alone takes a second)."""
    try:
        return sorted(entry.name for entry in os.scandir(journal) if entry.name.endswith(".jsonl"))
    except FileNotFoundError:
        return []


def _blob_names(root: Path, only: Collection[str] | None = None) -> set[str]:
    """The blobs in the store (``BlobStore``'s listing, without sorting or Path objects); with
    ``only``, in those shard folders alone."""
    names: set[str] = set()
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


def _folder(path: str, now_ns: int) -> tuple[int, int]:
    """A folder's (inode, mtime_ns); ``_NEVER`` when it is missing or changed so recently that
    a later change might not move its mtime."""
    try:
        stat = os.stat(path)
    except OSError:
        return _NEVER
    if stat.st_mtime_ns > now_ns - _RACY_NS:
        return _NEVER
    return (stat.st_ino, stat.st_mtime_ns)


def _blob_folders(root: str, now_ns: int) -> list[tuple[str, int, int]]:
    """The blob folder's and each shard folder's (name, inode, mtime_ns): as long as they are
    the same, no blob was added or removed."""
    folders = [("", *_folder(root, now_ns))]
    try:
        shards = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    except OSError:
        return folders
    folders.extend((shard, *_folder(os.path.join(root, shard), now_ns)) for shard in shards)
    return folders


def _changed_streams(journal: str, names: list[str], header: _Header) -> list[str]:
    """The stream files among ``names`` that are not as the last check found them sound (their
    inode, size or mtime differ, or they changed within 2 s of that check): one stat each."""
    old = array.array("q")
    old.frombytes(header.stats)
    now = array.array("q")
    try:
        folder = os.open(journal, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return list(names)
    try:
        for name in names:
            try:
                stat = os.stat(name, dir_fd=folder)
            except OSError:
                now.extend((-2,) * _STAT)  # (never as remembered)
            else:
                now.extend(file_stat(stat))
    finally:
        os.close(folder)
    if names == header.names and len(old) == len(now):
        if old == now:
            return []
        return [
            name
            for i, name in enumerate(names)
            if now[i * _STAT : i * _STAT + _STAT] != old[i * _STAT : i * _STAT + _STAT]
        ]
    where = (
        {name: i for i, name in enumerate(header.names)}
        if len(old) == len(header.names) * _STAT
        else {}
    )
    changed: list[str] = []
    for i, name in enumerate(names):
        j = where.get(name)
        if j is None or now[i * _STAT : i * _STAT + _STAT] != old[j * _STAT : j * _STAT + _STAT]:
            changed.append(name)
    return changed


def _check_in_parallel(
    store: Store,
    jobs: list[tuple[str, _Summary | None]],
    blob_names: list[str],
    workers: int | None,
) -> tuple[dict[str, _Checked], dict[str, _Hashed]]:
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
        blobs = _check_blobs((root, blob_names))
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
            blob_results = pool.map(_check_blobs, blob_batches)
            checked = [c for batch in stream_results for c in batch]
            blobs = [b for batch in blob_results for b in batch]
    return {c.stream: c for c in checked}, {b.sha256: b for b in blobs}


def _batches(items: list[_T], workers: int) -> list[list[_T]]:
    """``items`` in about four batches a worker (few round trips, yet even at the end)."""
    size = max(1, -(-len(items) // (workers * 4)))
    return [items[i : i + size] for i in range(0, len(items), size)]


_MAGIC = b"ownloop verify.state\n"  # then the header's length, the header and the bulk
_LENGTH = 8


def _load_state(store: Store) -> _Saved:
    """The last sound check's state (its header; the bulk is read when needed); an empty one
    when there is none, or it is unreadable or of another version."""
    path = store.root / _STATE
    try:
        with open(path, "rb") as file:
            if file.read(len(_MAGIC)) != _MAGIC:
                return _Saved(_Header())
            length = int.from_bytes(file.read(_LENGTH), "little")
            size = os.fstat(file.fileno()).st_size
            if length > size:
                return _Saved(_Header())
            header = msgspec.msgpack.decode(file.read(length), type=_Header)
    except (OSError, ValueError, msgspec.MsgspecError):
        return _Saved(_Header())
    offset = len(_MAGIC) + _LENGTH + length
    if header.version != _Header().version or size - offset != header.bulk:
        return _Saved(_Header())
    return _Saved(header, path, offset)


def _save_state(store: Store, header: _Header, state: _State) -> None:
    """Write ``verify.state`` whole (a new file renamed over the old); a store that cannot be
    written keeps its old state: the next check only reads more."""
    path = store.root / _STATE
    temporary = path.with_name(f".{_STATE}.{os.getpid()}.tmp")
    bulk = msgspec.msgpack.encode(state)
    head = msgspec.msgpack.encode(msgspec.structs.replace(header, bulk=len(bulk)))
    try:
        with open(temporary, "wb") as file:
            file.write(_MAGIC)
            file.write(len(head).to_bytes(_LENGTH, "little"))
            file.write(head)
            file.write(bulk)
        os.replace(temporary, path)
    except OSError:
        try:
            temporary.unlink(missing_ok=True)
        except OSError:
            pass


def _run_problems(seen: _Seen, run_id: str, fingerprint: str | None) -> Iterator[Problem]:
    """``verify --run``: the run must be sealed, with the fingerprint the user cites."""
    if run_id not in seen.named_runs:
        yield Problem(
            "error",
            f"run {run_id}",
            "no such run",
            'no event names it. List runs with: ownloop sql "select * from runs"',
        )
        return
    sealed = seen.seals.get(run_id)
    if sealed is None:
        yield Problem(
            "error",
            f"run {run_id}",
            "not sealed",
            f"only a sealed run can be checked as a whole. Seal it with: ownloop seal "
            f"--run {run_id}",
        )
        return
    where, seal = sealed
    if fingerprint and not seal.fingerprint.startswith(fingerprint.lower()):
        yield Problem(
            "error",
            where,
            "other fingerprint",
            f"the run's seal is {seal.fingerprint}, not {fingerprint}",
        )
