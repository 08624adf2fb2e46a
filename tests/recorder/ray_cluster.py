"""A real two-node Ray cluster on this machine, inside a fresh network and pid namespace.

Ray picks the machine's network address, and tests may only talk to loopback: in a new network
namespace the only interface is ``lo``, so Ray uses 127.0.0.1 by itself. A new pid namespace
(with its own /proc) means ``ray stop`` and the kernel's clean-up at the end touch only the
processes of this test, never another Ray on the machine.

A module's selected tests re-run together in there, in one pytest, on one cluster (starting
a namespace, a pytest and a two-node cluster costs ~20 s, so it is done once per module)::

    @pytest.fixture(scope="module")
    def cluster(request):
        outcomes = reexec_module_in_netns(request)
        if outcomes is not None:
            yield outcomes      # outside: every test already ran inside
            return
        with RayCluster() as cluster:   # starting in the background
            yield cluster

    def test_x(request, cluster):
        if ran_in_netns(request, cluster):
            return          # the body ran (and passed) inside the namespace
        ...                 # work that needs no cluster
        cluster.wait_up()
        ...
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ownloop.modelserver.chat import Reply, Responder
from ownloop.modelserver.endpoint import make_responder
from ownloop.modelserver.server import ModelServer

_INSIDE = "OWNLOOP_TEST_RAY_NETNS"
_BIN = Path(sys.executable).parent
PORT = 6379  # any port is free in a fresh network namespace

# A dead node is noticed in ~3 s instead of ~30 s (Ray's system config, read from the env).
_FAST_FAILURE = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    # Nothing here reads Ray's metrics: none are collected nor exported.
    "RAY_enable_metrics_collection": "0",
}


def ray_env() -> dict[str, str]:
    """The environment for ``ray`` commands and drivers in these tests."""
    return {**os.environ, **_FAST_FAILURE}


def reexec_module_in_netns(request: Any, timeout: float = 600) -> dict[str, str] | None:
    """Outside the namespace: run this module's selected tests, in their order, in one new
    namespace and return each one's outcome ("passed", "failed", ...) by node id, with the run's
    output under ``"output"``. Inside: bring loopback up and return None (go on with the tests)."""
    pytest.importorskip("ray")
    if os.environ.get(_INSIDE) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        return None
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs root, unshare and ip for a network namespace")
    root = Path(__file__).resolve().parents[2]
    selected = [item.nodeid for item in request.session.items if item.module is request.module]
    command = [
        "unshare",
        "--net",
        "--pid",
        "--fork",
        "--mount-proc",
        sys.executable,
        "-m",
        "pytest",
        *selected,
        "-q",
        "-rA",  # a PASSED/FAILED line per test, read below
        "-p",
        "no:cacheprovider",
        # One process inside: the module's tests share the namespace's one cluster, in order.
        *(["-n", "0"] if request.config.pluginmanager.hasplugin("xdist") else []),
    ]
    done = subprocess.run(
        command,
        cwd=root,
        env={**ray_env(), _INSIDE: "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    outcomes = {"output": done.stdout[-6000:] + done.stderr[-3000:]}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "SKIPPED") and rest.split(" ")[0] in selected:
            outcomes.setdefault(rest.split(" ")[0], word.lower())
    return outcomes


def ran_in_netns(request: Any, cluster: RayCluster | dict[str, str]) -> bool:
    """Outside the namespace: assert this test passed in the module's run and return True.
    Inside (``cluster`` is the running cluster): return False (go on with the body)."""
    if isinstance(cluster, RayCluster):
        return False
    outcome = cluster.get(request.node.nodeid, "not run")
    assert outcome == "passed", f"{outcome} in the namespace:\n{cluster['output']}"
    return True


class RayCluster:
    """``ray start --head`` and one worker node (``ray start --address``), 1 CPU each; started
    in the background by ``with``, ready after ``wait_up()``."""

    def __init__(self, cpus: int = 1) -> None:
        self.cpus = cpus
        self.dir = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: socket paths
        self.address = f"127.0.0.1:{PORT}"
        self._started = threading.Thread()
        self._failed: str | None = None

    def __enter__(self) -> RayCluster:
        """Start the two nodes in the background: ``wait_up()`` waits for them (~10-20 s), so a
        test can do work that needs no cluster meanwhile."""
        self._started = threading.Thread(target=self._start, name="ray-start", daemon=True)
        self._started.start()
        return self

    def wait_up(self) -> RayCluster:
        """The cluster once both nodes have started (raises if one did not)."""
        self._started.join()
        if self._failed is not None:
            raise AssertionError(self._failed)
        return self

    def _start(self) -> None:
        try:
            self._start_node("h", "--head", "--port", str(PORT), "--include-dashboard=false")
            self._start_node("w", "--address", self.address)
        except BaseException as exc:  # noqa: BLE001 - raised again by wait_up
            self._failed = f"{exc}"

    def _start_node(self, node: str, *args: str) -> None:
        """``ray start`` one node (temp dir ``self.dir / node``), once more if it failed.

        A raylet gives its dashboard agent (a Python process) 15 s to write each port it
        listens on, and aborts when one is late, as under a heavy load; its agents' ports are
        given here (each node its own: both share one network namespace), which leaves one
        wait of the three; it starts at a higher CPU priority (given back once it is up), and a
        node that still failed is killed and started again."""
        base = 52000 if node == "h" else 52010
        command = [
            "start",
            *args,
            "--temp-dir",
            str(self.dir / node),
            "--num-cpus",
            str(self.cpus),
            "--disable-usage-stats",
            # no log monitor: drivers here do not stream workers' logs (``log_to_driver=False``);
            # workers still write their log files (``node_of``)
            "--include-log-monitor=false",
            *(["--no-monitor"] if node == "h" else []),  # no autoscaler: two nodes for good
            "--dashboard-agent-grpc-port",
            str(base + 1),
            "--metrics-export-port",
            str(base + 2),
            "--runtime-env-agent-port",
            str(base + 3),
        ]
        try:
            self._ray(*command, boost=True)
        except AssertionError:
            for pid in self.node_pids(node):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            shutil.rmtree(self.dir / node, ignore_errors=True)
            self._ray(*command, boost=True)
        finally:
            # its actors, Playwright drivers and Chromiums get the usual priority
            for pid in self.node_pids(node):
                try:
                    os.setpriority(os.PRIO_PROCESS, pid, 0)
                except OSError:
                    pass

    def __exit__(self, *exc: object) -> None:
        self._started.join()
        if os.getpid() == 1:
            # The init of this pid namespace, where only this module's tests ran: every other
            # process in it is the cluster's (its daemons, their workers), SIGKILLed at once as
            # the kernel would at our exit. ``ray stop`` takes ~7 s to do the same. Each one
            # (orphans come to init) is reaped, so that its CPU time counts in this pytest's
            # children's, and so in the time of the run outside.
            _kill_and_reap_all()
        else:
            # SIGKILL, and no grace period: ray would wait out all of its 16 s for zombies
            subprocess.run(
                [str(_BIN / "ray"), "stop", "--force", "--grace-period", "0"],
                env=ray_env(),
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(self.dir, ignore_errors=True)

    def _ray(self, *args: str, boost: bool = False) -> None:
        """``ray ARGS``; ``boost``: its processes at a higher CPU priority (``start`` under a
        heavy load: a node's agents must import and report their ports within Ray's 15 s)."""
        done = subprocess.run(
            [*(["nice", "-n", "-10"] if boost else []), str(_BIN / "ray"), *args],
            env=ray_env(),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def worker_node_pids(self) -> set[int]:
        """Every process of the worker node: those started with its temp dir, and all their
        descendants (its actors, their Playwright drivers and Chromiums)."""
        return self.node_pids("w")

    def node_pids(self, node: str) -> set[int]:
        """Every process started with ``self.dir / node`` in its command line, and all their
        descendants."""
        parents: dict[int, int] = {}
        roots: set[int] = set()
        mark = str(self.dir / node)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            pid = int(entry.name)
            parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
            if mark in cmdline:
                roots.add(pid)
        found = set(roots)
        grew = True
        while grew:
            grew = False
            for pid, parent in parents.items():
                if parent in found and pid not in found:
                    found.add(pid)
                    grew = True
        return found

    def kill_worker_node(self) -> int:
        """kill -9 every process of the worker node; returns how many."""
        pids = self.worker_node_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def node_of(self, pid: int) -> str | None:
        """ "head" or "worker": the node whose logs name a worker process with this pid."""
        for node in ("h", "w"):
            if any((self.dir / node).glob(f"session_*/logs/worker-*-{pid}.out")):
                return "head" if node == "h" else "worker"
        return None


def _kill_and_reap_all(timeout: float = 30) -> None:
    """As the init of a pid namespace: SIGKILL every other process, again until none is left
    (one may have forked meanwhile), reaping each."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != 1:
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child left, dead or alive
        time.sleep(0.02)


class Gate:
    """A responder that holds each answer of ``inner`` until ``release()``: a test sees the
    sessions it needs in flight (on a node, of a recorder), acts, then lets them all go on."""

    def __init__(self, inner: Responder, hold_s: float = 300) -> None:
        self.inner, self.hold_s = inner, hold_s
        self._open = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        self._open.wait(self.hold_s)
        return self.inner(request)

    def release(self) -> None:
        self._open.set()

    def close(self) -> None:
        self.release()
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


def held_server() -> tuple[ModelServer, Gate]:
    """A not-yet-started MiniWoB expert server (as uitars) whose answers wait for its gate."""
    gate = Gate(make_responder("miniwob", "uitars"))
    return ModelServer(gate, models=("ownloop-miniwob-uitars",)), gate


def wait_for(what: str, check: Any, timeout: float = 120) -> Any:
    """``check()``'s first truthy value, polled every 0.1 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {what} after {timeout}s")
