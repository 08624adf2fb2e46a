"""``ownloop verify``: check every stream's hash chain and every blob, one line per problem.

A torn tail (a writer killed mid-write) is a warning: readers skip it and nothing acknowledged was
lost. Everything else is an error: an edited, reordered or deleted journal line, bytes after the
last newline that no interrupted write leaves, a referenced blob that is missing, or a blob whose
bytes do not match its name. The journal is read directly, never through the index.

Each stream is checked alone (in worker processes, one a core) into a small summary
(:mod:`.streams`); the checks that span streams (catalogs, seals, swapped streams, missing runs)
work on the summaries (:mod:`.spanning`). The summaries of a check without an error are kept in
``verify.state`` (:mod:`.state`), so an incremental check reads only the streams whose files
changed, and any check finds a remembered stream gone, shorter or rewritten.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, NamedTuple

from ownloop.errors import OwnloopError
from ownloop.store.events import StreamHead
from ownloop.store.filestat import RACY, changed_blobs
from ownloop.store.verify.report import Problem, VerifyReport
from ownloop.store.verify.spanning import (
    Seen,
    blob_problems,
    claim_problems,
    pack_problems,
    run_problems,
    seal_fingerprint,
    store_problems,
)
from ownloop.store.verify.state import (
    NEVER,
    Header,
    Saved,
    State,
    blob_folder_stats,
    blob_stats,
    changed_streams,
    folder_stat,
    load_state,
    run_streams,
    save_state,
    stream_stats,
)
from ownloop.store.verify.streams import (
    Checked,
    Hashed,
    Summary,
    blob_references,
    check_blobs,
    check_in_parallel,
    listed_blobs,
    stream_files,
)

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = ["Problem", "VerifyReport", "blob_references", "seal_fingerprint", "verify_store"]


class _Looked(NamedTuple):
    """What a check found on disk before reading anything: the stream files to cover, the
    journal folder's and the blob folders' stats, the blob files whose stat changed."""

    started: int
    names: list[str]
    folder: tuple[int, int]
    blob_folders: list[tuple[str, int, int]]
    restat: set[str]  # blob files not as the last check found them
    same_blobs: dict[str, tuple[int, int, int, int]]  # the others, with their stats
    blobs_as_before: bool  # no blob file or folder changed


class _Found(NamedTuple):
    """The streams' results put together: problems, summaries, and which blobs are referenced."""

    problems: list[Problem]
    summaries: dict[str, Summary]
    sound: dict[str, Summary]  # what the next check may take as it is
    referenced: dict[str, str]  # sha256 -> the first line that refers to it


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
    saved = load_state(store) if whole else Saved(Header())
    header, state = saved.header, saved.state
    looked = _look(store, header, streams, incremental)
    names = looked.names
    changed = changed_streams(str(store.journal_dir), names, header) if incremental else names
    if (
        incremental
        and whole
        and run_id is None
        and not changed
        and names == header.names
        and looked.blobs_as_before
    ):
        return _as_last_found(store, header)
    remembered = state.checked_ns == header.checked_ns != 0
    changed = _to_read(names, changed, saved, run_id if incremental else None)
    journal = str(store.journal_dir)
    jobs = [(os.path.join(journal, name), state.streams.get(name[:-6])) for name in changed]
    present = _present_blobs(store, looked, header, state, whole, incremental, remembered)
    # A remembered blob is taken as sound only while its own file is as that check found it.
    known = {s: w for s, w in state.blobs.items() if s not in looked.restat} if incremental else {}
    blob_jobs = sorted(present - known.keys())
    results, checked_blobs = check_in_parallel(store, jobs, blob_jobs, workers)
    if run_id is not None:  # every blob the run's streams refer to, hashed again
        _hash_again(store, run_id, results, checked_blobs, workers)
        known = {s: w for s, w in known.items() if s not in checked_blobs}
    for sha256 in [s for s, h in checked_blobs.items() if h.wrong == "missing"]:
        present.discard(sha256)  # gone since it was listed (or remembered): found below
    found = _gather(names, results, state, whole, incremental)
    seen = Seen(store.journal_dir, found.summaries)
    spanning = list(store_problems(seen))
    problems = found.problems + spanning
    if run_id is not None:
        problems.extend(run_problems(seen, run_id, fingerprint))
    problems.extend(_blob_findings(store, found.referenced, present, known, checked_blobs))
    problems.extend(claim_problems(store) + pack_problems(store) if whole else [])
    report = VerifyReport(
        problems,
        len(names),
        sum(s.events for s in found.summaries.values()),
        len(found.referenced.keys() | present),
        {
            stream: StreamHead(stream=stream, events=summary.lines, head=summary.head)
            for stream, summary in found.summaries.items()
        },
        len(names) - len(jobs),
        len(present - checked_blobs.keys()),
    )
    unchanged = (  # as the state says (also its folders: one listed again is remembered)
        not jobs
        and not blob_jobs
        and found.sound.keys() == state.streams.keys()
        and present == known.keys()
        and (names, looked.folder, looked.blob_folders)
        == (header.names, header.journal, header.blob_folders)
    )
    if whole and not report.errors and not (incremental and unchanged):
        _remember(store, looked, report, found, present, checked_blobs, spanning)
    return report


def _as_last_found(store: Store, header: Header) -> VerifyReport:
    """The report when no stream or blob changed since the last check: what that check reported
    holds (a recorder's stale claim files, which are not journal data, are looked for again)."""
    return VerifyReport(
        list(header.problems) + claim_problems(store) + pack_problems(store),
        len(header.names),
        header.events,
        header.blobs,
        {},
        len(header.names),
        header.present,
    )


def _to_read(names: list[str], changed: list[str], saved: Saved, run_id: str | None) -> list[str]:
    """The stream files to read: the ``changed`` ones, and the run ``run_id``'s (read again,
    always, by an incremental check of a run); all when the bulk of the saved state did not
    decode."""
    if saved.state.checked_ns != saved.header.checked_ns:
        return names
    if run_id is None:
        return changed
    ours = run_streams(saved.state, run_id)
    return [name for name in names if name in changed or name[:-6] in ours]


def _hash_again(
    store: Store,
    run_id: str,
    results: dict[str, Checked],
    checked_blobs: dict[str, Hashed],
    workers: int | None,
) -> None:
    """Hash every blob the run's streams refer to that this check has not hashed yet (whatever
    the last check found), into ``checked_blobs``."""
    again = sorted(
        {
            sha256
            for checked in results.values()
            if checked.summary is not None and run_id in checked.summary.named_runs
            for sha256 in checked.references
        }
        - checked_blobs.keys()
    )
    checked_blobs.update(check_in_parallel(store, [], again, workers)[1])


def _blob_findings(
    store: Store,
    referenced: dict[str, str],
    present: set[str],
    known: dict[str, str],
    checked_blobs: dict[str, Hashed],
) -> Iterator[Problem]:
    """The blobs' problems: a referenced blob neither listed nor remembered is checked now
    (into ``checked_blobs``), and a remembered one that is gone and referenced is missing."""
    unlisted = sorted(referenced.keys() - present - known.keys() - checked_blobs.keys())
    checked_blobs.update((h.sha256, h) for h in check_blobs((str(store.blobs.root), unlisted)))
    for sha256 in known.keys() - present:
        if sha256 in referenced:
            checked_blobs[sha256] = Hashed(sha256, "missing", RACY)
    return blob_problems(checked_blobs, referenced)


def _look(
    store: Store, header: Header, streams: Collection[str] | None, incremental: bool
) -> _Looked:
    """The stream files to cover and the folders' stats, before any file is read."""
    whole = streams is None
    started = time.time_ns()
    journal = str(store.journal_dir)
    root = str(store.blobs.root)
    folder = folder_stat(journal, started)  # before listing it: a file added meanwhile changes it
    blob_folders = blob_folder_stats(root, started) if whole else []
    if streams is not None:
        names = [f"{stream}.jsonl" for stream in sorted(streams)]
    elif incremental and folder == header.journal != NEVER:
        names = header.names  # no file was added, removed or renamed
    else:
        names = stream_files(store.journal_dir)
    restat, same_blobs = (
        changed_blobs(root, header.blob_names, header.blob_stats)
        if incremental and whole
        else (set(header.blob_names), {})
    )
    blobs_as_before = (
        incremental
        and not restat
        and blob_folders == header.blob_folders
        and all(entry[1:] != NEVER for entry in blob_folders)
    )
    return _Looked(started, names, folder, blob_folders, restat, same_blobs, blobs_as_before)


def _present_blobs(
    store: Store,
    looked: _Looked,
    header: Header,
    state: State,
    whole: bool,
    incremental: bool,
    remembered: bool,
) -> set[str]:
    """The blobs in the store: remembered where their folders did not change, else listed."""
    if not whole:
        return set()
    if looked.blobs_as_before and remembered:
        return set(state.blobs)  # (a check with a referenced blob missing is not kept)
    if incremental and remembered:
        # List the shard folders whose mtime changed; the others hold what they held.
        folders = looked.blob_folders
        kept = {entry[0] for entry in folders if entry[1:] != NEVER} & {
            entry[0] for entry in header.blob_folders if entry in folders
        }
        present = {sha256 for sha256 in state.blobs if sha256[:2] in kept}
        return present | listed_blobs(store.blobs.root, {e[0] for e in folders} - kept)
    return listed_blobs(store.blobs.root)


def _gather(
    names: list[str], results: dict[str, Checked], state: State, whole: bool, incremental: bool
) -> _Found:
    """Each stream's result (or, unchanged, the last check's summary) put together."""
    problems: list[Problem] = []
    summaries: dict[str, Summary] = {}
    sound: dict[str, Summary] = {}
    referenced: dict[str, str] = {}
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
    return _Found(problems, summaries, sound, referenced)


def _remember(
    store: Store,
    looked: _Looked,
    report: VerifyReport,
    found: _Found,
    present: set[str],
    checked_blobs: dict[str, Hashed],
    spanning: list[Problem],
) -> None:
    """Keep this check's findings in ``verify.state`` for the next check."""
    blob_names = sorted(present)
    started = looked.started
    save_state(
        store,
        Header(
            checked_ns=started,
            journal=looked.folder,
            names=looked.names,
            stats=stream_stats(looked.names, found.sound, started),
            blob_names=blob_names,
            blob_stats=blob_stats(blob_names, looked.same_blobs, checked_blobs, started),
            blob_folders=looked.blob_folders,
            events=report.events,
            blobs=report.blobs,
            present=len(present),
            problems=spanning,
        ),
        State(
            checked_ns=started,
            streams=found.sound,
            blobs={sha: found.referenced.get(sha, "") for sha in found.referenced.keys() | present},
        ),
    )
