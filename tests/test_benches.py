"""Every bench under ``bench/`` still runs: each in its ``--smoke`` mode (tiny sizes, figures that
mean nothing), as a user runs it, so a change to the code a bench drives fails here instead of
the next time someone measures. A new bench needs a ``--smoke`` flag to pass."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
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


def _param(name: str) -> object:
    marks = [pytest.mark.slow] + ([pytest.mark.browser] if name in IN_A_BROWSER else [])
    return pytest.param(name, marks=marks, id=name.removesuffix(".py"))


def test_every_bench_is_run_here() -> None:
    assert {"record_bench.py", "peers_bench.py", "ray_bench.py"} <= set(BENCHES)
    assert set(IN_A_BROWSER) | set(NEEDS) <= set(BENCHES)


@pytest.mark.parametrize("bench", [_param(name) for name in BENCHES])
def test_the_bench_runs_in_its_smoke_mode(bench: str, tmp_path: Path) -> None:
    if bench in NEEDS:
        module, install = NEEDS[bench]
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{bench} measures {module}, which is not installed: {install}")
    if bench == "ray_bench.py" and (os.geteuid() != 0 or shutil.which("unshare") is None):
        pytest.skip(
            "ray_bench.py runs its cluster in a network namespace: it needs root and unshare"
        )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / bench), "--smoke"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"{bench} --smoke: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    assert done.stdout.strip(), f"{bench} --smoke printed nothing"
