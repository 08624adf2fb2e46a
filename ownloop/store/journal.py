"""The append-only journal: JSON-lines streams, one writer each, hash-chained.

A line is, byte for byte::

    {"seq":N,"prev":"P","sum":"S","event":{...}}\\n

``sum`` is the first 32 hex digits of sha256(prev + ":" + seq + ":" + event bytes) and the next
line's ``prev``; the first line's ``prev`` is empty. Changing any byte of a line breaks its own
``sum`` or the next line's ``prev``, so ``verify`` finds it. A last line without its newline is a
torn tail (a writer died mid-write): readers skip it and ``verify`` names it as such.
"""

from __future__ import annotations

import binascii
import errno
import hashlib
import operator
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import NamedTuple

import msgspec

from ownloop.store.disk import StoreNotWritable, disk_error
from ownloop.store.events import Event, StreamHead

__all__ = [
    "ChainState",
    "DecodedLines",
    "JournalLine",
    "StreamCheck",
    "StreamProblem",
    "StreamWriter",
    "check_chain",
    "check_stream",
    "decode_events",
    "decode_intact",
    "decode_lines",
    "read_lines",
    "split_lines",
    "verify_stream",
]

_HEAD = re.compile(rb'^\{"seq":(\d+),"prev":"([0-9a-f]*)","sum":"([0-9a-f]{32})","event":')
_encoder = msgspec.json.Encoder()


class _Line(msgspec.Struct, frozen=True):
    seq: int
    prev: str
    sum: str
    event: Event


_decoder = msgspec.json.Decoder(_Line)
_event_decoder = msgspec.json.Decoder(Event)
_batch_decoder = msgspec.json.Decoder(list[_Line])


class JournalLine(NamedTuple):
    """One decoded line and where it sits in its stream file."""

    offset: int
    end: int
    seq: int
    event: Event


class StreamProblem(NamedTuple):
    stream: str
    line: int  # 1-based line number
    kind: str  # "torn tail", "bad checksum", "broken chain", "unreadable", "sequence gap"
    detail: str


def _checksum(prev: str, seq: int, event_bytes: bytes) -> str:
    h = hashlib.sha256()
    h.update(f"{prev}:{seq}:".encode())
    h.update(event_bytes)
    return h.hexdigest()[:32]


class StreamWriter:
    """The only writer of a new stream file. ``append`` writes a batch and fsyncs it once.

    The file is created by the first append (a writer that never appends leaves no file), with
    O_EXCL: a second writer of the same name fails instead of interleaving lines.
    """

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self.stream_id = path.stem
        self._fsync = fsync
        self._lock = threading.Lock()
        self._seq, self._prev = 0, ""
        self._size = 0  # bytes acknowledged: the file is cut back to this after a failed write
        self._fd = -1
        self._closed = False
        self._broken: str | None = None  # why appends are refused, once a cut-back failed
        if path.exists():
            raise FileExistsError(errno.EEXIST, "a journal stream of this name exists", str(path))

    def _encode(self, events: Sequence[Event]) -> tuple[bytes, int, str]:
        """The batch's lines, the last seq and sum; a line that would not decode is refused."""
        chunks = []
        seq, prev = self._seq, self._prev
        for event in events:
            seq += 1
            try:
                body = _encoder.encode(event)
                _event_decoder.decode(body)
            except (msgspec.MsgspecError, UnicodeError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"refusing to append a {type(event).__name__} that would not decode: {exc}"
                ) from None
            total = _checksum(prev, seq, body)
            chunks.append(
                b'{"seq":%d,"prev":"%s","sum":"%s","event":' % (seq, prev.encode(), total.encode())
            )
            chunks.append(body)
            chunks.append(b"}\n")
            prev = total
        return b"".join(chunks), seq, prev

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
            data, seq, prev = self._encode(events)
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
            self._size += len(data)
            self._seq, self._prev = seq, prev

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


def split_lines(data: bytes, base: int = 0) -> Iterator[tuple[int, int, bytes]]:
    """Complete lines of ``data``: (offset, end, bytes without the newline); no torn tail."""
    start = 0
    while True:
        nl = data.find(b"\n", start)
        if nl < 0:
            return
        yield base + start, base + nl + 1, data[start:nl]
        start = nl + 1


def read_lines(path: Path, offset: int = 0) -> Iterator[JournalLine]:
    """Decode the stream's complete lines from ``offset``; a torn last line is skipped."""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    for start, end, raw in split_lines(data, offset):
        line = _decoder.decode(raw)
        yield JournalLine(start, end, line.seq, line.event)


def decode_events(raw_lines: Iterable[bytes]) -> list[Event]:
    """Decode many raw lines (without newlines) at once."""
    return [_decoder.decode(raw).event for raw in raw_lines]


class DecodedLines(NamedTuple):
    """Many lines decoded at once, as columns."""

    positions: list[int] | None  # where each decoded line was in the input; None: all of them
    seqs: list[int]
    events: list[Event]
    errors: list[tuple[int, str]]  # (where, why) for each line that did not decode


_seq_of = operator.attrgetter("seq")
_event_of = operator.attrgetter("event")


def decode_lines(raw_lines: Sequence[bytes]) -> DecodedLines:
    """Decode many raw lines (without newlines) at once.

    The lines are decoded as one JSON array (a single C call); only when that fails, or yields a
    different number of values, is each line decoded alone to find the bad ones.
    """
    lines: list[_Line] | None = None
    if raw_lines:
        try:
            lines = _batch_decoder.decode(b"[" + b",".join(raw_lines) + b"]")
            if len(lines) != len(raw_lines):
                lines = None
        except msgspec.DecodeError:
            lines = None
    else:
        lines = []
    if lines is not None:
        return DecodedLines(None, list(map(_seq_of, lines)), list(map(_event_of, lines)), [])
    index: list[int] = []
    good: list[_Line] = []
    errors: list[tuple[int, str]] = []
    for i, raw in enumerate(raw_lines):
        try:
            good.append(_decoder.decode(raw))
            index.append(i)
        except msgspec.DecodeError as exc:
            errors.append((i, str(exc)))
    return DecodedLines(index, list(map(_seq_of, good)), list(map(_event_of, good)), errors)


class ChainState(NamedTuple):
    """Where a stream's chain stands after a line: its sum and its seq."""

    prev: str = ""
    seq: int = 0


_prev_of = operator.attrgetter("prev")
_sum_of = operator.attrgetter("sum")
_digest = operator.methodcaller("digest")
_first_half = operator.itemgetter(slice(0, 16))  # 16 bytes: the 32 hex digits a sum keeps
_encode_str = str.encode


def decode_intact(
    raw_lines: Sequence[bytes], state: ChainState
) -> tuple[DecodedLines, ChainState] | None:
    """Decode lines (without newlines) that are all intact, checking their chain on the way.

    Returns what ``decode_lines`` returns and the chain's state after the last line when every
    line decodes and ``check_chain`` would find nothing wrong with any of them; otherwise None
    (then check with ``check_chain`` and decode with ``decode_lines``, line by line).

    The common case costs one batch decode and C-level passes over the lines: each line's head
    is rebuilt from its decoded seq, prev and sum and must be the line's exact first bytes, so
    the checksummed bytes are the same ones ``check_chain`` would take.
    """
    n = len(raw_lines)
    if not n:
        return None
    try:
        lines = _batch_decoder.decode(b"[" + b",".join(raw_lines) + b"]")
    except msgspec.DecodeError:
        return None
    if len(lines) != n:
        return None
    seqs = list(map(_seq_of, lines))
    first = state.seq + 1
    if seqs != list(range(first, first + n)):
        return None
    prevs = list(map(_prev_of, lines))
    sums = list(map(_sum_of, lines))
    if prevs[0] != state.prev or prevs[1:] != sums[:-1]:
        return None
    prev_bytes = list(map(_encode_str, prevs))
    sum_bytes = list(map(_encode_str, sums))
    heads = list(
        map(
            b'{"seq":%d,"prev":"%s","sum":"%s","event":'.__mod__,
            zip(seqs, prev_bytes, sum_bytes, strict=True),
        )
    )
    if not all(map(bytes.startswith, raw_lines, heads)) or not all(
        map(bytes.endswith, raw_lines, repeat(b"}"))
    ):
        return None
    bodies = map(operator.getitem, raw_lines, map(slice, map(len, heads), repeat(-1)))
    inputs = map(b"%s:%d:%s".__mod__, zip(prev_bytes, seqs, bodies, strict=True))
    computed = map(binascii.hexlify, map(_first_half, map(_digest, map(hashlib.sha256, inputs))))
    if list(computed) != sum_bytes:
        return None
    return DecodedLines(None, seqs, list(map(_event_of, lines)), []), ChainState(sums[-1], seqs[-1])


def check_chain(
    raw_lines: Sequence[bytes],
    state: ChainState,
) -> tuple[list[tuple[int, str, str]], ChainState]:
    """The lines (without newlines) whose checksum or link to the line before fails.

    Returns (index, kind, detail) for each damaged line and the chain's state after the last
    line. As in ``check_stream``, the chain goes on from a damaged line's own sum, so one edited
    line is reported once (and a removed line once, at the line after it).
    """
    damaged: list[tuple[int, str, str]] = []
    prev, expected = state
    match_head = _HEAD.match
    for i, raw in enumerate(raw_lines):
        expected += 1
        match = match_head(raw)
        if not match or not raw.endswith(b"}"):
            damaged.append((i, "unreadable", "not a journal line"))
            prev = ""
            continue
        seq, line_prev, total = (
            int(match.group(1)),
            match.group(2).decode(),
            match.group(3).decode(),
        )
        if _checksum(line_prev, seq, raw[match.end() : -1]) != total:
            damaged.append((i, "bad checksum", "the line's bytes were changed"))
        elif line_prev != prev:
            damaged.append((i, "broken chain", "prev does not match the line before"))
        elif seq != expected:
            damaged.append((i, "sequence gap", f"seq {seq}, expected {expected}"))
        prev, expected = total, seq
    return damaged, ChainState(prev, expected)


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
    for number, (_, _, raw) in enumerate(split_lines(data), start=1):
        match = _HEAD.match(raw)
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
        if _checksum(line_prev, seq, body) != total:
            problems.append(
                StreamProblem(name, number, "bad checksum", "the line's bytes were changed")
            )
        try:
            events.append((number, _decoder.decode(raw).event))
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
    return StreamCheck(problems, events, sums)


def _tail_problem(name: str, number: int, tail: bytes, prev: str, seq: int) -> StreamProblem:
    """A torn tail is a prefix of the line the writer was writing; anything else was edited."""
    head = b'{"seq":%d,"prev":"%s","sum":"' % (seq, prev.encode())
    consistent = head.startswith(tail) if len(tail) <= len(head) else tail.startswith(head)
    if consistent and len(tail) > len(head):
        # A whole checksummed line plus one more byte: its newline was replaced.
        whole = tail[:-1]
        match = _HEAD.match(whole)
        if (
            match
            and whole.endswith(b"}")
            and _checksum(prev, seq, whole[match.end() : -1]) == match.group(3).decode()
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
