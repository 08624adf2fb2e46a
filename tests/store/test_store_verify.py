"""``verify``: every edited byte of a journal line or a blob is found; a torn tail is a warning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ownloop.store import Store
from ownloop.store import events as E
from tests.store.conftest import at


def lines(store: Store) -> list[str]:
    return [p.line() for p in store.verify().problems]


def flip(path: Path, offset: int) -> None:
    """Change one byte of ``path`` to another printable byte (so JSON may still parse)."""
    data = bytearray(path.read_bytes())
    data[offset] = ord("7") if data[offset] != ord("7") else ord("8")
    path.write_bytes(bytes(data))


@pytest.fixture
def recorded(store: Store, record_session: Callable[..., str]) -> Path:
    record_session("a", steps=2)
    return store.journal_dir / "a.jsonl"


def test_a_clean_store_has_no_problems(store: Store, recorded: Path) -> None:
    report = store.verify()
    assert report.problems == []
    assert report.summary() == "verify: 2 streams, 14 events, 1 blobs: 0 errors, 0 warnings"
    assert report.exit_code(strict=True) == 0


def test_every_edited_byte_of_a_journal_line_is_found(store: Store, recorded: Path) -> None:
    size = len(recorded.read_bytes())
    original = recorded.read_bytes()
    for offset in range(0, size - 1, 7):  # every 7th byte, the last line included
        if original[offset] == ord("\n"):
            continue
        flip(recorded, offset)
        report = store.verify()
        assert report.errors >= 1, f"byte {offset} edited, not found"
        assert report.exit_code() == 1
        recorded.write_bytes(original)


@pytest.mark.parametrize("where", ["first", "last"])
def test_an_edited_line_is_named_with_its_line_number(
    store: Store, recorded: Path, where: str
) -> None:
    data = recorded.read_bytes()
    number = 1 if where == "first" else data.count(b"\n")
    start = 0 if where == "first" else data.rindex(b"\n", 0, len(data) - 1) + 1
    flip(recorded, data.index(b'"run_id":"r1"', start) + len('"run_id":"r'))
    assert lines(store) == [
        f"error: journal/{recorded.name}:{number}: bad checksum: the line's bytes were changed",
        f"warning: journal/{recorded.name}:{number}: missing run: names run r7, whose RunStarted "
        "is in no stream (its run stream was removed, or these events were written without one)",
    ]


def test_a_replaced_last_newline_is_tampering_not_a_torn_tail(store: Store, recorded: Path) -> None:
    data = recorded.read_bytes()
    recorded.write_bytes(data[:-1] + b" ")
    [line] = lines(store)
    assert line.startswith(f"error: journal/{recorded.name}:13: tampered tail: ")


def test_a_deleted_line_breaks_the_chain(store: Store, recorded: Path) -> None:
    kept = recorded.read_bytes().splitlines(keepends=True)
    recorded.write_bytes(b"".join(kept[:3] + kept[4:]))
    assert lines(store) == [
        f"error: journal/{recorded.name}:4: broken chain: prev does not match the line before",
        f"error: journal/{recorded.name}:4: sequence gap: seq 5, expected 4",
    ]


@pytest.mark.parametrize("kept", [1, 30, 80, -1])
def test_a_torn_tail_is_a_warning(store: Store, recorded: Path, kept: int) -> None:
    data = recorded.read_bytes()
    last = data.rindex(b"\n", 0, len(data) - 1) + 1
    # A writer killed while writing its 13th line: only the start of that line reached the disk
    # (-1: all of it but the newline).
    tail = data[last:-1] if kept == -1 else data[last : last + kept]
    recorded.write_bytes(data[:last] + tail)
    report = store.verify()
    assert [p.line() for p in report.problems] == [
        f"warning: journal/{recorded.name}:13: torn tail: {len(tail)} bytes without a newline "
        "(a writer stopped mid-write); readers skip them"
    ]
    assert (report.exit_code(), report.exit_code(strict=True)) == (0, 1)
    assert store.sql("select count(*) from journal").rows == [(13,)]  # with the RunStarted


def test_a_tail_that_is_not_the_next_line_is_tampering(store: Store, recorded: Path) -> None:
    with open(recorded, "ab") as f:
        f.write(b'{"seq":99,"prev":"')
    [line] = lines(store)
    assert "tampered tail" in line


def test_an_edited_blob_byte_is_found(store: Store, recorded: Path) -> None:
    [sha] = list(store.blobs)
    flip(store.blobs.path(sha), 3)
    assert lines(store) == [
        f"error: blob {sha}: bad blob: bytes do not match the name "
        f"(referenced by journal/{recorded.name}:2)"
    ]


def test_a_missing_blob_is_found_wherever_it_is_referenced(store: Store) -> None:
    missing = ["a" * 64, "b" * 64, "c" * 64, "d" * 64]
    with store.stream("run") as stream:
        stream.append([E.RunStarted(at=at(0), run_id="r")])
    with store.stream("refs") as stream:
        stream.append(
            [
                E.ScreenshotTaken(at=at(0), run_id="r", session_id="s", step=1, sha256=missing[0]),
                E.ModelCalled(
                    at=at(1),
                    run_id="r",
                    session_id="s",
                    step=1,
                    call_id="c",
                    messages=(E.Message(role="user", parts=(E.ImagePart(sha256=missing[1]),)),),
                ),
                E.EvidenceCaptured(
                    at=at(2), run_id="r", session_id="s", name="dom", sha256=missing[2]
                ),
                E.BrowserActed(
                    at=at(3),
                    run_id="r",
                    session_id="s",
                    step=1,
                    idx=0,
                    op=E.MouseDown(),
                    download=missing[3],
                ),
            ]
        )
    assert lines(store) == [
        f"error: blob {sha}: missing blob: missing (referenced by journal/refs.jsonl:{n})"
        for n, sha in enumerate(missing, start=1)
    ]
    assert store.verify().exit_code() == 1
