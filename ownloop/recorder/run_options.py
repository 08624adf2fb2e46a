"""What a run is told (``RecordOptions``, built by the CLI or a Python caller) and what it
tells back (``RunSummary``), shared by the runner and both executors (threads, Ray)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ownloop.agents.released import Released
from ownloop.recorder.episode import EpisodeLimits, EpisodeResult
from ownloop.store.compactor import CompactionEnd
from ownloop.store.scrub import scrub_text
from ownloop.world.suites import Suite, SuiteSource

if TYPE_CHECKING:
    from ownloop.agents.base import Agent
    from ownloop.store import Store
    from ownloop.store.claims import Claims
    from ownloop.store.events import Task
    from ownloop.store.journal import StreamWriter

__all__ = ["Executor", "RecordOptions", "RunSummary", "RunWork", "redact_argv"]

_SECRET_FLAGS = ("--api-key",)


class RecordOptions(NamedTuple):
    agent: str
    endpoint: str
    model: str
    api_key: str | None = None
    agent_options: dict[str, Any] = {}
    released: Released | None = None  # prompt texts read from a clone (agents.released_texts)
    run_id: str | None = None
    workers: int = 2
    limits: EpisodeLimits = EpisodeLimits()
    error_retries: int | None = None  # None: the agent's default
    settle_s: float = 1.0
    chromium: str | None = None
    call_retries: int = 3
    call_retry_wait_s: float = 5.0
    call_timeout_s: float = 120.0
    require_clean: bool = False  # refuse a checkout with uncommitted changes
    expect_suite: str | None = None  # refuse a suite whose sha256 is another
    argv: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()  # --allow-host: host globs the model may navigate to
    max_endpoint_errors: int = 3  # stop after this many endpoint_error sessions in a row; 0: never
    endpoints: tuple[str, ...] = ()  # --endpoint given several times: the pool (endpoint first)
    executor: str = "threads"  # or "ray": sessions on Ray actors (ownloop.recorder.ray_executor)
    ray_address: str | None = None  # --ray-address: "auto", HOST:PORT; None: $RAY_ADDRESS or local
    suite_source: SuiteSource | None = None  # how a Ray actor loads the same suite
    repeats: int = 1  # --repeat N: each task N times (repeats 1..N), each its own scored unit
    limit: int | None = None  # --limit N: only the suite's first N tasks (in the suite's order)
    desktops: tuple[str, ...] = ()  # --desktop URL (repeatable): the desktop world; workers = these
    reset: str | None = None  # --reset CMD: a host command before each desktop task ({url})
    a11y: bool = False  # --a11y: keep each desktop step's accessibility tree as a blob
    keep_png: bool = False  # --keep-png: screenshots stay the browser's PNG bytes (no compaction)
    compact_wait_s: float | None = None  # the run's end waits this long for the compaction
    # (None: $OWNLOOP_COMPACT_WAIT, else not at all), then hands it off


class RunSummary(NamedTuple):
    run_id: str
    results: list[EpisodeResult]
    skipped: int
    crashed: int
    seconds: float
    interrupted: bool
    elsewhere: int = 0  # tasks another recorder of the run did meanwhile
    fatal: str = ""  # why the run stopped early (no browser, the endpoint failing), if it did
    not_started: int = 0  # tasks left for a resume when the run stopped early
    workers_lost: int = 0  # Ray actors that died (their node or process), each replaced once
    compaction: CompactionEnd | None = None  # the screenshots' background compaction at the end

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.results))


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """argv with secret values replaced, for RunStarted: the values of secret flags, and every
    credential form inside any argument (``user:pw@`` in URLs, tokens; see ownloop.store.scrub)."""
    argv = [scrub_text(arg) for arg in argv]
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in _SECRET_FLAGS:
            if eq:
                out.append(f"{flag}=***")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return tuple(out)


class RunWork(NamedTuple):
    """What the runner hands an executor, after admission and ``RunStarted``: the units left
    (task, repeat), where the run stood, and whom to tell. The executor returns the run's
    ``RunSummary``; the runner writes ``RunEnded`` from it."""

    store: Store
    suite: Suite
    agent: Agent
    options: RecordOptions
    run_id: str
    todo: Sequence[tuple[Task, int]]  # (task, repeat) units not yet done
    skipped: int  # units done before this recorder started
    crashed: int  # sessions this recorder marked crashed as it started
    attempts: dict[tuple[str, int], int]  # (task id, repeat) -> the highest attempt so far
    claims: Claims
    run_stream: StreamWriter
    begun: float  # time.monotonic() at the run's start
    on_start: Callable[[str, int, int], None]
    on_result: Callable[[EpisodeResult], None]
    on_step: Callable[[str, str, int, str], None] | None = None


Executor = Callable[[RunWork], RunSummary]
"""An executor (threads: ``threads.run_on_threads``; Ray: ``ray_executor.run_on_ray``)."""
