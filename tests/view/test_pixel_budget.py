"""Issue 25: an image over the pixel budget (50 M pixels) is measured from its header and never
decoded: the viewer's thumbnails, crop boxes and zoom refuse it (413, one line), ``report --gif``
draws a grey frame that says why, ``compact`` keeps it as it is, and the SFT export leaves its
step out and counts it. One store, a session whose second screenshot is a 34 kB PNG of
8000x7000 pixels (168 MB once decoded)."""

from __future__ import annotations

import io
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest
from PIL import Image

from ownloop.replay.fold import fold
from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.store.images import PIXEL_BUDGET, over_budget
from ownloop.transfer.sft import SftCounts, sft_records
from ownloop.view.server import ViewServer
from tests.store.conftest import at

_OWNLOOP = str(Path(sys.executable).with_name("ownloop"))
_OVER = "8000x7000 pixels, over the 50 M pixel budget"


def _png(size: tuple[int, int], mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, size).save(out, format="PNG")
    return out.getvalue()


class Bombed(NamedTuple):
    store: Store
    small: str
    bomb: str


@pytest.fixture(scope="module")
def bombed(tmp_path_factory: pytest.TempPathFactory) -> Bombed:
    store = open_store(tmp_path_factory.mktemp("bomb") / "store", fsync=False)
    small = store.put_blob(_png((64, 40)))
    bomb = store.put_blob(_png((8000, 7000), "1"))
    events: list[E.Event] = [
        E.RunStarted(at=at(0), run_id="r1", agent="uitars", model="m"),
        E.SessionStarted(
            at=at(1),
            run_id="r1",
            session_id="s1",
            agent="uitars",
            task=E.Task(task_id="t1", prompt="do it", start_url="http://x/"),
        ),
    ]
    for step, sha in ((1, small), (2, bomb)):
        ids = {"run_id": "r1", "session_id": "s1", "step": step}
        events += [
            E.ScreenshotTaken(at=at(step), sha256=sha, width=64, height=40, **ids),
            E.ModelCalled(
                at=at(step + 0.1),
                call_id=f"c{step}",
                messages=(
                    E.Message(role="user", parts=(E.TextPart(text="go"), E.ImagePart(sha256=sha))),
                ),
                response=f"click {step}",
                **ids,
            ),
            E.ActionParsed(
                at=at(step + 0.2),
                call_id=f"c{step}",
                parser="test",
                actions=(E.Click(x=1.0, y=2.0),),
                **ids,
            ),
        ]
    events.append(E.SessionEnded(at=at(9), run_id="r1", session_id="s1", status="finished"))
    with store.stream("s1") as writer:
        writer.append(events)
    store.sync()
    return Bombed(store, small, bomb)


def test_the_budget_is_read_from_the_header() -> None:
    assert PIXEL_BUDGET == 50_000_000
    assert over_budget(_png((8000, 7000), "1")) == _OVER
    assert over_budget(_png((7071, 7071), "1")) is None  # 49,999,041 pixels
    assert over_budget(b"not an image") is None


@pytest.mark.parametrize(
    "path", ["/thumb/{}?w=160", "/thumb/{}?w=160&crop=1", "/box/{}", "/blob/{}"]
)
def test_the_viewer_refuses_to_decode_or_serve_it(bombed: Bombed, path: str) -> None:
    with ViewServer(bombed.store) as served:
        url = served.rstrip("/")
        with urllib.request.urlopen(url + path.format(bombed.small), timeout=30) as ok:
            assert ok.status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url + path.format(bombed.bomb), timeout=30)
    assert refused.value.code == 413
    with refused.value as response:  # an HTTPError holds its response's socket
        assert _OVER in response.read().decode()


def _run(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_OWNLOOP, "--store", str(store.root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_gif_draws_a_frame_that_says_why(bombed: Bombed, tmp_path: Path) -> None:
    done = _run(bombed.store, "report", "s1", "--gif", str(tmp_path / "s1.gif"))
    assert done.returncode == 0, done.stderr
    with Image.open(tmp_path / "s1.gif") as gif:
        gif.seek(1)
        frame = gif.convert("RGB")
    assert frame.size[0] <= 1280 and frame.getpixel((5, 5)) == (90, 90, 90)  # the grey frame


def test_compact_keeps_it_as_it_is(bombed: Bombed) -> None:
    done = _run(bombed.store, "compact")
    assert done.returncode == 0, done.stderr
    assert "1 over the 50 M pixel budget; blobs" in done.stdout
    assert bombed.store.blobs.path(bombed.bomb).exists()


def test_the_sft_export_leaves_its_step_out(bombed: Bombed) -> None:
    session = fold(bombed.store.session_events("s1"))
    counts = SftCounts()
    records = list(sft_records(session, "chat", lambda part: "x.png", counts, bombed.store.blobs))
    assert [r["step"] for r in records] == [1]
    assert counts.lines()[1] == (
        "1 steps left out: an image of theirs is over the 50 M pixel budget (first: s1 step 2)"
    )
