"""Every bench under ``bench/`` still runs: each in its ``--smoke`` mode (tiny sizes, figures that
mean nothing), as a user runs it, so a change to the code a bench drives fails here instead of
the next time someone measures. A new bench needs a ``--smoke`` flag to pass. The runs go a few
at a time (``AT_ONCE``), one test each, so a failure names its bench."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted(path.name for path in (ROOT / "bench").glob("*.py"))
# Benches that drive headless Chromium (their smoke runs take longer than a few seconds).
IN_A_BROWSER = {
    "browser_bench.py",
    "desktop_bench.py",
    "miniwob_shots.py",
    "ray_bench.py",
    "record_bench.py",
    "replay_bench.py",
    "retarget_bench.py",
    "serve_desktop_bench.py",
}
# Benches whose subject is an optional package: skipped, with the reason, when it is missing.
NEEDS = {
    "peers_bench.py": ("inspect_ai", "pip install -e '.[bench]'"),
    "ray_bench.py": ("ray", "pip install -e '.[ray]'"),
}
TIMEOUT_S = 900  # at load 30 on two cores, replay_bench's smoke run took over 300 s
# Smoke runs at once: much of each is process start, waits and I/O, so a few side by side take
# about the wall time of the longest, not the sum. The longest start first.
AT_ONCE = 3
LONGEST_FIRST = ("ray_bench.py", "replay_bench.py", "record_bench.py", "retarget_bench.py")


def _param(name: str) -> object:
    marks = [pytest.mark.slow] + ([pytest.mark.browser] if name in IN_A_BROWSER else [])
    return pytest.param(name, marks=marks, id=name.removesuffix(".py"))


def _skip_reason(bench: str) -> str | None:
    """Why ``bench`` cannot run on this machine (None: it can)."""
    if bench in NEEDS:
        module, install = NEEDS[bench]
        if importlib.util.find_spec(module) is None:
            return f"{bench} measures {module}, which is not installed: {install}"
    if bench == "ray_bench.py" and (os.geteuid() != 0 or shutil.which("unshare") is None):
        return "ray_bench.py runs its cluster in a network namespace: it needs root and unshare"
    return None


class _Runs:
    """The smoke runs of the selected benches, ``AT_ONCE`` at a time, each a user's process."""

    def __init__(self, benches: list[str], folder: Path) -> None:
        self._folder = folder
        self._children: list[subprocess.Popen[str]] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pool = ThreadPoolExecutor(AT_ONCE, thread_name_prefix="smoke")
        order = sorted(benches, key=lambda b: LONGEST_FIRST.index(b) if b in LONGEST_FIRST else 9)
        self.done = {bench: self._pool.submit(self._run, bench) for bench in order}

    def _run(self, bench: str) -> tuple[int, str, str]:
        cwd = self._folder / bench.removesuffix(".py")
        cwd.mkdir()
        with self._lock:
            if self._closed:
                raise RuntimeError("the module's tests ended first")
            child = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / bench), "--smoke"],
                cwd=cwd,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            self._children.append(child)
        try:
            out, err = child.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            err += f"\n(killed: still running after {TIMEOUT_S} s)"
        return child.returncode, out, err

    def close(self) -> None:
        """Starts no other run and ends those still running (only when tests were cut short)."""
        with self._lock:
            self._closed = True
            for child in self._children:
                if child.poll() is None:
                    child.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def smoke_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[tuple[int, str, str]]]]:
    """Every smoke run this session's tests ask for, started together on the first test's
    demand (``--dist loadfile`` keeps this module's tests on one worker)."""
    benches = [
        str(item.callspec.params["bench"])
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is sys.modules[__name__]
        and hasattr(item, "callspec")
    ]
    runs = _Runs([b for b in benches if _skip_reason(b) is None], tmp_path_factory.mktemp("smoke"))
    yield runs.done
    runs.close()


def test_every_bench_is_run_here() -> None:
    assert {"record_bench.py", "peers_bench.py", "ray_bench.py"} <= set(BENCHES)
    assert set(IN_A_BROWSER) | set(NEEDS) <= set(BENCHES)
    assert set(LONGEST_FIRST) <= set(BENCHES)


@pytest.mark.parametrize("bench", [_param(name) for name in BENCHES])
def test_the_bench_runs_in_its_smoke_mode(
    bench: str, smoke_runs: dict[str, Future[tuple[int, str, str]]]
) -> None:
    reason = _skip_reason(bench)
    if reason is not None:
        pytest.skip(reason)
    code, out, err = smoke_runs[bench].result()
    assert code == 0, f"{bench} --smoke: exit {code}\n{out[-3000:]}\n{err[-3000:]}"
    assert out.strip(), f"{bench} --smoke printed nothing"
