"""``--endpoint`` given several times: sessions take the endpoints in turn, and one that fails is
taken out of the pool for a while, recorded as ``endpoint_benched``."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ownloop.modelserver.endpoint import make_server
from ownloop.recorder.endpoints import EndpointPool
from ownloop.store import open_store


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_sessions_take_the_endpoints_in_turn() -> None:
    pool = EndpointPool(["a", "b", "c", "a"])
    assert [pool.pick() for _ in range(7)] == ["a", "b", "c", "a", "b", "c", "a"]


def test_a_benched_endpoint_is_left_out_until_its_time_is_up() -> None:
    clock = _Clock()
    pool = EndpointPool(["a", "b"], bench_s=60, clock=clock)
    assert pool.bench("b") is True
    assert pool.bench("b") is False  # out already: nothing new to record
    assert [pool.pick() for _ in range(3)] == ["a", "a", "a"]
    assert pool.benched() == ["b"]
    clock.now = 60.0
    assert pool.benched() == [] and {pool.pick(), pool.pick()} == {"a", "b"}


def test_with_every_endpoint_out_the_one_back_first_is_used() -> None:
    clock = _Clock()
    pool = EndpointPool(["a", "b"], bench_s=60, clock=clock)
    pool.bench("a")
    clock.now = 10.0
    pool.bench("b")
    assert pool.pick() == "a"


def test_a_pool_of_one_never_benches_its_endpoint() -> None:
    pool = EndpointPool(["a"])
    assert pool.bench("a") is False and pool.pick() == "a"


def _dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there now


@pytest.mark.browser
@pytest.mark.slow
def test_a_failing_endpoint_is_taken_out_of_the_pool_and_recorded(tmp_path: Path) -> None:
    dead = _dead_url()
    with make_server("miniwob", "uitars") as url:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ownloop",
                "--store",
                str(tmp_path),
                "record",
                "uitars",
                "--model",
                "m",
                "--endpoint",
                url,
                "--endpoint",
                dead,
                "--run",
                "pool",
                "--suite",
                "miniwob:click-button,click-link,focus-text,click-checkboxes",
                "--workers",
                "1",
                "--settle",
                "0",
                "--retries",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 3, done.stdout + done.stderr  # a session ended endpoint_error
    assert f"notice: the endpoint {dead} refused the connection" in done.stderr, done.stderr
    store = open_store(tmp_path)
    rows = store.sql(
        "select s.endpoint, e.status from session_started s join session_ended e "
        "using (session_id) order by s.time"
    ).rows
    assert rows == [
        (url, "finished"),
        (dead, "endpoint_error"),
        (url, "finished"),
        (url, "finished"),
    ], rows
    assert store.sql("select endpoint, seconds from endpoint_benched").rows == [(dead, 60.0)]
    assert store.sql("select endpoint from runs where run_id = 'pool'").rows == [(f"{url} {dead}",)]


def test_a_pool_with_no_endpoint_that_answers_is_refused(tmp_path: Path) -> None:
    first, second = _dead_url(), _dead_url()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ownloop",
            "--store",
            str(tmp_path / "s"),
            "record",
            "uitars",
            "--model",
            "m",
            "--endpoint",
            first,
            "--endpoint",
            second,
            "--suite",
            "miniwob:click-button",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith(f"Error: the endpoint {first} refused the connection")
    assert not (tmp_path / "s").exists()
