"""``ownloop record --executor ray`` on a real two-node Ray cluster (head + worker node on
127.0.0.1, inside a network namespace): MiniWoB tasks with the scripted expert over HTTP, each
task one counted session, rewards as under threads; a worker node killed mid-run; two drivers
on one run id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store
from tests.recorder.ray_cluster import RayCluster, ray_env, reexec_in_netns, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TASKS = "click-button,click-link,focus-text,click-checkboxes"


def _record(store: Path, url: str, run: str, *extra: str, lease: str = "5"
            ) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "ownloop", "--store", str(store), "record", "uitars",
               "--model", "m", "--endpoint", url, "--run", run, "--suite", f"miniwob:{TASKS}",
               "--settle", "0", *extra]
    return subprocess.Popen(command, env={**ray_env(), "OWNLOOP_CLAIM_LEASE": lease},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _finish(process: subprocess.Popen[str], timeout: float = 240) -> str:
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out
    return out


def _counted(store: Path, run: str) -> dict[str, tuple[Any, ...]]:
    rows = open_store(store).sql(
        "select task_id, count(*) filter (where counted), "
        "max(score) filter (where counted), max(status) filter (where counted) "
        "from sessions where run_id = $run group by task_id", {"run": run}).rows
    return {row[0]: tuple(row[1:]) for row in rows}


def _holders(store: Path, run: str) -> list[str]:
    return [row[0] for row in open_store(store).sql(
        "select holder from task_claimed where run_id = $run", {"run": run}).rows]


def test_two_nodes_record_each_task_once_with_the_rewards_of_threads(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if reexec_in_netns(request):
        return
    with make_server("miniwob", "uitars") as url, RayCluster() as cluster:
        threads = _finish(_record(tmp_path, url, "threads", "--workers", "2"))
        ray = _finish(_record(tmp_path, url, "ray", "--executor", "ray", "--ray-address",
                              cluster.address, "--workers", "2"))
        # the same progress lines as threads: one per task
        assert ray.count(" finished steps=") == 4, ray
        nodes = {cluster.node_of(int(holder.split(":")[1]))
                 for holder in _holders(tmp_path, "ray")}
        again = _finish(_record(tmp_path, url, "ray", "--executor", "ray", "--ray-address",
                                "127.0.0.1:1"))
    assert "run ray: 4 finished" in ray, ray
    by_threads, by_ray = _counted(tmp_path, "threads"), _counted(tmp_path, "ray")
    assert len(by_ray) == 4 and all(n == 1 for n, _, _ in by_ray.values()), by_ray
    assert by_ray == by_threads, threads
    assert nodes == {"head", "worker"}, nodes  # the actors ran on both nodes
    assert "nothing to do" in again and "4 tasks were done already" in again, again


def _in_flight_on_worker(store: Path, cluster: RayCluster) -> str | None:
    """A session claimed by an actor of the worker node, started and not ended."""
    on_worker = cluster.worker_node_pids()
    events = []
    for path in (store / "journal").glob("*.jsonl"):
        for line in path.read_bytes().split(b"\n"):
            try:
                events.append(json.loads(line)["event"])
            except ValueError:
                continue
    ended = {e["session_id"] for e in events if e["kind"] == "session_ended"}
    started = {e["session_id"] for e in events if e["kind"] == "session_started"}
    for event in events:
        if event["kind"] == "task_claimed" and event["session_id"] in started - ended:
            if int(event["holder"].split(":")[1]) in on_worker:
                return str(event["session_id"])
    return None


def test_a_killed_worker_node_loses_one_session_and_the_run_completes(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if reexec_in_netns(request):
        return
    with make_server("miniwob", "uitars", "slow=1") as url, RayCluster() as cluster:
        driver = _record(tmp_path, url, "k", "--executor", "ray", "--ray-address",
                         cluster.address, "--workers", "2")
        lost = wait_for("session on the worker node",
                        lambda: _in_flight_on_worker(tmp_path, cluster))
        assert cluster.kill_worker_node() > 0
        out = _finish(driver)
    store = open_store(tmp_path)
    assert store.sql("select status from sessions where session_id = $s",
                     {"s": lost}).rows == [("crashed",)], out
    task = store.sql("select task_id from sessions where session_id = $s", {"s": lost}).rows[0][0]
    rows = store.sql("select status, counted from sessions where task_id = $t and run_id = 'k' "
                     "order by attempt", {"t": task}).rows
    assert rows == [("crashed", None), ("finished", True)], rows
    counted = _counted(tmp_path, "k")
    assert len(counted) == 4 and all(n == 1 for n, _, _ in counted.values()), counted
    assert "1 sessions left by a stopped recorder marked crashed" in out, out
    verify = subprocess.run([sys.executable, "-m", "ownloop", "--store", str(tmp_path),
                             "verify"], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_two_drivers_on_one_run_record_each_task_once(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if reexec_in_netns(request):
        return
    with make_server("miniwob", "uitars", "slow=0.3") as url, RayCluster() as cluster:
        command = ("--executor", "ray", "--ray-address", cluster.address, "--workers", "1")
        first = _record(tmp_path, url, "twice", *command)
        second = _record(tmp_path, url, "twice", *command)
        outs = [_finish(first), _finish(second)]
    counted = _counted(tmp_path, "twice")
    assert len(counted) == 4 and all(n == 1 for n, _, _ in counted.values()), (counted, outs)
    sessions = open_store(tmp_path).sql(
        "select count(*) from sessions where run_id = 'twice'").rows[0][0]
    assert sessions == 4, outs  # no task ran twice: the claims kept the drivers apart


def test_ctrl_c_on_the_driver_ends_the_sessions_in_flight_interrupted(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if reexec_in_netns(request):
        return
    with make_server("miniwob", "uitars", "slow=2") as url, RayCluster() as cluster:
        driver = _record(tmp_path, url, "stop", "--executor", "ray", "--ray-address",
                         cluster.address, "--workers", "2")
        wait_for("two sessions in flight", lambda: len(list(
            (tmp_path / "journal").glob("*.jsonl"))) >= 4)
        os.kill(driver.pid, signal.SIGINT)
        out, _ = driver.communicate(timeout=120)
    assert driver.returncode == 130, out
    store = open_store(tmp_path)
    statuses = [row[0] for row in store.sql(
        "select status from sessions where run_id = 'stop'").rows]
    assert "interrupted" in statuses and None not in statuses, (statuses, out)
