"""A journal line: its bytes, its checksum, and many lines decoded and chain-checked at once.

A line is, byte for byte::

    {"seq":N,"prev":"P","sum":"S","event":{...}}\\n

``sum`` is the first 32 hex digits of sha256(prev + ":" + seq + ":" + event bytes) and the next
line's ``prev``; the first line's ``prev`` is empty. Changing any byte of a line breaks its own
``sum`` or the next line's ``prev``, so ``verify`` finds it. A last line without its newline is a
torn tail (a writer died mid-write): readers skip it and ``verify`` names it as such.

These functions see lines as bytes, already cut at their newlines; the stream files (writing
them, reading them, a compact request's references) are ``journal.py``'s.
"""

from __future__ import annotations

import binascii
import hashlib
import operator
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import NamedTuple

import msgspec

from ownloop.store.events import Event

__all__ = [
    "LINE_HEAD",
    "ChainState",
    "DecodedLines",
    "Line",
    "check_chain",
    "checksum",
    "decode_events",
    "decode_intact",
    "decode_line",
    "decode_lines",
    "split_lines",
]

LINE_HEAD = re.compile(rb'^\{"seq":(\d+),"prev":"([0-9a-f]*)","sum":"([0-9a-f]{32})","event":')
"""A line's head, up to its event: groups seq, prev and sum."""


class Line(msgspec.Struct, frozen=True):
    """One line decoded, its request as written (compact or not)."""

    seq: int
    prev: str
    sum: str
    event: Event


decode_line = msgspec.json.Decoder(Line).decode
"""One line (without its newline) decoded; raises ``msgspec.DecodeError``."""
_batch_decoder = msgspec.json.Decoder(list[Line])


def checksum(prev: str, seq: int, event_bytes: bytes) -> str:
    h = hashlib.sha256()
    h.update(f"{prev}:{seq}:".encode())
    h.update(event_bytes)
    return h.hexdigest()[:32]


def split_lines(data: bytes, base: int = 0) -> Iterator[tuple[int, int, bytes]]:
    """Complete lines of ``data``: (offset, end, bytes without the newline); no torn tail."""
    start = 0
    while True:
        nl = data.find(b"\n", start)
        if nl < 0:
            return
        yield base + start, base + nl + 1, data[start:nl]
        start = nl + 1


def decode_events(raw_lines: Iterable[bytes]) -> list[Event]:
    """Decode many raw lines (without newlines) at once, as written (requests compact: see
    ``journal.decode_places`` for them in full)."""
    return [decode_line(raw).event for raw in raw_lines]


class DecodedLines(NamedTuple):
    """Many lines decoded at once, as columns."""

    positions: list[int] | None  # where each decoded line was in the input; None: all of them
    seqs: list[int]
    events: list[Event]
    errors: list[tuple[int, str]]  # (where, why) for each line that did not decode


_seq_of = operator.attrgetter("seq")
_event_of = operator.attrgetter("event")


def decode_lines(raw_lines: Sequence[bytes]) -> DecodedLines:
    """Decode many raw lines (without newlines) at once, as written (requests compact: see
    ``journal.decode_places`` for them in full).

    The lines are decoded as one JSON array (a single C call); only when that fails, or yields a
    different number of values, is each line decoded alone to find the bad ones.
    """
    lines: list[Line] | None = None
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
    good: list[Line] = []
    errors: list[tuple[int, str]] = []
    for i, raw in enumerate(raw_lines):
        try:
            good.append(decode_line(raw))
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
    match_head = LINE_HEAD.match
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
        if checksum(line_prev, seq, raw[match.end() : -1]) != total:
            damaged.append((i, "bad checksum", "the line's bytes were changed"))
        elif line_prev != prev:
            damaged.append((i, "broken chain", "prev does not match the line before"))
        elif seq != expected:
            damaged.append((i, "sequence gap", f"seq {seq}, expected {expected}"))
        prev, expected = total, seq
    return damaged, ChainState(prev, expected)
