"""A full disk for real (a small tmpfs): a failed append leaves nothing behind, and nothing
acknowledged is ever lost."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ownloop.store import open_store
from ownloop.store.disk import StoreNotWritable
from ownloop.store.events import EvidenceCaptured, SessionEnded
from ownloop.store.journal import read_lines, verify_stream
from tests.fullfs import fill, small_tmpfs

_AT = datetime(2026, 11, 30, tzinfo=UTC)


def _evidence(n: int, size: int) -> EvidenceCaptured:
    return EvidenceCaptured(
        at=_AT, run_id="r1", session_id="s1", name=f"piece-{n}", value_json='"' + "x" * size + '"'
    )


def test_enospc_cuts_the_stream_back_and_appends_again_once_space_is_freed(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "fs", size="512k") as fs:
        store = open_store(fs / "store")
        filler = fs / "filler"
        with store.stream("s1") as writer:
            acknowledged = []
            failures = 0
            # Batches of growing size: the one that fails is written in part before ENOSPC.
            for n in range(400):
                batch = [_evidence(n * 10 + i, 1000 + 997 * i) for i in range(4)]
                try:
                    writer.append(batch)
                except StoreNotWritable as exc:
                    failures += 1
                    assert str(exc) == (
                        f"the disk holding {writer.path} is full. Free some space, then run the "
                        "same command again (what is already recorded is kept)"
                    )
                    # The cut-back: the file holds exactly what was acknowledged.
                    assert writer.path.stat().st_size == sum(
                        line.end - line.offset for line in read_lines(writer.path)
                    )
                    assert [line.event for line in read_lines(writer.path)] == acknowledged
                    break
                acknowledged.extend(batch)
            assert failures == 1 and acknowledged
            fill(filler)  # whatever room was left is taken too
            with pytest.raises(StoreNotWritable):
                writer.append([_evidence(9999, 20_000)])
            filler.unlink()
            tail = SessionEnded(at=_AT, run_id="r1", session_id="s1", status="finished")
            writer.append([tail])
            acknowledged.append(tail)
        assert [line.event for line in read_lines(writer.path)] == acknowledged
        assert verify_stream(writer.path) == []
        assert store.verify().errors == 0  # (a warning: these events have no RunStarted)


def test_a_writer_that_never_appends_leaves_no_file(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    with store.stream("nothing") as writer:
        pass
    assert not writer.path.exists()


def test_a_second_writer_of_a_stream_is_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store")
    with store.stream("s1") as writer:
        writer.append([SessionEnded(at=_AT, run_id="r1", session_id="s1", status="finished")])
    with pytest.raises(FileExistsError):
        store.stream("s1")
    assert os.path.getsize(writer.path) > 0


def test_an_event_that_would_not_decode_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "store")
    with store.stream("s1") as writer:
        good = SessionEnded(at=_AT, run_id="r1", session_id="s1", status="finished")
        writer.append([good])
        with pytest.raises(ValueError, match="would not decode"):
            writer.append(
                [
                    SessionEnded(
                        at=_AT, run_id="r1", session_id="s1", status="finished", answer="\ud800"
                    )
                ]
            )
        writer.append([good])
    assert [line.event for line in read_lines(writer.path)] == [good, good]
    assert verify_stream(writer.path) == []
