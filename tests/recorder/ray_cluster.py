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
        common = ["--num-cpus", str(self.cpus), "--disable-usage-stats"]
        try:
            self._ray(
                "start",
                "--head",
                "--port",
                str(PORT),
                "--temp-dir",
                str(self.dir / "h"),
                "--include-dashboard=false",
                *common,
            )
            self._ray(
                "start", "--address", self.address, "--temp-dir", str(self.dir / "w"), *common
            )
        except BaseException as exc:  # noqa: BLE001 - raised again by wait_up
            self._failed = f"{exc}"

    def __exit__(self, *exc: object) -> None:
        self._started.join()
        if os.getpid() == 1:
            # The init of this pid namespace, where only this module's tests ran: every other
            # process in it is the cluster's (its daemons, their workers), SIGKILLed at once as
            # the kernel would at our exit. ``ray stop`` takes ~7 s to do the same.
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and int(entry.name) != 1:
                    try:
                        os.kill(int(entry.name), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        else:
            # SIGKILL, and no grace period: ray would wait out all of its 16 s for zombies
            subprocess.run(
                [str(_BIN / "ray"), "stop", "--force", "--grace-period", "0"],
                env=ray_env(),
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(self.dir, ignore_errors=True)

    def _ray(self, *args: str) -> None:
        done = subprocess.run(
            [str(_BIN / "ray"), *args], env=ray_env(), capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def worker_node_pids(self) -> set[int]:
        """Every process of the worker node: those started with its temp dir, and all their
        descendants (its actors, their Playwright drivers and Chromiums)."""
        parents: dict[int, int] = {}
        roots: set[int] = set()
        mark = str(self.dir / "w")
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


def wait_for(what: str, check: Any, timeout: float = 120) -> Any:
    """``check()``'s first truthy value, polled every 0.1 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {what} after {timeout}s")
