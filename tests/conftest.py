"""Shared session-scoped fixtures: one Playwright driver, one headless Chromium, the test site.

Everything starts lazily, on the first test that asks for it, and stops at the end of the run.

- ``playwright``: a sync Playwright driver on the main thread.
- ``chromium``: one launched headless Chromium (``ownloop.world.chromium.launch``), shared by all
  tests; make a fresh context per test with ``new_session`` (or ``BrowserSession(chromium, ...)``
  closed in a ``finally``) so tests never see each other's cookies or pages.
- ``new_session``: a factory ``new_session(viewport=(1280, 800), **options) -> BrowserSession``;
  every session it made is closed after the test. Options are ``BrowserSession``'s keywords
  (``settle_s`` defaults to 0 here, so tests do not pause a second after each step).
- ``spawned``: a list a test appends the processes it starts to; any still running at the end
  is killed.
- ``site``: the test site of ``tests/site/server.py`` on 127.0.0.1 (``site.base`` is its URL).
- ``recorded_store``: the four agents recorded on two MiniWoB tasks, once per run (read only).
- ``new_agents_store``: qwen3vl, holo and glmv recorded so, and on two tasks of the test site
  (``tests/site/expert_tasks.json``), once per run (read only).
- ``uitars_store``: uitars and the MiniWoB expert on click-button and enter-text, run ``r1``,
  recorded once per run through the real CLI (read only: copy it to change it).
- ``ownloop_cache`` (autouse): ``$OWNLOOP_CACHE`` for the run, shared by the xdist workers.
- ``compaction_awaited`` (autouse): ``$OWNLOOP_COMPACT_WAIT=900``: every ``record`` waits for its
  background compaction in full.

"Once per run" is once per pytest session: the xdist workers share one recording (the first to
need it records it under a file lock, the other waits and copies it), see ``tests/once.py``.

Tests that use ``chromium`` or ``new_session`` are browser tests: mark them
``@pytest.mark.browser``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (derived from each test), so a landing is
# judged on what was tested before it, never on a new draw; HYPOTHESIS_PROFILE=explore draws new
# ones each run (a failure found so is kept in .hypothesis/ and tried first after).
settings.register_profile("stable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "stable"))

# Bytecode is cached whatever the environment says (PYTHONDONTWRITEBYTECODE=1 on some machines):
# without the cache pytest rewrites every test module's asserts at each worker's collection, and
# each `python -m ownloop` a test starts compiles the package again (0.7 s of CPU a process).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# The repository root, so ``tests.site`` imports however pytest was started (tests/ has no
# __init__.py, and a bare ``site`` would be the standard library's module).
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# desktop_server, desktop: the session's test desktop (ownloop serve-desktop).
from tests.desktop.fixtures import desktop, desktop_server  # noqa: E402, F401
from tests.once import recorded_once, session_folder  # noqa: E402
from tests.site.server import SiteServer, start_site  # noqa: E402

# The modules run longest first, by their measured seconds (tests/durations.json, refreshed from a
# full run's JUnit report by tests/ordering.py): xdist's --dist loadfile hands whole files to its
# workers in collection order, and a long file handed out last keeps one worker busy alone at the
# end.


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from tests.ordering import UNMEASURED_S, measured

    seconds = measured()
    items.sort(  # stable: a module's own tests keep their order
        key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], UNMEASURED_S)
    )


@pytest.fixture(scope="session", autouse=True)
def ownloop_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``$OWNLOOP_CACHE`` for the whole pytest session, one folder shared by the xdist workers
    and every process a test starts: the MiniWoB prompts and the expert's plans are read and
    made once a run, not once a test (the user's own cache is never read). A test that needs a
    cold cache sets its own (``monkeypatch.setenv``, or a subprocess's ``env``)."""
    folder = session_folder(tmp_path_factory) / "ownloop-cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OWNLOOP_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def compaction_awaited() -> Iterator[None]:
    """Every ``record`` of the session (and every process a test starts) waits for its
    background compaction in full (``$OWNLOOP_COMPACT_WAIT``, at the normal priority while it
    waits), so no test reads a store whose screenshots are still being compacted: a test sees
    what a user sees once the compaction is done. ``tests/store/test_compactor.py`` and
    ``test_record.py`` test the hand-off itself."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OWNLOOP_COMPACT_WAIT", "900")
        yield


@pytest.fixture(scope="session")
def playwright() -> Iterator[Any]:
    """A sync Playwright driver for the test process (main thread)."""
    from ownloop.world.chromium import start_playwright

    driver = start_playwright()
    yield driver
    driver.stop()


@pytest.fixture(scope="session")
def chromium(playwright: Any) -> Iterator[Any]:
    """One headless Chromium for the whole run, launched with ownloop's arguments."""
    from ownloop.world.chromium import launch

    browser = launch(playwright)
    yield browser
    browser.close()


@pytest.fixture
def new_session(chromium: Any) -> Iterator[Callable[..., Any]]:
    """A factory of fresh ``BrowserSession`` contexts on the shared Chromium, closed after use."""
    from ownloop.world.browser import BrowserSession

    made: list[BrowserSession] = []

    def make(viewport: tuple[int, int] = (1280, 800), **options: Any) -> BrowserSession:
        options.setdefault("settle_s", 0.0)
        session = BrowserSession(chromium, viewport, **options)
        made.append(session)
        return session

    yield make
    for session in made:
        session.close()


@pytest.fixture(scope="session")
def site() -> Iterator[SiteServer]:
    """The test site on 127.0.0.1 at an ephemeral port."""
    server = start_site()
    yield server
    server.stop()


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; any still running at the end is killed and reaped."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:  # else an unclosed-pipe ResourceWarning
                pipe.close()


RECORDED_AGENTS = ("uitars", "opencua", "fara7b", "molmoweb")
NEW_AGENTS = ("qwen3vl", "holo", "glmv")  # issue 31: tests/recorder/test_record_new_agents.py
SITE_TASKS = Path(__file__).with_name("site") / "expert_tasks.json"  # tasks that say their steps


def _record_at_once(
    root: Path,
    agents: tuple[str, ...],
    *extra: str,
    run_per_agent: bool = False,
    site_tasks: bool = False,
    site_options: dict[str, tuple[str, ...]] | None = None,
) -> Path:
    """``ownloop record`` of click-button and enter-text for each agent, all at once in
    subprocesses into one store ``root/store``, each against the MiniWoB expert answering in that
    agent's own grammar; the index is brought up to date before the store is handed out.

    ``site_tasks``: each agent also records ``SITE_TASKS`` on a test site of its own (stopped
    after) in the run ``AGENT-site``, against the same expert, at the same time, with the agent's
    ``site_options`` (``-o`` pairs) if any."""
    from contextlib import ExitStack

    from ownloop.agents import agent_options
    from ownloop.modelserver.endpoint import make_server
    from ownloop.store import open_store

    store = root / "store"
    with ExitStack() as servers:
        records = {}
        if site_tasks:
            test_site = start_site()
            servers.callback(test_site.stop)
        for agent in agents:
            url = servers.enter_context(make_server("miniwob", agent))
            options = ["-o", "pause=0"] if "pause" in agent_options(agent) else []
            run = ["--run", agent] if run_per_agent else []
            suites = [("", ["--suite", "miniwob:click-button,enter-text", *run])]
            if site_tasks:
                site_run = ["--run", f"{agent}-site", *(site_options or {}).get(agent, ())]
                suites.append(
                    ("-site", ["--tasks", str(SITE_TASKS), "--base", test_site.base, *site_run])
                )
            for suffix, suite in suites:
                records[agent + suffix] = _record_process(store, agent, url, suite, extra, options)
        try:
            outs = {agent: rec.communicate(timeout=300)[0] for agent, rec in records.items()}
        finally:  # a recorder left running would write into the store the next try records
            for rec in records.values():
                if rec.poll() is None:
                    rec.kill()
                    rec.wait(30)
    for agent, process in records.items():
        assert process.returncode == 0 and "2 finished" in outs[agent], (agent, outs[agent])
    open_store(store).sync()  # so that no reader has to write the index
    return store


def _record_process(
    store: Path,
    agent: str,
    url: str,
    suite: list[str],
    extra: tuple[str, ...],
    options: list[str],
) -> subprocess.Popen[str]:
    """One ``ownloop record AGENT`` of ``suite`` against the expert at ``url``, started."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ownloop",
            "--store",
            str(store),
            "record",
            agent,
            *suite,
            "--endpoint",
            url,
            "--model",
            "expert",
            "--settle",
            "0.1",
            "--workers",
            "1",
            "--released",
            str(store.parent / "no-clone"),
            *extra,
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # up to six recorders take the one store's index lock in turn (each bringing the index up
        # to date); on a loaded machine the wait can pass the default 60 s: wait as long as the
        # recording may take
        env={**os.environ, "OWNLOOP_LOCK_TIMEOUT": "300"},
    )


@pytest.fixture(scope="session")
def recorded_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with the four agents' runs of two MiniWoB tasks, each agent answering as the
    MiniWoB expert in its own grammar (browser tests only): the four ``ownloop record`` run at
    once, in subprocesses, into the one store (about 25 s instead of 50 one after another).
    Recorded once for the pytest session (shared by the xdist workers, see ``tests/once.py``):
    tests only read it (copy it with shutil.copytree to change it)."""
    return recorded_once(
        tmp_path_factory, "recorded", lambda root: _record_at_once(root, RECORDED_AGENTS)
    )


@pytest.fixture(scope="session")
def new_agents_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with the runs of ``NEW_AGENTS`` (qwen3vl, holo, glmv; each its own run named after
    it, at most 10 steps a session) on click-button and enter-text, and their runs ``AGENT-site``
    of the test site's sign-in and fill-cart (``SITE_TASKS``; holo with ``-o thinking=true``
    there, its MiniWoB run with the default false), the six recorded at once as
    ``recorded_store`` is, against the expert in each agent's grammar: two finished sessions a
    run. Recorded once for the pytest session; tests only read it (copy it to change it)."""
    return recorded_once(
        tmp_path_factory,
        "new-agents",
        lambda root: _record_at_once(
            root,
            NEW_AGENTS,
            "--max-steps",
            "10",
            run_per_agent=True,
            site_tasks=True,
            site_options={"holo": ("-o", "thinking=true")},
        ),
    )


def _record_uitars(root: Path) -> Path:
    from ownloop.modelserver.endpoint import make_server
    from ownloop.store import open_store

    store = root / "store"
    with make_server("miniwob", "uitars") as url:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ownloop",
                "--store",
                str(store),
                "record",
                "uitars",
                "--suite",
                "miniwob:click-button,enter-text",
                "--endpoint",
                url,
                "--model",
                "expert",
                "--run",
                "r1",
                "--settle",
                "0.1",
                "--workers",
                "2",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0 and "2 finished" in done.stdout, done.stdout + done.stderr
    open_store(store).sync()
    return store


@pytest.fixture(scope="session")
def uitars_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ownloop record uitars`` (a subprocess) of click-button and enter-text against the MiniWoB
    expert, run ``r1``, two workers: two finished sessions. Recorded once for the pytest session
    (~7 s; shared by the xdist workers, see ``tests/once.py``); tests that change a store copy
    this one with shutil.copytree."""
    return recorded_once(tmp_path_factory, "uitars", _record_uitars)
