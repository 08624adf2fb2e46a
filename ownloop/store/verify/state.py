"""``verify.state``: what the last check without an error found sound, so an incremental
check reads only the streams and blobs whose files changed. It starts with what tells that
nothing changed (the stream files' names and stats, the blob folders' stats, what that check
reported); the summaries after it are decoded only when something changed."""

from __future__ import annotations

import array
import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ownloop.store.filestat import RACY, STAT, file_stat, pack
from ownloop.store.verify.report import Problem
from ownloop.store.verify.streams import Hashed, Summary

if TYPE_CHECKING:
    from ownloop.store import Store

__all__ = [
    "NEVER",
    "RACY_NS",
    "Header",
    "Saved",
    "State",
    "blob_folder_stats",
    "blob_stats",
    "changed_streams",
    "folder_stat",
    "load_state",
    "run_streams",
    "save_state",
    "stream_stats",
]

_STATE = "verify.state"  # in the store's root, beside index.duckdb: a cache, safe to delete
RACY_NS = 2_000_000_000  # a file changed this close to a check may change again unseen by mtime


class State(msgspec.Struct, kw_only=True):
    """What the last check without an error found sound (``verify.state``'s bulk, decoded only
    when something changed)."""

    checked_ns: int = 0  # when that check started
    streams: dict[str, Summary] = {}
    blobs: dict[str, str] = {}  # sha256 -> the first line referring to it ("" if none)


NEVER = (-1, -1)  # a folder's (inode, mtime_ns) that no folder has: list it again
_STAT = STAT  # a stream's (inode, size, mtime_ns, ctime_ns) in ``Header.stats``


class Header(msgspec.Struct, kw_only=True):
    """The start of ``verify.state``: enough to tell, without decoding the rest, that nothing
    changed since that check: the journal's file names, each one's inode, size and mtime, and
    the blob folders' inodes and mtimes (a folder's mtime changes when a file is added to it or
    removed). What that check reported is kept, to be reported again."""

    version: int = 3
    checked_ns: int = 0
    journal: tuple[int, int] = NEVER  # the journal folder's (inode, mtime_ns)
    names: list[str] = []  # every stream file, sorted
    stats: bytes = b""  # array('q'): (inode, size, mtime_ns, ctime_ns) per name; -1s: read it
    blob_names: list[str] = []  # the blobs found sound, sorted
    blob_stats: bytes = b""  # array('q'): the same four per blob file; -1s: hash it again
    blob_folders: list[tuple[str, int, int]] = []  # ("" for the root, each shard), inode, mtime
    events: int = 0
    blobs: int = 0  # blobs present or referenced
    present: int = 0  # blobs present
    problems: list[Problem] = []  # warnings that check found (a check with an error is not kept)
    bulk: int = 0  # bytes of the encoded ``State`` after the header


class Saved:
    """``verify.state`` as read: the header, and the bulk read and decoded on first use."""

    def __init__(self, header: Header, path: Path | None = None, offset: int = 0) -> None:
        self.header = header
        self._path = path
        self._offset = offset
        self._state: State | None = None

    @property
    def state(self) -> State:
        if self._state is None:
            self._state = State()
            if self._path is not None:
                try:
                    with open(self._path, "rb") as file:
                        file.seek(self._offset)
                        self._state = msgspec.msgpack.decode(file.read(), type=State)
                except (OSError, msgspec.MsgspecError):
                    pass
            if self._state.checked_ns != self.header.checked_ns:  # not written together
                self._state = State()
        return self._state


def run_streams(state: State, run_id: str) -> set[str]:
    """The streams the last check found holding ``run_id``'s events, and those its seals list."""
    ours = {stream for stream, summary in state.streams.items() if run_id in summary.named_runs}
    for summary in state.streams.values():
        for _, seal in summary.seals:
            if seal.run_id == run_id:
                ours.update(head.stream for head in seal.streams)
    return ours


def stream_stats(names: list[str], sound: dict[str, Summary], started: int) -> bytes:
    """The stats to remember of each stream: -1s for one not found sound, or changed so close to
    the check that a later change might not move its mtime."""
    return pack(
        RACY
        if (summary := sound.get(name[:-6])) is None or summary.mtime_ns > started - RACY_NS
        else (summary.inode, summary.file_size, summary.mtime_ns, summary.ctime_ns)
        for name in names
    )


def blob_stats(
    names: list[str],
    same: dict[str, tuple[int, int, int, int]],
    hashed: dict[str, Hashed],
    started: int,
) -> bytes:
    """The stats to remember of each blob found sound: as compared, or taken before hashing."""
    stats: list[tuple[int, int, int, int]] = []
    for name in names:
        found = hashed.get(name)
        stat = found.stat if found is not None and found.wrong is None else same.get(name)
        if stat is None or stat[2] > started - RACY_NS:
            stat = RACY
        stats.append(stat)
    return pack(stats)


def folder_stat(path: str, now_ns: int) -> tuple[int, int]:
    """A folder's (inode, mtime_ns); ``NEVER`` when it is missing or changed so recently that
    a later change might not move its mtime."""
    try:
        stat = os.stat(path)
    except OSError:
        return NEVER
    if stat.st_mtime_ns > now_ns - RACY_NS:
        return NEVER
    return (stat.st_ino, stat.st_mtime_ns)


def blob_folder_stats(root: str, now_ns: int) -> list[tuple[str, int, int]]:
    """The blob folder's and each shard folder's (name, inode, mtime_ns): as long as they are
    the same, no blob was added or removed."""
    folders = [("", *folder_stat(root, now_ns))]
    try:
        shards = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    except OSError:
        return folders
    folders.extend((shard, *folder_stat(os.path.join(root, shard), now_ns)) for shard in shards)
    return folders


def changed_streams(journal: str, names: list[str], header: Header) -> list[str]:
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


_MAGIC = b"ownloop verify.state\n"  # then the header's length, the header and the bulk
_LENGTH = 8


def load_state(store: Store) -> Saved:
    """The last sound check's state (its header; the bulk is read when needed); an empty one
    when there is none, or it is unreadable or of another version."""
    path = store.root / _STATE
    try:
        with open(path, "rb") as file:
            if file.read(len(_MAGIC)) != _MAGIC:
                return Saved(Header())
            length = int.from_bytes(file.read(_LENGTH), "little")
            size = os.fstat(file.fileno()).st_size
            if length > size:
                return Saved(Header())
            header = msgspec.msgpack.decode(file.read(length), type=Header)
    except (OSError, ValueError, msgspec.MsgspecError):
        return Saved(Header())
    offset = len(_MAGIC) + _LENGTH + length
    if header.version != Header().version or size - offset != header.bulk:
        return Saved(Header())
    return Saved(header, path, offset)


def save_state(store: Store, header: Header, state: State) -> None:
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
