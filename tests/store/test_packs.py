"""Blob packs: a recorder's blobs appended to one file while it records, read by every reader as
the blobs they are, and written out as files (screenshots as their WebP) once nobody writes
the pack; a torn last record is dropped, a kill -9 mid-way loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.store import MissingBlob, Store, open_store
from ownloop.store import events as E
from ownloop.store.compact import compact_blobs, unpack
from ownloop.store.compactor import BackgroundCompaction
from ownloop.store.packs import records
from tests.store.conftest import at
from tests.store.test_compact import _page, _pixels, _png
from tests.store.test_compactor import _pressure, _session


def _packing(root: Path, *, fsync: bool = False) -> Store:
    store = open_store(root, fsync=fsync)
    assert store.blobs.start_packing()
    return store


def _pack(store: Store) -> Path:
    (pack,) = store.blobs.packs.iterdir()
    return pack


def _verify(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", str(root), "verify", *args])
    return result.exit_code, result.output


def test_packed_blobs_are_their_exact_bytes_to_every_reader(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store", fsync=True)  # (ext4 here: as a recorder packs)
    png, text = _png(_page(1)), b'{"a": "dom snapshot"}'
    sha, other = store.put_blob(png), store.put_blob(text)
    assert store.put_blob(png) == sha  # once: a name the pack holds is not written again

    pack = _pack(store)
    assert not [p for p in store.blobs.root.iterdir() if p.name != "packs"]  # no file a blob
    fd = os.open(pack, os.O_RDONLY)
    try:
        assert [r.sha256 for r in records(fd).records] == [sha, other]
    finally:
        os.close(fd)
    reader = open_store(store.root)  # another process's view: it looks in the packs
    for blobs in (store.blobs, reader.blobs):
        assert blobs.get(sha) == png and blobs.get_stored(other) == text
        assert blobs.exists(sha) and blobs.has_exact(sha)
        assert blobs.check(sha) is None and blobs.check(other) is None
        assert list(blobs) == sorted([sha, other])
    assert reader.blobs.check("0" * 64) == "missing"
    # Added after the reader first looked: it looks again.
    late = store.put_blob(b"later")
    assert reader.get_blob(late) == b"later"


def test_a_torn_last_record_is_no_blob_and_unpacking_drops_it(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store")
    kept, torn = store.put_blob(b"kept" * 100), store.put_blob(b"torn" * 100)
    pack = _pack(store)
    store.blobs.close_pack()
    os.truncate(pack, pack.stat().st_size - 10)  # a crash mid-append

    reader = open_store(store.root, fsync=False)
    assert reader.get_blob(kept) == b"kept" * 100
    with pytest.raises(MissingBlob):
        reader.get_blob(torn)
    assert reader.blobs.check(torn) == "missing"

    report = unpack(reader.blobs)
    assert report.unpacked == 1 and not pack.exists()
    assert reader.blobs.path(kept).read_bytes() == b"kept" * 100
    assert not reader.blobs.exists(torn)


def test_a_record_whose_bytes_changed_is_not_read(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store")
    sha = store.put_blob(b"x" * 1000)
    pack = _pack(store)
    store.blobs.close_pack()
    data = bytearray(pack.read_bytes())
    data[-1] ^= 1
    pack.write_bytes(bytes(data))

    reader = open_store(store.root, fsync=False)
    with pytest.raises(MissingBlob):
        reader.get_blob(sha)
    assert reader.blobs.check(sha) == "missing"


def test_bytes_that_are_no_record_keep_the_pack_as_it_is(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store")
    sha = store.put_blob(b"first")
    pack = _pack(store)
    store.blobs.close_pack()
    with pack.open("ab") as out:
        out.write(b"garbage that is no record header at all, longer than one")

    report = unpack(open_store(store.root, fsync=False).blobs)

    assert report.unpacked == 0 and report.damaged_packs == (pack.name,) and pack.exists()
    assert store.blobs.path(sha).read_bytes() == b"first"  # what it held is out all the same
    for args in ([], ["--full"]):  # named by the incremental check and the full one
        code, output = _verify(store.root, *args)
        assert code == 1, output
        assert f"error: blobs/packs/{pack.name}: damaged pack: the bytes from offset " in output


def test_a_pack_its_writer_still_holds_is_not_unpacked(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store")
    sha = store.put_blob(_png(_page(2)))
    pack = _pack(store)

    busy = compact_blobs(open_store(store.root, fsync=False).blobs)
    assert (busy.unpacked, busy.busy_packs) == (0, 1)
    assert ", 1 packs left to the runs still writing them;" in busy.summary()
    assert pack.exists() and not store.blobs.path(sha).exists()

    assert store.blobs.close_pack() == pack
    store.put_blob(b"after the pack: a file")  # later puts write files
    assert unpack(store.blobs).unpacked == 1 and not pack.exists()


def test_unpacking_writes_screenshots_as_webp_and_the_rest_as_they_are(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store")
    pngs = [_png(_page(n)) for n in range(3)]
    shas = _session(store, "s1", pngs)
    text = store.put_blob(b'{"not": "an image"}')
    store.blobs.close_pack()

    report = unpack(store.blobs)

    assert (report.unpacked, report.compacted) == (1, 3)
    assert 0 < report.bytes_after < report.bytes_before
    for sha, png in zip(shas, pngs, strict=True):
        assert store.blobs.compacted_path(sha).exists() and not store.blobs.path(sha).exists()
        assert _pixels(store.get_blob(sha)) == _pixels(png)
    assert store.blobs.path(text).read_bytes() == b'{"not": "an image"}'
    assert not list(store.blobs.packs.iterdir())
    code, output = _verify(store.root)
    assert code == 0 and "0 errors" in output, output


def test_compact_with_keep_png_writes_the_exact_pngs_out(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store")
    png = _png(_page(4))
    sha = store.put_blob(png)
    store.blobs.close_pack()

    report = compact_blobs(store.blobs, keep_png=True)

    assert report.unpacked == 1 and not list(store.blobs.packs.iterdir())
    assert store.blobs.path(sha).read_bytes() == png  # its exact bytes, its WebP beside them
    assert store.blobs.compacted_path(sha).exists()
    assert "1 packs written out" in report.summary()


def test_verify_finds_packed_blobs_as_a_run_goes_and_after(tmp_path: Path) -> None:
    # The check (incremental: ownloop verify) remembers what it found: a packed blob has no
    # file to stat, so it is read again each time, and found as a file once it is one.
    store = _packing(tmp_path / "store")
    _session(store, "s1", [_png(_page(5))])
    for _ in range(2):
        code, output = _verify(store.root)
        assert code == 0 and "0 errors" in output, output
    _session(store, "s2", [_png(_page(6)), _png(_page(7))])
    code, output = _verify(store.root)
    assert code == 0 and "0 errors" in output, output
    store.blobs.close_pack()
    unpack(store.blobs)
    for args in ([], ["--full"]):
        code, output = _verify(store.root, *args)
        assert code == 0 and "0 errors" in output, output
    # A blob named and in no pack and no file is still missing.
    with store.stream() as stream:
        stream.append(
            [
                E.ScreenshotTaken(
                    at=at(1), run_id="r1", session_id="s3", step=1, sha256="ab" * 32, width=1
                )
            ]
        )
    code, output = _verify(store.root)
    assert code != 0 and "missing" in output, output


def test_the_background_compaction_writes_the_run_s_pack_out(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store")
    with store.stream() as stream:
        stream.append([E.RunStarted(at=at(0), run_id="r1", agent="uitars", model="m")])
    pngs = [_png(_page(n)) for n in range(4)]
    first = _session(store, "s1", pngs[:2])
    compaction = BackgroundCompaction(store.root)
    compaction.add("s1")  # compacted from the pack while the run goes on
    second = _session(store, "s2", pngs[2:])  # ended, never handed over: the pack's end
    store.blobs.close_pack()  # the run's end, as record does before the compaction's

    end = compaction.finish(wait_s=120)

    assert end.done and end.errors == () and end.compacted == 4
    assert not list(store.blobs.packs.iterdir())
    for sha, png in zip(first + second, pngs, strict=True):
        assert store.blobs.compacted_path(sha).exists() and not store.blobs.path(sha).exists()
        assert _pixels(store.get_blob(sha)) == _pixels(png)
    code, output = _verify(store.root, "--full")
    assert code == 0 and "0 errors" in output, output


_UNPACK_KILLED = """\
import os, signal, sys
from ownloop.store import open_store
from ownloop.store.compact import unpack
done = 0
def pace():
    global done
    done += 1
    if done == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)
unpack(open_store(sys.argv[1]).blobs, pace=pace)
"""


def test_a_kill_9_mid_unpacking_loses_nothing(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store", fsync=True)
    pngs = [_png(_page(n)) for n in range(6)]
    shas = _session(store, "s1", pngs)
    pack = _pack(store)
    store.blobs.close_pack()

    killed = subprocess.run([sys.executable, "-c", _UNPACK_KILLED, str(store.root), "4"])

    assert killed.returncode == -signal.SIGKILL
    assert pack.exists()
    written = [sha for sha in shas if store.blobs.compacted_path(sha).exists()]
    assert len(written) == 3  # three written out, the fourth killed before it began
    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]
    code, output = _verify(store.root, "--full")
    assert code == 0 and "0 errors" in output, output

    report = unpack(open_store(store.root).blobs)  # the next one finishes it
    assert (report.unpacked, report.compacted) == (1, 3) and not pack.exists()
    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]
    code, output = _verify(store.root, "--full")
    assert code == 0 and "0 errors" in output, output


def test_a_stream_waits_for_the_blobs_it_may_name(tmp_path: Path) -> None:
    store = _packing(tmp_path / "store", fsync=True)
    pack = store.blobs._pack
    assert pack is not None
    store.put_blob(b"a screenshot" * 1000)
    assert pack._unsettled is not None  # its writing to the device started, not waited for
    with store.stream() as stream:
        stream.append([E.RunStarted(at=at(0), run_id="r1")])
    assert pack._unsettled is None  # waited for before the line was written


def test_a_full_pack_is_closed_and_written_out_as_the_run_goes(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    assert store.blobs.start_packing(limit=1)  # every record fills a pack
    pngs = [_png(_page(n)) for n in range(3)]
    shas = _session(store, "s1", pngs)
    running = store.put_blob(_png(_page(9)))  # a session still running took it
    packs = sorted(store.blobs.packs.iterdir())
    assert len(packs) == 4  # three closed, the last still held
    reader = open_store(store.root, fsync=False)
    assert [reader.get_blob(sha) for sha in shas] == pngs and store.get_blob(shas[0]) == pngs[0]

    compaction = BackgroundCompaction(store.root, pressure=_pressure(tmp_path / "pressure"))
    compaction.add("s1")  # the session's WebPs, then the closed packs written out
    deadline = time.monotonic() + 120
    while len(list(store.blobs.packs.iterdir())) > 1 and time.monotonic() < deadline:
        time.sleep(0.02)

    assert list(store.blobs.packs.iterdir()) == packs[-1:]  # the one still written stays
    for sha, png in zip(shas, pngs, strict=True):
        assert store.blobs.compacted_path(sha).exists() and not store.blobs.path(sha).exists()
        assert _pixels(store.get_blob(sha)) == _pixels(png)
    store.blobs.close_pack()
    assert compaction.finish(wait_s=120).done
    assert not list(store.blobs.packs.iterdir())
    assert _pixels(store.get_blob(running)) == _pixels(_png(_page(9)))
    code, output = _verify(store.root, "--full")
    assert code == 0 and "0 errors" in output, output


def test_unpacking_as_a_run_goes_keeps_the_exact_bytes_it_may_read_back(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    assert store.blobs.start_packing(limit=1)
    png = _png(_page(3))
    sha = store.put_blob(png)
    store.put_blob(b"the next record: a new pack")

    store.put_blob(b"and one more")
    (last,) = [p for p in store.blobs.packs.iterdir() if not p.name.endswith(".full.pack")]

    report = unpack(store.blobs, full_only=True)

    assert (report.unpacked, report.busy_packs, report.compacted) == (2, 0, 0)
    assert list(store.blobs.packs.iterdir()) == [last]  # the one still written
    assert store.blobs.path(sha).read_bytes() == png and store.get_blob(sha) == png
