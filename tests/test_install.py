"""A wheel built from the repository, installed without extras in a fresh venv: no Playwright, no
openai, no ui-tars, no miniwob; it reads a recorded store (sql, show, view, regrade, report,
export, import) and a command that needs the record extra says so in one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ownloop.modelserver.endpoint import make_server

ROOT = Path(__file__).resolve().parents[1]
RECORD_ONLY = ("playwright", "openai", "ui_tars", "miniwob", "selenium", "gymnasium", "numpy")


def _run(
    *args: str | Path,
    cwd: Path | None = None,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its core dependencies, as pip resolves them (~15 s CPU).

    Only the pip work this test needs: the wheel builds with the project venv's setuptools,
    checked against pyproject's build requirements (no build environment installed for it);
    the venv has no pip of its own (this process's pip installs into it with ``--python``) and
    nothing is byte-compiled ahead. pip runs without PYTHONPATH: a checkout on it, with the
    egg-info a build leaves there, would count as ownloop installed already."""
    where = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check")
    wheel_options = ("--no-deps", "--no-build-isolation", "--check-build-dependencies", "-q")
    built = _run(*pip, "wheel", *wheel_options, "-w", where / "wheel", ROOT, env=env)
    assert built.returncode == 0, built.stderr
    (wheel,) = (where / "wheel").glob("ownloop-*.whl")
    made = _run(sys.executable, "-m", "venv", "--without-pip", where / "venv")
    assert made.returncode == 0, made.stderr
    python = where / "venv" / "bin" / "python"
    installed = _run(*pip, "--python", python, "install", "-q", "--no-compile", wheel, env=env)
    assert installed.returncode == 0, installed.stderr
    return where / "venv"


@pytest.fixture
def recorded(uitars_store: Path) -> Path:
    """Two MiniWoB tasks recorded by uitars in run r1 (tests/conftest.py; the test copies it)."""
    return uitars_store


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.browser
def test_the_core_install_reads_a_recorded_store_without_the_record_extra(
    core: Path, recorded: Path, tmp_path: Path
) -> None:
    python, ownloop = core / "bin" / "python", core / "bin" / "ownloop"
    # Run away from the checkout, so that only the installed package can be imported.
    store = tmp_path / "store"
    shutil.copytree(recorded, store)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OWNLOOP_STORE")}
    env["OWNLOOP_STORE"] = str(store)

    def ok(*args: str) -> str:
        done = _run(ownloop, *args, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    where = _run(
        python,
        "-c",
        "import importlib.util, ownloop; print(ownloop.__file__); "
        f"print(*(importlib.util.find_spec(m) is None for m in {RECORD_ONLY!r}))",
        cwd=tmp_path,
        env=env,
    )
    assert where.returncode == 0, where.stderr
    assert str(core) in where.stdout.splitlines()[0]
    assert where.stdout.split()[1:] == ["True"] * len(RECORD_ONLY)

    rows = json.loads(
        ok("sql", "select task_id, status from sessions order by task_id", "--format", "json")
    )
    assert [r["status"] for r in rows] == ["finished", "finished"]
    shown = ok("show", "enter-text")
    assert "Outcome: finished" in shown and "pass 1.00  miniwob" in shown
    assert "flipped: 0" in ok("regrade", "--run", "r1")
    assert "wrote" in ok(
        "report", "enter-text", "--out", str(tmp_path / "r.html"), "--gif", str(tmp_path / "r.gif")
    )
    assert "2 task folders" in ok("export", "--run", "r1", "--out", str(tmp_path / "out"))
    assert "imported 2 sessions" in ok(
        "import", str(tmp_path / "out"), "--agent", "fara7b", "--run", "back"
    )

    port = _free_port()
    view = subprocess.Popen(
        [ownloop, "view", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        page = ""
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
                    page = reply.read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert "r1" in page
    finally:
        view.terminate()
        view.wait(timeout=10)

    with make_server("miniwob", "uitars") as url:  # a live endpoint: only the extra is missing
        record = _run(
            ownloop,
            "record",
            "uitars",
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            url,
            "--model",
            "expert",
            cwd=tmp_path,
            env=env,
        )
    assert record.returncode == 1
    assert re.fullmatch(
        r"Error: ownloop record needs the record extra \((playwright|openai|miniwob) is not "
        r"installed\): pip install 'ownloop\[record\]' \(from a clone: pip install "
        r"'\.\[record\]', or \./setup\.sh\)\n",
        record.stderr,
    ), record.stderr

    pandas = _run(
        python,
        "-c",
        "import ownloop; ownloop.open_store().sessions().to_pandas()",
        cwd=tmp_path,
        env=env,
    )
    assert pandas.returncode == 1
    assert pandas.stderr.splitlines()[-1] == (
        "ownloop.errors.OwnloopError: to_pandas() needs pandas, which ownloop does not "
        "install: pip install pandas (or use to_arrow() or to_dicts())"
    )
