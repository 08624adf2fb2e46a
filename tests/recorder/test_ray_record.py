"""``ownloop record --executor ray`` on a real two-node Ray cluster (head + worker node on
127.0.0.1, inside a network namespace): MiniWoB tasks with the scripted expert over HTTP, each
task one counted session, rewards as under threads, a resume with nothing to do; two drivers on
one run id over a pool of two endpoints; desktops as the actors' pool (``--desktop URL`` twice:
one actor per desktop, each task recorded once on its own desktop, the sessions on both nodes);
a worker node killed mid-run; Ctrl-C on a driver."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ownloop.modelserver.endpoint import make_server
from ownloop.store import open_store
from tests.desktop.fixtures import DESKTOP_SIZE
from tests.recorder.ray_cluster import (
    RayCluster,
    held_server,
    ran_in_netns,
    ray_env,
    reexec_module_in_netns,
    wait_for,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Two tasks: one for each node's actor (each node has one CPU), which a gate on the model's
# answers holds until both have theirs in flight.
TASKS = "click-button,click-link"
N = len(TASKS.split(","))


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[RayCluster | dict[str, str]]:
    """Inside the namespace: one two-node cluster for every test, in file order, since the last
    one kills the worker node (it starts in the background: ``wait_up()`` before using it).
    Outside: the outcomes of the one run inside."""
    outcomes = reexec_module_in_netns(request)
    if outcomes is not None:
        yield outcomes
        return
    with RayCluster() as running:
        yield running


def _record(
    store: Path, url: str, run: str, *extra: str, lease: str = "5", suite: str = f"miniwob:{TASKS}"
) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "ownloop",
        "--store",
        str(store),
        "record",
        "uitars",
        "--model",
        "m",
        "--endpoint",
        url,
        "--run",
        run,
        "--suite",
        suite,
        "--settle",
        "0",
        *extra,
    ]
    return subprocess.Popen(
        command,
        env={**ray_env(), "OWNLOOP_CLAIM_LEASE": lease},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _finish(process: subprocess.Popen[str], timeout: float = 240) -> str:
    out, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, out
    return out


def _counted(store: Path, run: str) -> dict[str, tuple[Any, ...]]:
    rows = (
        open_store(store)
        .sql(
            "select task_id, count(*) filter (where counted), "
            "max(score) filter (where counted), max(status) filter (where counted) "
            "from sessions where run_id = $run group by task_id",
            {"run": run},
        )
        .rows
    )
    return {row[0]: tuple(row[1:]) for row in rows}


def _holders(store: Path, run: str) -> list[str]:
    return [
        row[0]
        for row in open_store(store)
        .sql("select holder from task_claimed where run_id = $run", {"run": run})
        .rows
    ]


def test_two_nodes_record_each_task_once_with_the_rewards_of_threads_two_drivers_too(
    tmp_path: Path, request: pytest.FixtureRequest, cluster: RayCluster | dict[str, str]
) -> None:
    if ran_in_netns(request, cluster):
        return
    assert isinstance(cluster, RayCluster)
    server, gate = held_server()
    with (
        server as held,
        make_server("miniwob", "uitars") as url,
        make_server("miniwob", "uitars") as url2,
    ):
        # the run under threads needs no cluster: it runs while the cluster starts
        under_threads = _record(tmp_path, url, "threads", "--workers", "2")
        cluster.wait_up()
        driver = _record(
            tmp_path,
            held,
            "ray",
            "--executor",
            "ray",
            "--ray-address",
            cluster.address,
            "--workers",
            "2",
        )
        # no answer until each actor (one a node) has a session in flight: the head node's
        # must not finish every task before the worker node's has started
        wait_for(
            "a session in flight on each node",
            lambda: len(_open_sessions(tmp_path, "ray")) == N or driver.poll() is not None,
        )
        gate.release()
        ray = _finish(driver)
        # the same progress lines as threads: one per task
        assert ray.count(" finished steps=") == N, ray
        # and the steps of the sessions in flight, from the actors' answers to a long poll
        assert "  at: " in ray and " step 1" in ray, ray
        nodes = {cluster.node_of(int(holder.split(":")[1])) for holder in _holders(tmp_path, "ray")}
        threads = _finish(under_threads)
        # a resume with nothing to do (it needs no cluster), alongside the two drivers below
        resume = _record(tmp_path, url, "ray", "--executor", "ray", "--ray-address", "127.0.0.1:1")
        # a double submit: two drivers on one run id at once, each with a pool of two endpoints,
        # two repeats of each task
        command = (
            "--executor",
            "ray",
            "--ray-address",
            cluster.address,
            "--workers",
            "1",
            "--endpoint",
            url2,
            "--repeat",
            "2",
        )
        first = _record(tmp_path, url, "twice", *command)
        second = _record(tmp_path, url, "twice", *command)
        again = _finish(resume)
        outs = [_finish(first), _finish(second)]
    assert f"run ray: {N} finished" in ray, ray
    by_threads, by_ray = _counted(tmp_path, "threads"), _counted(tmp_path, "ray")
    assert len(by_ray) == N and all(n == 1 for n, _, _ in by_ray.values()), by_ray
    assert by_ray == by_threads, threads
    for step in (["seal", "--run", "ray"], ["verify", "--run", "ray"]):
        sealed = subprocess.run(
            [sys.executable, "-m", "ownloop", "--store", str(tmp_path), *step],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    assert nodes == {"head", "worker"}, nodes  # the actors ran on both nodes
    assert "nothing to do" in again and f"{N} tasks were done already" in again, again
    units = (
        open_store(tmp_path)
        .sql(
            "select task_id, repeat, count(*), count(*) filter (where counted) from sessions "
            "where run_id = 'twice' group by all order by all"
        )
        .rows
    )
    # every (task, repeat) ran once and counts: the claims kept the drivers apart
    assert [(n, c) for _, _, n, c in units] == [(1, 1)] * 2 * N, (units, outs)
    assert {repeat for _, repeat, _, _ in units} == {1, 2}
    served = (
        open_store(tmp_path)
        .sql("select distinct endpoint from session_started where run_id = 'twice'")
        .rows
    )
    assert sorted(served) == sorted([(url,), (url2,)]), served


# The desktop world on Ray: two serve-desktop desktops in the namespace, one actor each.
SUITE = Path(__file__).parents[1] / "desktop" / "osworld"
# What each task leaves in its desktop's HOME (a reset wipes HOME before every task).
LEFT = {"term-create-file": "greeting.txt", "term-git-name": ".gitconfig"}


def _suite(root: Path) -> Path:
    """The two terminal tasks of the test suite, as an OSWorld folder of their own."""
    (root / "examples" / "os").mkdir(parents=True)
    for task in LEFT:
        shutil.copy(SUITE / "examples" / "os" / f"{task}.json", root / "examples" / "os")
    (root / "test_all.json").write_text(json.dumps({"os": list(LEFT)}))
    return root


@pytest.mark.desktop
def test_each_desktop_is_one_actors_and_each_task_is_recorded_once_on_one(
    tmp_path: Path, request: pytest.FixtureRequest, cluster: RayCluster | dict[str, str]
) -> None:
    if ran_in_netns(request, cluster):
        return
    assert isinstance(cluster, RayCluster)
    from ownloop.desktopserver import Desktop, DesktopServer
    from ownloop.modelserver import ModelServer
    from ownloop.modelserver.desktop_expert import DesktopExpert

    suite, store = _suite(tmp_path / "suite"), tmp_path / "store"
    one, two = DesktopServer(Desktop(DESKTOP_SIZE)), DesktopServer(Desktop(DESKTOP_SIZE))
    with one, two, ModelServer(DesktopExpert("uitars")) as model:
        cluster.wait_up()
        command = [sys.executable, "-m", "ownloop", "--store", str(store), "record", "uitars"]
        command += ["--suite", f"osworld:{suite}", "--endpoint", model, "--model", "m"]
        command += ["--desktop", one.url, "--desktop", two.url, "--reset", "server"]
        command += ["--settle", "0.3", "--max-steps", "8", "--run", "ray"]
        command += ["--executor", "ray", "--ray-address", cluster.address]
        command += ["-o", "max_tokens=900"]  # a given option wins over the desktop's defaults
        done = subprocess.run(command, env=ray_env(), capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        homes = [sorted(p.name for p in server.desktop.home.iterdir()) for server in (one, two)]
    rows = (
        open_store(store)
        .sql("select task_id, status, passed, counted from sessions order by task_id")
        .rows
    )
    assert rows == [(task, "finished", True, True) for task in sorted(LEFT)], done.stdout
    # Each desktop ran one task (the other's reset would have wiped the first one's file).
    left = [{name for name in home if name in LEFT.values()} for home in homes]
    assert sorted(map(sorted, left)) == [[".gitconfig"], ["greeting.txt"]], homes
    holders = open_store(store).sql("select holder from task_claimed").rows
    nodes = {cluster.node_of(int(str(row[0]).split(":")[1])) for row in holders}
    assert nodes == {"head", "worker"}, holders
    # The actors' agent runs OSWorld's loop settings, but for the option given.
    sampling = "select distinct max_tokens, frequency_penalty from model_calls where attempt = 1"
    assert open_store(store).sql(sampling).rows == [(900, 1.0)]


def _events(store: Path) -> list[dict[str, Any]]:
    events = []
    for path in (store / "journal").glob("*.jsonl"):
        for line in path.read_bytes().split(b"\n"):
            try:
                events.append(json.loads(line)["event"])
            except ValueError:
                continue  # a torn tail
    return events


def _open_sessions(store: Path, run: str) -> list[str]:
    """The run's sessions that started and have not ended."""
    events = _events(store)
    ended = {e["session_id"] for e in events if e["kind"] == "session_ended"}
    return [
        e["session_id"]
        for e in events
        if e["kind"] == "session_started" and e["run_id"] == run and e["session_id"] not in ended
    ]


def _in_flight_on_worker(store: Path, cluster: RayCluster) -> str | None:
    """A session claimed by an actor of the worker node, started and not ended."""
    on_worker = cluster.worker_node_pids()
    events = _events(store)
    ended = {e["session_id"] for e in events if e["kind"] == "session_ended"}
    started = {e["session_id"] for e in events if e["kind"] == "session_started"}
    for event in events:
        if event["kind"] == "task_claimed" and event["session_id"] in started - ended:
            if int(event["holder"].split(":")[1]) in on_worker:
                return str(event["session_id"])
    return None


def test_a_killed_worker_node_loses_one_session_the_run_completes_and_ctrl_c_stops(
    tmp_path: Path, request: pytest.FixtureRequest, cluster: RayCluster | dict[str, str]
) -> None:
    """Last in the module: it kills the cluster's worker node."""
    if ran_in_netns(request, cluster):
        return
    assert isinstance(cluster, RayCluster)
    cluster.wait_up()
    # no answer until the kill: the head node's actor must not finish every task before the
    # worker node's actor (a second Python, Ray worker and Chromium) has started one
    server, gate = held_server()
    with server as held:
        driver = _record(
            tmp_path,
            held,
            "k",
            "--executor",
            "ray",
            "--ray-address",
            cluster.address,
            "--workers",
            "2",
        )
        lost = wait_for(
            "session on the worker node",
            lambda: (
                _in_flight_on_worker(tmp_path, cluster)
                or driver.poll() is not None
                and "driver ended"
            ),
        )
        assert lost != "driver ended", driver.communicate()[0]
        assert cluster.kill_worker_node() > 0
        gate.release()
        out = _finish(driver)

    # --error-retries (on the head node alone): a parse_error is handed out again
    with make_server("miniwob", "uitars", "garbage:4") as garbled:
        _finish(
            _record(
                tmp_path,
                garbled,
                "retry",
                "--executor",
                "ray",
                "--ray-address",
                cluster.address,
                "--workers",
                "1",
                "--error-retries",
                "1",
                suite="miniwob:click-button",
            )
        )

    # Ctrl-C on a driver: its session ends interrupted (slow answers: the stop lands first)
    with make_server("miniwob", "uitars", "slow=2") as url:
        stopping = _record(
            tmp_path,
            url,
            "stop",
            "--executor",
            "ray",
            "--ray-address",
            cluster.address,
            "--workers",
            "1",
        )
        wait_for("a session in flight", lambda: _open_sessions(tmp_path, "stop"))
        os.kill(stopping.pid, signal.SIGINT)
        stopped, _ = stopping.communicate(timeout=120)
    assert stopping.returncode == 130, stopped
    statuses = [
        row[0]
        for row in open_store(tmp_path)
        .sql("select status from sessions where run_id = 'stop'")
        .rows
    ]
    assert "interrupted" in statuses and None not in statuses, (statuses, stopped)
    assert open_store(tmp_path).sql(
        "select attempt, status, counted from sessions where run_id = 'retry' order by attempt"
    ).rows == [(1, "parse_error", False), (2, "finished", True)]
    store = open_store(tmp_path)
    assert store.sql("select status from sessions where session_id = $s", {"s": lost}).rows == [
        ("crashed",)
    ], out
    task = store.sql("select task_id from sessions where session_id = $s", {"s": lost}).rows[0][0]
    rows = store.sql(
        "select status, counted from sessions where task_id = $t and run_id = 'k' order by attempt",
        {"t": task},
    ).rows
    assert rows == [("crashed", None), ("finished", True)], rows
    counted = _counted(tmp_path, "k")
    assert len(counted) == N and all(n == 1 for n, _, _ in counted.values()), counted
    assert "1 sessions left by a stopped recorder marked crashed" in out, out
    # the dead actor was asked for again; with the worker node gone it found no free CPU, and
    # the run neither waited for it nor hung on closing it. Under load the cluster may place the
    # replacement on the killed node before it is marked dead (missed heartbeats): that one dies
    # too, and is asked for once more (at most once per worker in all)
    lost_workers = re.search(r"(\d+) Ray workers lost \(a node or its process died\)", out)
    assert lost_workers and 1 <= int(lost_workers[1]) <= 2, out
    verify = subprocess.run(
        [sys.executable, "-m", "ownloop", "--store", str(tmp_path), "verify"],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
