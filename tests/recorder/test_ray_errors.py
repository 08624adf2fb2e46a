"""What ``--executor ray`` says when it cannot work: Ray not installed, a node that does not see
the store (no cluster needed: the actor's class is plain Python until Ray wraps it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.recorder.runner import RecordOptions
from ownloop.store import open_store
from ownloop.store.claims import Claims
from ownloop.world.suites import SuiteSource

_WITHOUT_RAY = (
    "import sys; sys.modules['ray'] = None; "  # import ray now raises ImportError
    "from ownloop.cli import main; sys.argv[0] = 'ownloop'; main()"
)


def test_without_the_extra_executor_ray_says_which_extra_to_install(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _WITHOUT_RAY,
            "--store",
            str(tmp_path),
            "record",
            "uitars",
            "--suite",
            "miniwob:click-button",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--executor",
            "ray",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error: --executor ray needs Ray. Install it with: pip install 'ownloop[ray]'"
    ), done.stderr
    assert not list((tmp_path / "journal").glob("*.jsonl"))  # refused before anything is written


def _actor(store: Path, run: str) -> object:
    pytest.importorskip("ray")
    from ownloop.recorder.ray_executor import _Actor

    options = RecordOptions(
        agent="uitars",
        endpoint="http://127.0.0.1:9/v1",
        model="m",
        suite_source=SuiteSource(suite="miniwob:click-button"),
    )
    return _Actor(str(store), run, options, lease_s=5.0)


def test_a_node_that_does_not_see_the_store_refuses_in_one_line(tmp_path: Path) -> None:
    # the driver declared the run in its store; this "node" has a store folder of its own
    Claims(open_store(tmp_path / "shared").root, "r", lease_s=5).admit(b"{}")
    elsewhere = tmp_path / "local"
    problem = _actor(elsewhere, "r").open()  # type: ignore[attr-defined]
    assert problem.startswith("node ") and problem.endswith(
        f"does not see the store at {elsewhere} (the run's claims are not there): put the "
        "store on a file system every node mounts, at the same path"
    ), problem
    assert not elsewhere.exists()  # nothing was made there
