"""The ingest's fast path agrees with the line-by-line check and decode it stands in for.

``journal.decode_intact`` must return exactly what ``check_chain`` + ``decode_lines`` give when
they find nothing wrong, and must refuse (None) whenever either of them would: then the index
takes the line-by-line path, which quarantines and skips. Lines come from the golden journal
(bytes an older ownloop wrote, every event kind) and from a store written now.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.store import Store, pipeline
from ownloop.store.journal import ChainState, check_chain, decode_intact, decode_lines

START = ChainState()
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "journal-v1.jsonl"


def golden_lines() -> list[bytes]:
    return GOLDEN.read_bytes().split(b"\n")[:-1]


def summed(seq: bytes, prev: str, event: bytes) -> bytes:
    """A line whose checksum is right for ``event`` (as ``check_chain`` computes it)."""
    total = hashlib.sha256(f"{prev}:{int(seq)}:".encode() + event).hexdigest()[:32]
    return b'{"seq":%s,"prev":"%s","sum":"%s","event":%s}' % (
        seq,
        prev.encode(),
        total.encode(),
        event,
    )


def rechained(lines: list[bytes], start: int) -> list[bytes]:
    """``lines`` with every line from ``start`` on summed again, linked to the one before."""
    out = lines[:start]
    for line in lines[start:]:
        head, event = head_and_event(line)
        before, _ = head_and_event(out[-1])
        out.append(summed(str(head["seq"]).encode(), str(before["sum"]), event))
    return out


def head_and_event(line: bytes) -> tuple[dict[str, object], bytes]:
    start = line.index(b'"event":') + len(b'"event":')
    return json.loads(line[:start] + b"0}"), line[start:-1]


def agree(lines: list[bytes], state: ChainState = START) -> bool:
    """Check that the fast path agrees with the slow one; True when it took the lines."""
    damaged, chain = check_chain(lines, state)
    decoded = decode_lines(lines)
    fast = decode_intact(lines, state)
    if damaged or decoded.errors or not lines:
        assert fast is None
        return False
    assert fast is not None
    got, got_chain = fast
    assert got_chain == chain
    assert got.positions is None and got.errors == []
    assert got.seqs == decoded.seqs
    assert got.events == decoded.events
    return True


def test_intact_lines_of_every_kind_are_taken_whole_and_from_any_line_on() -> None:
    lines = golden_lines()
    assert len(lines) > 20
    assert agree(lines)
    for cut in (1, 7, len(lines) - 1):
        _, state = check_chain(lines[:cut], ChainState())
        assert agree(lines[cut:], state)


def test_lines_written_now_are_taken(store: Store, record_session: Callable[..., str]) -> None:
    record_session("s1", steps=3)
    for path in sorted(store.journal_dir.glob("*.jsonl")):
        assert agree(path.read_bytes().split(b"\n")[:-1])


def mutations(lines: list[bytes]) -> dict[str, list[bytes]]:
    """Damaged or odd copies of ``lines`` (each differs at line 5)."""
    i = 5
    head, event = head_and_event(lines[i])
    seq, prev = str(head["seq"]).encode(), str(head["prev"])
    out = {
        "edited byte": [
            *lines[:i],
            lines[i].replace(b'"run_id":"', b'"run_id":"X'),
            *lines[i + 1 :],
        ],
        "removed line": lines[:i] + lines[i + 1 :],
        "swapped lines": [*lines[:i], lines[i + 1], lines[i], *lines[i + 2 :]],
        "space after the event": [*lines[:i], lines[i] + b" ", *lines[i + 1 :]],
        "space in the head": [*lines[:i], lines[i].replace(b'"seq":', b'"seq": '), *lines[i + 1 :]],
        "leading zero in seq": [*lines[:i], summed(b"0" + seq, prev, event), *lines[i + 1 :]],
        "upper-case sum": [
            *lines[:i],
            lines[i].replace(
                b'"sum":"' + str(head["sum"]).encode(),
                b'"sum":"' + str(head["sum"]).upper().encode(),
            ),
            *lines[i + 1 :],
        ],
        "escaped prev": [
            *lines[:i],
            lines[i].replace(
                b'"prev":"' + prev[:1].encode(), b'"prev":"\\u00' + prev[:1].encode().hex().encode()
            ),
            *lines[i + 1 :],
        ],
        # Summed and linked: intact, but it does not decode (skipped, not quarantined).
        "a kind this ownloop cannot decode": rechained(
            [
                *lines[:i],
                summed(seq, prev, b'{"kind":"from_the_future","at":"2026-01-01T00:00:00Z"}'),
                *lines[i + 1 :],
            ],
            i + 1,
        ),
        "not json": [*lines[:i], lines[i][:-1], *lines[i + 1 :]],
        "seq repeated": [
            *lines[:i],
            summed(str(int(seq) - 1).encode(), prev, event),
            *lines[i + 1 :],
        ],
    }
    # Keys of the event reordered and the line summed again: odd, but intact and decodable.
    reordered = json.dumps(dict(reversed(json.loads(event).items())), separators=(",", ":"))
    out["event keys reordered"] = rechained(
        [*lines[:i], summed(seq, prev, reordered.encode()), *lines[i + 1 :]], i + 1
    )
    return out


@pytest.mark.parametrize("name", sorted(mutations(golden_lines())))
def test_a_damaged_or_odd_line_is_left_to_the_line_by_line_path(name: str) -> None:
    lines = mutations(golden_lines())[name]
    taken = agree(lines)
    if name == "event keys reordered":
        # Its checksum covers the bytes as they are: intact, and decoded the same either way.
        assert taken
    elif name != "removed line":
        assert not taken
    # Every suffix from the changed line on (the chain carried over) agrees too.
    _, state = check_chain(lines[:5], ChainState())
    agree(lines[5:], state)


def test_a_removed_line_is_not_taken() -> None:
    lines = mutations(golden_lines())["removed line"]
    assert not agree(lines)


@pytest.mark.slow
def test_many_small_batches_give_the_same_index(
    store: Store, monkeypatch: pytest.MonkeyPatch, record_session: Callable[..., str]
) -> None:
    # Batches are written on a thread while the next is decoded: cut the journal into many
    # batches and every table holds the same rows as with one batch. The journal has every
    # event kind (the golden stream), a line of a kind this ownloop cannot decode (skipped)
    # and an edited line (quarantined).
    for n in range(6):
        record_session(f"s{n}", steps=4)
    lines = golden_lines()
    (store.journal_dir / "golden.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    odd = mutations(lines)
    (store.journal_dir / "foreign.jsonl").write_bytes(
        b"\n".join(odd["a kind this ownloop cannot decode"]) + b"\n"
    )
    (store.journal_dir / "edited.jsonl").write_bytes(b"\n".join(odd["edited byte"]) + b"\n")
    result = store.rebuild_index()
    assert (result.skipped, result.damaged) == (1, 1)
    whole = _every_row(store)
    assert len(whole["journal"]) == result.events > 3 * len(lines)
    monkeypatch.setattr(pipeline, "_BATCH", 2000)
    assert store.rebuild_index() == result
    assert _every_row(store) == whole


def _every_row(store: Store) -> dict[str, list[tuple[object, ...]]]:
    names = [
        name
        for (name,) in store.sql(
            "select table_name from information_schema.tables where table_schema = 'main' "
            "order by table_name"
        ).rows
    ]
    return {
        name: sorted(store.sql(f'select * from main."{name}"').rows, key=repr) for name in names
    }
