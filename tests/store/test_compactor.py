"""The background compaction a recorder starts: a finished session's screenshots become lossless
WebP in a low-priority child process, the same pixels under the same names; a kill -9 mid-way
leaves a store that reads the same and that ``verify --full`` passes, and the next compaction
finishes it."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ownloop.cli import cli
from ownloop.errors import OwnloopError
from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.store.compactor import (
    QUIET,
    WINDOW_S,
    BackgroundCompaction,
    CompactionEnd,
    CpuPressure,
    pace,
    wait_seconds,
)
from ownloop.testing.processes import wait_ended
from tests.store.conftest import at
from tests.store.test_compact import _page, _pixels, _png


def _session(store: Store, session_id: str, pngs: list[bytes]) -> list[str]:
    """A session whose stream (named after it, as a recorder names it) took these screenshots
    and sent the last one to the model; returns their blob names."""
    shas = [store.put_blob(png) for png in pngs]
    events: list[E.Event] = [
        E.SessionStarted(
            at=at(0),
            run_id="r1",
            session_id=session_id,
            task=E.Task(task_id="t", prompt="p", start_url="http://x/"),
        )
    ]
    for step, sha in enumerate(shas, 1):
        events.append(
            E.ScreenshotTaken(
                at=at(step), run_id="r1", session_id=session_id, step=step, sha256=sha, width=320
            )
        )
    message = E.Message(role="user", parts=(E.ImagePart(sha256=shas[-1]),))
    events.append(
        E.ModelCalled(
            at=at(50), run_id="r1", session_id=session_id, step=1, call_id="c1", messages=(message,)
        )
    )
    events.append(
        E.SessionEnded(
            at=at(99), run_id="r1", session_id=session_id, status="finished", steps=len(shas)
        )
    )
    with store.stream(session_id) as stream:
        stream.append(events)
    return shas


def _pressure(path: Path, stalled_us: int = 0) -> Path:
    """A CPU pressure file as Linux writes it: ``stalled_us`` microseconds in which some task
    waited for a CPU so far. Read twice unchanged, it says the CPUs are free."""
    path.write_text(
        f"some avg10=0.00 avg60=0.00 avg300=0.00 total={stalled_us}\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    return path


def _verify_full(root: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", str(root), "verify", "--full"])
    return result.exit_code, result.output


def test_a_finished_sessions_screenshots_are_compacted_in_the_background(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    with store.stream() as stream:
        stream.append([E.RunStarted(at=at(0), run_id="r1", agent="uitars", model="m")])
    pngs = [_png(_page(n)) for n in range(3)]
    shas = _session(store, "s1", pngs)
    other = _session(store, "s2", [_png(_page(9))])  # not handed over: left as it is
    text = store.put_blob(b'{"not": "an image"}')

    compaction = BackgroundCompaction(store.root)
    compaction.add("s1")
    compaction.add("s1")  # once is enough
    end = compaction.finish(wait_s=120)

    assert (end.sessions, end.done, end.compacted, end.errors) == (1, True, 3, ())
    assert 0 < end.bytes_after < end.bytes_before
    assert end.summary().startswith("screenshots: 3 compacted to lossless WebP (pixel-identical)")
    for sha, png in zip(shas, pngs, strict=True):
        assert not store.blobs.path(sha).exists() and store.blobs.compacted_path(sha).exists()
        assert _pixels(store.get_blob(sha)) == _pixels(png)
    assert store.blobs.path(other[0]).exists()
    assert not store.blobs.compacted_path(other[0]).exists()
    assert store.get_blob(text) == b'{"not": "an image"}'
    code, output = _verify_full(store.root)
    assert code == 0 and "0 errors" in output, output


def test_a_session_without_a_stream_is_named_and_the_others_still_compacted(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    shas = _session(store, "s1", [_png(_page(1))])

    compaction = BackgroundCompaction(store.root)
    compaction.add("gone")
    compaction.add("s1")
    end = compaction.finish(wait_s=120)

    assert (end.done, end.compacted) == (True, 1)
    assert len(end.errors) == 1 and end.errors[0].startswith("gone: no stream 'gone'")
    assert store.blobs.compacted_path(shas[0]).exists()


def test_a_kill_9_mid_background_compaction_loses_nothing(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    with store.stream() as stream:
        stream.append([E.RunStarted(at=at(0), run_id="r1", agent="uitars", model="m")])
    pngs = [_png(_page(n, size=(640, 400))) for n in range(40)]
    shas = _session(store, "s1", pngs)
    # The CPUs free: it compacts while the run goes (its stdin open), and is killed mid-way.
    compaction = BackgroundCompaction(store.root, pressure=_pressure(tmp_path / "pressure"))
    compaction.add("s1")
    deadline = time.monotonic() + 120
    while not any(store.blobs.root.rglob("*.webp")) and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = compaction.pid  # the compactor's own process (it says so first)
    assert pid is not None

    os.kill(pid, signal.SIGKILL)
    end = compaction.finish(wait_s=60)  # its stdout ends with it

    assert end.done
    compacted = sum(store.blobs.compacted_path(sha).exists() for sha in shas)
    assert 0 < compacted < len(shas), "the kill came before the first or after the last blob"
    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]
    code, output = _verify_full(store.root)
    assert code == 0 and "0 errors" in output, output

    again = BackgroundCompaction(store.root)  # the next one finishes what the kill left
    again.add("s1")
    assert again.finish(wait_s=120).done
    assert not any(store.blobs.path(sha).exists() for sha in shas)
    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]
    code, output = _verify_full(store.root)
    assert code == 0 and "0 errors" in output, output


def test_nothing_handed_over_starts_nothing(tmp_path: Path) -> None:
    end = BackgroundCompaction(tmp_path).finish(wait_s=5)

    assert (end.sessions, end.done, end.pid, end.summary()) == (0, True, None, "")


def test_a_run_that_does_not_wait_hands_the_compaction_off(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    pngs = [_png(_page(n, size=(640, 400))) for n in range(12)]
    shas = _session(store, "s1", pngs)
    # No pressure figures: every blob waits for the run's end, then goes on alone.
    compaction = BackgroundCompaction(store.root, wait_s=0.0, pressure=tmp_path / "none")
    compaction.add("s1")

    end = compaction.finish()

    assert end.sessions == 1
    if not end.done:  # (it may have finished already)
        assert end.pid is not None
        assert end.summary() == (
            "screenshots: being compacted to lossless WebP (pixel-identical) in the background; "
            f"1 of 1 sessions go on after this run (pid {end.pid}, lowest priority); if it is "
            "stopped, ownloop compact finishes it"
        )
        assert wait_ended(end.pid, 600)
    assert not any(store.blobs.path(sha).exists() for sha in shas)  # it finished alone
    assert [_pixels(store.get_blob(sha)) for sha in shas] == [_pixels(p) for p in pngs]


def test_the_wait_is_read_from_the_environment_with_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OWNLOOP_COMPACT_WAIT", "2.5")
    assert wait_seconds() == 2.5
    monkeypatch.setenv("OWNLOOP_COMPACT_WAIT", "soon")
    with pytest.raises(OwnloopError) as raised:
        wait_seconds()
    assert str(raised.value) == (
        "$OWNLOOP_COMPACT_WAIT is 'soon': give seconds, e.g. OWNLOOP_COMPACT_WAIT=30"
    )


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class _Ended(threading.Event):
    """The run's end, set after ``runs_for`` waits of ``pace``'s; a wait moves ``clock`` on
    instead of waiting."""

    def __init__(self, runs_for: int, clock: _Clock) -> None:
        super().__init__()
        self.waits: list[float | None] = []
        self.runs_for, self.clock = runs_for, clock

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        self.clock.now += timeout or 0.0
        if len(self.waits) >= self.runs_for:
            self.set()
        return self.is_set()


def test_the_cpu_pressure_is_the_share_of_the_time_some_task_waited(tmp_path: Path) -> None:
    path, clock = _pressure(tmp_path / "pressure", 1_000_000), _Clock()
    pressure = CpuPressure(path, clock)

    assert pressure.available
    assert pressure.share() is None  # nothing to compare with yet
    clock.now += 0.25
    _pressure(path, 1_050_000)  # 50 ms of waits in 250 ms
    assert pressure.share() == pytest.approx(0.2)
    clock.now += 0.1
    assert pressure.share() == 0.0
    clock.now += 60  # too long ago to say how it is now
    assert pressure.share() is None
    path.unlink()
    assert pressure.share() is None and not pressure.available
    assert not CpuPressure(tmp_path / "none").available


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "full avg10=0.00 total=5\n", "some avg10=0.00\n", "some total=-3\n", "some\n"],
)
def test_a_pressure_file_without_a_some_total_is_no_figure(tmp_path: Path, text: str) -> None:
    path = tmp_path / "pressure"
    path.write_text(text)
    assert not CpuPressure(path).available
    path.write_text("\nfull total=9\nsome avg10=0.00 avg60=0.00 total=42\n")
    assert CpuPressure(path).available


def test_while_the_run_goes_a_blob_waits_until_the_cpus_are_free(tmp_path: Path) -> None:
    path, clock = _pressure(tmp_path / "pressure"), _Clock()

    free = _Ended(99, clock)
    pace(CpuPressure(path, clock), free)
    assert free.waits == [WINDOW_S] and not free.is_set()  # one look, then on

    class Busy(CpuPressure):  # some task waits for a CPU half the time
        def share(self) -> float | None:
            return 10 * QUIET

    busy = _Ended(5, clock)
    pace(Busy(path, clock), busy)
    assert busy.waits == [WINDOW_S] * 5 and busy.is_set()  # it went on only at the run's end

    blind = _Ended(99, clock)  # no pressure figures: the run's end, whenever it comes
    pace(CpuPressure(tmp_path / "none", clock), blind)
    assert blind.waits == [None]

    ended = _Ended(99, clock)
    ended.set()  # once the run has ended: at once
    pace(Busy(path, clock), ended)
    assert ended.waits == []


def test_the_closing_line_says_what_goes_on_after_the_run() -> None:
    going = CompactionEnd(6, False, 4711, 12, 600_000, 100_000, (), 0.5, 4)
    done = CompactionEnd(6, True, None, 18, 900_000, 150_000, (), 0.8, 6)

    assert going.summary() == (
        "screenshots: being compacted to lossless WebP (pixel-identical) in the background, "
        "12 so far (600.0 kB -> 100.0 kB); 2 of 6 sessions go on after this run (pid 4711, "
        "lowest priority); if it is stopped, ownloop compact finishes it"
    )
    assert done.summary() == (
        "screenshots: 18 compacted to lossless WebP (pixel-identical), 900.0 kB -> 150.0 kB"
    )
