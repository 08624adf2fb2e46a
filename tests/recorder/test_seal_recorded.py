"""A run recorded for real (Chromium, the MiniWoB expert over HTTP) seals, verifies against its
seal, and takes no more sessions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _ownloop(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_recorded_run_is_sealed_and_checked_against_its_seal(tmp_path: Path) -> None:
    with make_server("miniwob", "uitars", None) as url:
        record = [
            "record",
            "uitars",
            "--model",
            "m",
            "--endpoint",
            url,
            "--run",
            "paper",
            "--suite",
            "miniwob:click-button,focus-text",
            "--workers",
            "1",
            "--settle",
            "0",
        ]
        done = _ownloop(tmp_path, *record)
        assert done.returncode == 0, done.stdout + done.stderr
        sealed = _ownloop(tmp_path, "seal", "--run", "paper")
        assert sealed.returncode == 0, sealed.stdout + sealed.stderr
        assert sealed.stdout.startswith("sealed run paper: 2 sessions (2 counted), ")
        fingerprint = sealed.stdout.splitlines()[1].split()[1]
        again = _ownloop(tmp_path, *record)
    assert again.returncode == 1
    assert again.stderr.startswith(
        f"Error: run paper is sealed ({fingerprint[:16]}) and takes "
        "no more events: record into another run with --run NAME"
    )
    check = _ownloop(tmp_path, "verify", "--run", "paper", "--fingerprint", fingerprint)
    assert check.returncode == 0, check.stdout
    # The recorder cataloged each session's stream in the run's stream: deleting one is found
    # even without the seal, and against the seal.
    store = open_store(tmp_path)
    [session] = store.sql("select session_id from sessions where task_id like 'focus-text%'").rows
    (store.journal_dir / f"{session[0]}.jsonl").unlink()
    check = _ownloop(tmp_path, "verify", "--run", "paper")
    assert check.returncode == 1
    assert "missing stream" in check.stdout
