"""The append-only journal: JSON-lines streams, one writer each, hash-chained.

A line's bytes, its checksum and the chain from line to line are ``lines.py``'s; this module
writes the stream files, reads them back (every request in full) and checks one whole file.

Format 2 (``FORMAT``) writes a ``ModelCalled``'s request compactly: a message already written in
full earlier in the same stream (the system prompt, the history, the image window: nearly all of
a request repeats the previous call's) is not written again. The event's ``message_refs`` then
lists, for every message of the request in order, ``[offset, index]``: the byte offset of the line
of this stream that holds it in full (an earlier line or this one) and its index in that line's
``messages``, which holds only the messages written in full there. A reference never points at
another reference, so resolving one costs at most one read. The checksum covers the line as
written (compact); every reader (``read_lines``, ``check_stream``, ``decode_places``) returns the
request in full. Format 1 lines (every request in full) are format 2 lines without references.
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, NamedTuple

import msgspec

from ownloop.errors import OwnloopError
from ownloop.store.changes import Toucher
from ownloop.store.disk import StoreNotWritable, disk_error
from ownloop.store.events import Event, Message, ModelCalled, StreamHead
from ownloop.store.lines import (
    LINE_HEAD,
    ChainState,
    DecodedLines,
    check_chain,
    checksum,
    decode_intact,
    decode_line,
    decode_lines,
    split_lines,
)

__all__ = [
    "FORMAT",
    "BrokenReference",
    "JournalLine",
    "StreamCheck",
    "StreamFiles",
    "StreamProblem",
    "StreamWriter",
    "check_stream",
    "decode_places",
    "expand_requests",
    "read_lines",
    "verify_stream",
    # handed on from lines.py (the ingest imports them from here)
    "ChainState",
    "DecodedLines",
    "check_chain",
    "decode_intact",
    "decode_lines",
]

FORMAT = 2
"""The journal's line format: 2 writes requests with ``message_refs`` (see above)."""

_encoder = msgspec.json.Encoder()
_event_decoder = msgspec.json.Decoder(Event)


class JournalLine(NamedTuple):
    """One decoded line and where it sits in its stream file."""

    offset: int
    end: int
    seq: int
    event: Event


class StreamProblem(NamedTuple):
    stream: str
    line: int  # 1-based line number
    # "torn tail", "bad checksum", "broken chain", "unreadable", "sequence gap", "bad reference"
    kind: str
    detail: str


class StreamWriter:
    """The only writer of a new stream file. ``append`` writes a batch and fsyncs it once.

    The file is created by the first append (a writer that never appends leaves no file), with
    O_EXCL: a second writer of the same name fails instead of interleaving lines.
    """

    compact_requests = True
    """Format 2 (see the module's doc); False writes every request in full, as format 1 did
    (benchmarks compare the two)."""

    def __init__(
        self,
        path: Path,
        *,
        fsync: bool = True,
        before_write: Callable[[], None] = lambda: None,
    ) -> None:
        """``before_write`` is called before each batch is written (the store's: its blobs
        put so far made durable, ``BlobStore.settle``)."""
        self.path = path
        self.stream_id = path.stem
        self._fsync = fsync
        self._before_write = before_write
        self._lock = threading.Lock()
        self._seq, self._prev = 0, ""
        self._size = 0  # bytes acknowledged: the file is cut back to this after a failed write
        self._fd = -1
        self._closed = False
        self._broken: str | None = None  # why appends are refused, once a cut-back failed
        # sha256 of each message written in full -> (offset of its line, index in its messages)
        self._written: dict[bytes, tuple[int, int]] = {}
        self._marker = Toucher(path.parent)
        if path.exists():
            raise FileExistsError(errno.EEXIST, "a journal stream of this name exists", str(path))

    def _encode(
        self, events: Sequence[Event]
    ) -> tuple[bytes, int, str, dict[bytes, tuple[int, int]]]:
        """The batch's lines, the last seq and sum, and the messages it writes in full; a line
        that would not decode is refused."""
        chunks: list[bytes] = []
        seq, prev = self._seq, self._prev
        offset = self._size
        added: dict[bytes, tuple[int, int]] = {}
        for event in events:
            seq += 1
            if type(event) is ModelCalled:
                if event.message_refs:
                    raise ValueError(
                        "refusing to append a ModelCalled with message_refs: the journal "
                        "writes them itself; pass the request's messages in full"
                    )
                if event.messages and self.compact_requests:
                    event = self._compact(event, offset, added)
            try:
                body = _encoder.encode(event)
                _event_decoder.decode(body)
            except (msgspec.MsgspecError, UnicodeError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"refusing to append a {type(event).__name__} that would not decode: {exc}"
                ) from None
            total = checksum(prev, seq, body)
            head = b'{"seq":%d,"prev":"%s","sum":"%s","event":' % (
                seq,
                prev.encode(),
                total.encode(),
            )
            chunks += (head, body, b"}\n")
            offset += len(head) + len(body) + 2
            prev = total
        return b"".join(chunks), seq, prev, added

    def _compact(
        self, call: ModelCalled, offset: int, added: dict[bytes, tuple[int, int]]
    ) -> ModelCalled:
        """``call`` as written at ``offset``: each message already written in full in this
        stream (or earlier in this batch, or this call) becomes a reference to it."""
        refs: list[tuple[int, int]] = []
        own: list[Message] = []
        for message in call.messages:
            key = hashlib.sha256(_encoder.encode(message)).digest()
            where = self._written.get(key) or added.get(key)
            if where is None:
                where = added[key] = (offset, len(own))
                own.append(message)
            refs.append(where)
        if len(own) == len(call.messages):
            return call  # nothing repeats: the request in full, as format 1 wrote it
        return msgspec.structs.replace(call, messages=tuple(own), message_refs=tuple(refs))

    def append(self, events: Sequence[Event]) -> None:
        """Write ``events`` as consecutive lines, then fsync: after it returns they are durable.

        Raises:
            StoreNotWritable: the batch did not reach the disk (full, read-only, an I/O error);
                none of it stays in the stream.
            ValueError: an event would not decode once written (nothing was written).
        """
        if not events:
            return
        with self._lock:
            if self._closed:
                raise ValueError(f"stream {self.stream_id} is closed")
            if self._broken:
                raise StoreNotWritable(self._broken)
            data, seq, prev, added = self._encode(events)
            self._before_write()  # the blobs these lines may name reach the device first
            try:
                if self._fd < 0:
                    self._fd = os.open(
                        self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644
                    )
                view = memoryview(data)
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                if self._fsync:
                    os.fsync(self._fd)
            except OSError as exc:
                raise self._cut_back(exc) from None
            self._marker.touch()  # after the lines are in: see changes.py
            self._size += len(data)
            self._seq, self._prev = seq, prev
            self._written.update(added)

    def _cut_back(self, exc: OSError) -> StoreNotWritable:
        """Undo a partly written batch; when that fails too, refuse the stream from now on."""
        explained = disk_error(exc, self.path)
        what = (
            str(explained)
            if explained is not None
            else f"cannot append to {self.path}: {os.strerror(exc.errno or 0) or exc}"
        )
        if self._fd < 0:
            return StoreNotWritable(what, exc.errno)
        try:
            os.ftruncate(self._fd, self._size)
        except OSError as cut:
            self._broken = (
                f"{what}; the partial write could not be cut back "
                f"({os.strerror(cut.errno or 0)}), so the stream takes no more "
                "appends. Run: ownloop verify"
            )
            return StoreNotWritable(self._broken, exc.errno)
        return StoreNotWritable(what, exc.errno)

    def head(self) -> StreamHead:
        """Where the stream stands: its id, how many lines it has, the last line's sum."""
        with self._lock:
            return StreamHead(stream=self.stream_id, events=self._seq, head=self._prev)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BrokenReference(OwnloopError):
    """A compact request refers to a line or message that is not in its stream."""


LineAt = Callable[[str, int], bytes]
"""Reads the line of a stream (by name) that starts at a byte offset, without its newline."""


class StreamFiles:
    """``LineAt`` over the stream files of a journal folder, each opened once; ``close()`` them."""

    def __init__(self, journal_dir: Path) -> None:
        self.journal_dir = journal_dir
        self._files: dict[str, BinaryIO] = {}

    def __call__(self, stream: str, offset: int) -> bytes:
        f = self._files.get(stream)
        if f is None:
            f = self._files[stream] = open(self.journal_dir / f"{stream}.jsonl", "rb")  # noqa: SIM115
        return _line_at(f, offset)

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    def __enter__(self) -> StreamFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _line_at(f: BinaryIO, offset: int) -> bytes:
    f.seek(offset)
    chunks: list[bytes] = []
    while block := f.read(1 << 16):
        nl = block.find(b"\n")
        if nl >= 0:
            chunks.append(block[:nl])
            return b"".join(chunks)
        chunks.append(block)
    return b""  # no complete line there


def _written_at(line_at: LineAt, stream: str, offset: int) -> tuple[Message, ...]:
    """The messages a stream's line at ``offset`` writes in full; () when it holds no call."""
    try:
        event = decode_line(line_at(stream, offset)).event
    except (msgspec.DecodeError, OSError):
        return ()
    return event.messages if type(event) is ModelCalled else ()


def _expanded(
    call: ModelCalled,
    stream: str,
    offset: int,
    known: dict[tuple[str, int], tuple[Message, ...]],
    line_at: LineAt,
) -> ModelCalled:
    messages = []
    for at, index in call.message_refs:
        written = known.get((stream, at))
        if written is None:
            # Only an earlier line can hold what a line refers to.
            written = known[(stream, at)] = (
                _written_at(line_at, stream, at) if 0 <= at < offset else ()
            )
        if not 0 <= index < len(written):
            raise BrokenReference(
                f"stream {stream}: the model call at byte {offset} refers to message {index} "
                f"of the line at byte {at}, which has no such message. Run: ownloop verify"
            )
        messages.append(written[index])
    return msgspec.structs.replace(call, messages=tuple(messages), message_refs=())


def expand_requests(
    events: Sequence[Event],
    streams: Sequence[str],
    offsets: Sequence[int],
    line_at: LineAt,
    on_broken: Callable[[int, BrokenReference], None] | None = None,
) -> list[Event]:
    """``events`` with every compact request in full (see the module's doc).

    Args:
        events: decoded events, as written.
        streams, offsets: the stream and byte offset of each event's line.
        line_at: reads a line that a request refers to when it is not among ``events``.
        on_broken: told (the event's position, the error) of a request whose reference names
            no message; that request stays as written. Without it, the error is raised.

    Raises:
        BrokenReference: a reference names no message written in full in its stream.
    """
    out = list(events)
    compact = [i for i, e in enumerate(out) if type(e) is ModelCalled and e.message_refs]
    if not compact:
        return out
    # The messages each call among ``events`` writes in full, by where its line is.
    known = {
        (streams[i], offsets[i]): e.messages for i, e in enumerate(events) if type(e) is ModelCalled
    }
    for i in compact:
        call = out[i]
        assert isinstance(call, ModelCalled)
        try:
            out[i] = _expanded(call, streams[i], offsets[i], known, line_at)
        except BrokenReference as exc:
            if on_broken is None:
                raise
            on_broken(i, exc)
    return out


def decode_places(
    raw_lines: Sequence[bytes],
    streams: Sequence[str],
    offsets: Sequence[int],
    line_at: LineAt,
) -> list[Event]:
    """Decode lines (without newlines) read from the given streams and byte offsets, every
    request in full; lines that do not decode are left out (as ``decode_lines`` does)."""
    decoded = decode_lines(raw_lines)
    if decoded.positions is not None:
        streams = [streams[i] for i in decoded.positions]
        offsets = [offsets[i] for i in decoded.positions]
    return expand_requests(decoded.events, streams, offsets, line_at)


def read_lines(path: Path, offset: int = 0) -> Iterator[JournalLine]:
    """Decode the stream's complete lines from ``offset``, every request in full; a torn last
    line is skipped.

    Raises:
        BrokenReference: a request refers to a message its stream does not hold.
    """
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
        lines = [
            JournalLine(start, end, line.seq, line.event)
            for start, end, raw in split_lines(data, offset)
            for line in (decode_line(raw),)
        ]
        stream = path.stem
        events = expand_requests(
            [line.event for line in lines],
            [stream] * len(lines),
            [line.offset for line in lines],
            lambda _, at: _line_at(f, at),
        )
    for line, event in zip(lines, events, strict=True):
        yield line._replace(event=event) if event is not line.event else line


class StreamCheck(NamedTuple):
    """What ``check_stream`` found: problems, the events that decoded (with line numbers), and
    each complete line's ``sum`` in order ("" for a line that is not a journal line)."""

    problems: list[StreamProblem]
    events: list[tuple[int, Event]]
    sums: list[str] = []


def verify_stream(path: Path) -> list[StreamProblem]:
    """Every problem in one stream: a torn tail, a bad checksum, a broken chain, bad JSON."""
    return check_stream(path).problems


def check_stream(path: Path) -> StreamCheck:
    """Check one stream's hash chain line by line and decode its events, in one pass.

    Problem kinds: "torn tail" (a writer died mid-write: the bytes after the last newline are the
    start of the line the chain expects next), and the signs of tampering or damage: "bad
    checksum", "broken chain", "sequence gap", "unreadable" and "tampered tail" (bytes after the
    last newline that no interrupted write can leave, e.g. a complete line whose newline was
    replaced).
    """
    problems: list[StreamProblem] = []
    events: list[tuple[int, Event]] = []
    sums: list[str] = []
    name = path.stem
    data = path.read_bytes()
    prev = ""
    expected_seq = 1
    number = 0
    offsets: list[int] = []  # of each decoded event's line
    for number, (start, _, raw) in enumerate(split_lines(data), start=1):
        match = LINE_HEAD.match(raw)
        if not match or not raw.endswith(b"}"):
            problems.append(StreamProblem(name, number, "unreadable", "not a journal line"))
            sums.append("")
            prev = ""
            expected_seq += 1
            continue
        seq, line_prev = int(match.group(1)), match.group(2).decode()
        total = match.group(3).decode()
        sums.append(total)
        body = raw[match.end() : -1]
        if line_prev != prev:
            problems.append(
                StreamProblem(name, number, "broken chain", "prev does not match the line before")
            )
        if checksum(line_prev, seq, body) != total:
            problems.append(
                StreamProblem(name, number, "bad checksum", "the line's bytes were changed")
            )
        try:
            events.append((number, decode_line(raw).event))
            offsets.append(start)
        except msgspec.DecodeError as exc:
            problems.append(StreamProblem(name, number, "unreadable", str(exc)))
        if seq != expected_seq:
            problems.append(
                StreamProblem(name, number, "sequence gap", f"seq {seq}, expected {expected_seq}")
            )
        prev = total
        expected_seq = seq + 1
    tail = data[data.rfind(b"\n") + 1 :]
    if tail:
        problems.append(_tail_problem(name, number + 1, tail, prev, expected_seq))
    _expand_checked(name, data, events, offsets, problems)
    return StreamCheck(problems, events, sums)


def _expand_checked(
    name: str,
    data: bytes,
    events: list[tuple[int, Event]],
    offsets: list[int],
    problems: list[StreamProblem],
) -> None:
    """Expand the compact requests among ``events`` in place; a reference to a message the
    stream does not hold is a "bad reference" problem (the call stays as written)."""

    def line_at(_: str, at: int) -> bytes:
        end = data.find(b"\n", at)
        return data[at:end] if end >= 0 else b""

    def broken(i: int, exc: BrokenReference) -> None:
        problems.append(StreamProblem(name, events[i][0], "bad reference", str(exc)))

    expanded = expand_requests(
        [event for _, event in events], [name] * len(events), offsets, line_at, broken
    )
    events[:] = [(number, event) for (number, _), event in zip(events, expanded, strict=True)]


def _tail_problem(name: str, number: int, tail: bytes, prev: str, seq: int) -> StreamProblem:
    """A torn tail is a prefix of the line the writer was writing; anything else was edited."""
    head = b'{"seq":%d,"prev":"%s","sum":"' % (seq, prev.encode())
    consistent = head.startswith(tail) if len(tail) <= len(head) else tail.startswith(head)
    if consistent and len(tail) > len(head):
        # A whole checksummed line plus one more byte: its newline was replaced.
        whole = tail[:-1]
        match = LINE_HEAD.match(whole)
        if (
            match
            and whole.endswith(b"}")
            and checksum(prev, seq, whole[match.end() : -1]) == match.group(3).decode()
        ):
            consistent = False
    if consistent:
        return StreamProblem(
            name,
            number,
            "torn tail",
            f"{len(tail)} bytes without a newline (a writer stopped mid-write); readers skip them",
        )
    return StreamProblem(
        name,
        number,
        "tampered tail",
        f"{len(tail)} bytes after the last newline are not the start of line {seq} of the chain",
    )
