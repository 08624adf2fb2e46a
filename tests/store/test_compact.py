"""``ownloop compact``: PNG blobs as lossless WebP, the same pixels under the same names, verify
still clean, readers (the viewer, replay's pixel diff) still served, and a kill leaves a store
that reads the same and finishes on the next run."""

from __future__ import annotations

import io
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image, ImageDraw

from ownloop.cli import cli
from ownloop.replay.fidelity import pixel_diff
from ownloop.replay.guard import perceptual_distance
from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.store.blobs import MissingBlob, decode_compacted, pixel_sha256
from ownloop.store.compact import compact_blobs
from ownloop.view.server import ViewServer
from tests.store.conftest import at


def _page(seed: int, mode: str = "RGB", size: tuple[int, int] = (320, 200)) -> Image.Image:
    """A small picture like a web page: boxes and text on a flat background."""
    rng = random.Random(seed)
    image = Image.new(mode, size, (250, 250, 250, 255)[: len(mode)])
    draw = ImageDraw.Draw(image)
    for _ in range(6):
        x, y = rng.randrange(0, size[0] - 60), rng.randrange(0, size[1] - 30)
        colour = tuple(rng.randrange(0, 256) for _ in mode)
        draw.rectangle((x, y, x + rng.randrange(10, 60), y + rng.randrange(8, 30)), fill=colour)
        draw.text(
            (x + 2, y + 2), f"item {seed}-{rng.randrange(1000)}", fill=(0, 0, 0, 255)[: len(mode)]
        )
    return image


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _pixels(data: bytes) -> tuple[str, tuple[int, int], bytes]:
    with Image.open(io.BytesIO(data)) as image:
        return image.mode, image.size, image.tobytes()


def _transparent() -> Image.Image:
    """RGBA with colour kept under fully transparent pixels (lossless must keep it too)."""
    image = _page(7, "RGBA")
    pixels = image.load()
    assert pixels is not None
    for x in range(0, 40):
        pixels[x, 5] = (x * 6, 200, 13, 0)
    return image


def _store_with_steps(root: Path, pngs: list[bytes]) -> tuple[Store, list[str]]:
    """A store whose one session took a screenshot per PNG."""
    store = open_store(root, fsync=False)
    shas = [store.put_blob(png) for png in pngs]
    events: list[E.Event] = [
        E.RunStarted(at=at(0), run_id="r1", agent="uitars", model="m"),
        E.SessionStarted(
            at=at(0),
            run_id="r1",
            session_id="s1",
            task=E.Task(task_id="t", prompt="p", start_url="http://x/"),
        ),
    ]
    for step, sha in enumerate(shas, 1):
        events.append(
            E.ScreenshotTaken(
                at=at(step), run_id="r1", session_id="s1", step=step, sha256=sha, width=320
            )
        )
    events.append(
        E.SessionEnded(at=at(99), run_id="r1", session_id="s1", status="finished", steps=len(shas))
    )
    with store.stream("w1") as stream:
        stream.append(events)
    return store, shas


def _cli(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", str(root), *args])
    return result.exit_code, result.output


def test_compaction_keeps_every_pixel_under_the_png_name(tmp_path: Path) -> None:
    images = [_page(1), _page(2, "RGBA"), _transparent()]
    pngs = [_png(image) for image in images]
    store, shas = _store_with_steps(tmp_path / "store", pngs)
    text = store.put_blob(b"<html>not an image</html>")
    palette = store.put_blob(_png(_page(3).convert("P")))
    names = sorted(store.blobs)

    report = compact_blobs(store.blobs)

    assert (report.compacted, report.kept) == (3, {"mode P": 1})
    assert report.bytes_after < report.bytes_before
    assert sorted(store.blobs) == names  # every name still listed
    for sha, png in zip(shas, pngs, strict=True):
        assert not store.blobs.path(sha).exists()  # the PNG is gone ...
        assert store.blobs.exists(sha)  # ... and its name resolves
        assert _pixels(store.get_blob(sha)) == _pixels(png)
        assert store.get_blob(sha).startswith(b"\x89PNG")  # readers still get a PNG
        stored = store.blobs.get_stored(sha)
        assert stored[:4] == b"RIFF" and stored[8:12] == b"WEBP"
        decoded, mark = decode_compacted(stored)  # in the PNG's mode (RGBA kept RGBA)
        assert (decoded.mode, decoded.size, decoded.tobytes()) == _pixels(png)
        assert mark == pixel_sha256(decoded)
        assert store.blobs.check(sha) is None
        # A replay's guard and fidelity compare the WebP as stored: the same as the PNG.
        other = pngs[0] if png is not pngs[0] else pngs[1]
        assert perceptual_distance(stored, other, (40, 30)) == perceptual_distance(
            png, other, (40, 30)
        )
        assert pixel_diff(stored, other) == pixel_diff(png, other)
    assert store.get_blob(text) == b"<html>not an image</html>"  # other blobs untouched
    assert store.blobs.path(palette).exists()


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    store, _ = _store_with_steps(tmp_path / "store", [_png(_page(n)) for n in range(4)])
    first = compact_blobs(store.blobs)
    files = sorted(p.name for p in store.blobs.root.rglob("*"))

    again = compact_blobs(store.blobs)

    assert (first.compacted, again.compacted, again.already) == (4, 0, 4)
    assert again.bytes_before == again.bytes_after == first.bytes_after
    assert sorted(p.name for p in store.blobs.root.rglob("*")) == files


def test_keep_png_keeps_the_exact_bytes_until_a_run_without_it(tmp_path: Path) -> None:
    pngs = [_png(_page(n)) for n in range(3)]
    store, shas = _store_with_steps(tmp_path / "store", pngs)

    kept = compact_blobs(store.blobs, keep_png=True)

    assert kept.compacted == 3
    assert [store.get_blob(sha) for sha in shas] == pngs  # byte for byte
    assert all(store.blobs.compacted_path(sha).exists() for sha in shas)
    dropped = compact_blobs(store.blobs)
    assert (dropped.compacted, dropped.already) == (0, 3)
    assert not any(store.blobs.path(sha).exists() for sha in shas)
    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]


def test_a_png_written_again_after_compaction_is_stored_exactly(tmp_path: Path) -> None:
    png = _png(_page(5))
    store, [sha] = _store_with_steps(tmp_path / "store", [png])
    compact_blobs(store.blobs)

    assert store.put_blob(png) == sha

    assert store.get_blob(sha) == png  # a new recording of the same page: its bytes back


def test_verify_passes_after_compact_and_catches_a_damaged_webp(tmp_path: Path) -> None:
    store, shas = _store_with_steps(tmp_path / "store", [_png(_page(n)) for n in range(3)])
    assert _cli(store.root, "verify")[0] == 0  # remembers the PNGs it hashed

    code, output = _cli(store.root, "compact")

    assert code == 0, output
    assert output.splitlines()[-1].startswith("compact: 3 PNG blobs re-encoded as lossless WebP")
    code, output = _cli(store.root, "verify")  # incremental: the names it knew still there
    assert code == 0 and "0 errors" in output, output
    code, output = _cli(store.root, "verify", "--full")
    assert code == 0 and "0 errors" in output, output
    webp = store.blobs.compacted_path(shas[1])
    image = Image.open(io.BytesIO(webp.read_bytes()))
    image.load()
    pixels = image.load()
    assert pixels is not None
    pixels[3, 3] = (1, 2, 3)  # other pixels, still a valid WebP with the same pixel mark
    out = io.BytesIO()
    image.save(out, format="WEBP", lossless=True, xmp=image.info["xmp"])
    webp.write_bytes(out.getvalue())
    code, output = _cli(store.root, "verify", "--full")
    assert code == 1
    assert f"blob {shas[1]}" in output and "pixels do not match" in output


def test_the_viewer_and_replays_pixel_diff_read_compacted_screenshots(tmp_path: Path) -> None:
    first, second = _page(1), _page(1)
    ImageDraw.Draw(second).rectangle((0, 0, 9, 9), fill=(255, 0, 0))  # 100 of 64,000 pixels
    store, shas = _store_with_steps(tmp_path / "store", [_png(first), _png(second)])
    compact_blobs(store.blobs)

    assert pixel_diff(store.get_blob(shas[0]), store.get_blob(shas[1])) == 100 / (320 * 200)
    with ViewServer(store) as url:
        with urllib.request.urlopen(f"{url}blob/{shas[0]}", timeout=10) as response:
            kind, body = response.headers["content-type"], response.read()
        with urllib.request.urlopen(f"{url}thumb/{shas[0]}?w=160", timeout=10) as response:
            thumb = response.read()
    assert kind == "image/webp"
    assert _pixels(body) == _pixels(_png(first))
    assert Image.open(io.BytesIO(thumb)).size[0] == 160


@pytest.mark.slow
def test_a_kill_mid_compaction_leaves_a_store_that_reads_the_same(tmp_path: Path) -> None:
    pngs = [_png(_page(n, size=(640, 400))) for n in range(40)]
    store, shas = _store_with_steps(tmp_path / "store", pngs)
    process = subprocess.Popen(
        [sys.executable, "-m", "ownloop", "--store", str(store.root), "compact"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not any(store.blobs.root.rglob("*.webp")) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    compacted = sum(store.blobs.compacted_path(sha).exists() for sha in shas)
    assert 0 < compacted < len(shas), "the kill came before the first or after the last blob"

    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]
    assert _cli(store.root, "verify", "--full")[0] == 0
    code, output = _cli(store.root, "compact")
    assert code == 0, output
    assert not any(store.blobs.path(sha).exists() for sha in shas)
    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]
    assert _cli(store.root, "verify", "--full")[0] == 0


def test_resuming_finishes_a_png_left_beside_its_webp(tmp_path: Path) -> None:
    """The state a kill between the WebP's rename and the PNG's removal leaves."""
    pngs = [_png(_page(n)) for n in range(2)]
    store, shas = _store_with_steps(tmp_path / "store", pngs)
    compact_blobs(store.blobs, keep_png=True)  # both files, as after such a kill

    report = compact_blobs(store.blobs)

    assert report.already == 2
    assert not any(store.blobs.path(sha).exists() for sha in shas)
    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]


def test_a_killed_runs_temporary_webp_is_swept_once_stale(tmp_path: Path) -> None:
    store, [sha] = _store_with_steps(tmp_path / "store", [_png(_page(1))])
    shard = store.blobs.path(sha).parent
    old, fresh = shard / f".{sha}.webp.0badf00d.tmp", shard / f".{sha}.webp.12345678.tmp"
    old.write_bytes(b"RIFF half a webp")
    fresh.write_bytes(b"RIFF another run writing")
    os.utime(old, (time.time() - 3600, time.time() - 3600))

    compact_blobs(store.blobs)

    assert not old.exists()
    assert fresh.exists()  # perhaps another compaction's, still being written


def test_a_damaged_webp_reads_as_a_one_line_error(tmp_path: Path) -> None:
    store, [sha] = _store_with_steps(tmp_path / "store", [_png(_page(1))])
    compact_blobs(store.blobs)
    store.blobs.compacted_path(sha).write_bytes(b"RIFF\x00\x00\x00\x00WEBPVP8L torn")

    with pytest.raises(MissingBlob) as raised:
        store.get_blob(sha)

    message = str(raised.value)
    assert message.startswith(f"blob {sha[:12]} in {store.blobs.root} is damaged (not a decodable")
    assert "\n" not in message
    assert message.endswith("). Check the store with: ownloop verify --full")


def test_index_drop_gives_its_bytes_back_and_the_next_query_builds_it_again(
    tmp_path: Path,
) -> None:
    store, _ = _store_with_steps(tmp_path / "store", [_png(_page(n)) for n in range(3)])
    asked = "select count(*) as n from screenshots"
    code, before = _cli(store.root, "sql", asked, "--format", "csv")
    assert code == 0 and store.index_path.exists()

    code, output = _cli(store.root, "index", "--drop")

    assert code == 0, output
    assert output.startswith("index: dropped (") and "the next query builds it" in output
    assert not store.index_path.exists()
    assert _cli(store.root, "sql", asked, "--format", "csv") == (0, before)
    assert _cli(store.root, "index", "--drop", "--rebuild")[0] == 2
