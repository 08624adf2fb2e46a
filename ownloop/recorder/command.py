"""``ownloop record``: from command-line options to a finished (or resumed) run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ownloop.agents import released_notice
from ownloop.agents.options import parse_overrides
from ownloop.errors import OwnloopError
from ownloop.recorder.progress import RunProgress
from ownloop.recorder.runner import RecordOptions, RunSummary, record
from ownloop.store import Store
from ownloop.store.ledger import mixed_budgets
from ownloop.store.queries import sql_command
from ownloop.store.scores import score_line
from ownloop.world.suites import SuiteSource

__all__ = [
    "EXIT_FAILED",
    "EXIT_STOPPED",
    "agent_options",
    "exit_code",
    "record_run",
    "suite_source",
    "summary_text",
]

EXIT_FAILED = 3
"""``record``'s exit status when a session ended error, endpoint_error or crashed."""
EXIT_STOPPED = 4
"""``record``'s exit status when the run stopped early and left tasks for a resume."""
_FAILED = frozenset({"error", "endpoint_error", "env_error", "crashed"})


def agent_options(
    agent: str, pairs: tuple[str, ...], frequency_penalty: float | None
) -> dict[str, Any]:
    """``-o KEY=VALUE`` pairs as agent settings (the agent's options Struct reads the text)."""
    options: dict[str, Any] = dict(parse_overrides(pairs))
    if frequency_penalty is not None:
        options["frequency_penalty"] = frequency_penalty
    return options


def summary_text(summary: RunSummary, store: Store) -> str:
    """The closing lines of a run."""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(summary.counts().items()))
    lines = [f"run {summary.run_id}: {counts or 'nothing to do'} in {summary.seconds:.1f}s"]
    score = score_line(store, summary.run_id)
    if score:
        lines.append(score)
    if summary.skipped:
        lines.append(f"{summary.skipped} tasks were done already")
    if summary.elsewhere:
        lines.append(f"{summary.elsewhere} tasks were done by another recorder of this run")
    if summary.fatal:
        lines.append(f"stopped early: {summary.fatal}")
    if summary.not_started:
        lines.append(
            f"{summary.not_started} tasks not started: run the same command again to "
            "run them (and the sessions that did not end)"
        )
    mixed = mixed_budgets(store, summary.run_id)
    if mixed:
        lines.append(mixed)
    if summary.workers_lost:
        lines.append(
            f"{summary.workers_lost} Ray workers lost (a node or its process died); as many "
            "were asked for again (see: ray status)"
        )
    if summary.crashed:
        lines.append(f"{summary.crashed} sessions left by a stopped recorder marked crashed")
    if summary.interrupted:
        lines.append("interrupted: run the same command again to finish the run")
    if summary.compaction is not None and summary.compaction.summary():
        lines.append(summary.compaction.summary())
    query = sql_command("select * from sessions where run_id = $run", run=summary.run_id)
    lines.append(f"store: {store.root}   query: {query}")
    return "\n".join(lines)


def exit_code(summary: RunSummary) -> int:
    """``record``'s exit status: 0 every session ended with an outcome; 3 (EXIT_FAILED) some
    ended error, endpoint_error or crashed; 4 (EXIT_STOPPED) the run stopped early; 130
    interrupted. A run refused before it starts is an error (1)."""
    if summary.interrupted:
        return 130
    if summary.fatal:
        return EXIT_STOPPED
    return EXIT_FAILED if any(r.status in _FAILED for r in summary.results) else 0


def suite_source(
    suite: str | None, tasks_file: str | None, base: str | None, seeds: str | None
) -> SuiteSource:
    """``record``'s ``--suite`` / ``--tasks`` / ``--base`` / ``--seeds``, as given.

    Raises:
        OwnloopError: neither or both of a suite and a tasks file.
    """
    if bool(suite) == bool(tasks_file):
        raise OwnloopError("give exactly one of --suite (e.g. miniwob) or --tasks FILE")
    return SuiteSource(suite, tasks_file, base, seeds)


def record_run(
    store: Store, options: RecordOptions, notify: Callable[[str], None] = lambda line: None
) -> RunSummary:
    """Run ``ownloop record`` (``summary_text`` says how it went), the suite loaded from
    ``options.suite_source`` (``suite_source``), with progress on stderr. ``notify`` gets notice
    lines: the agent's released prompt text was not found, an endpoint of a pool does not
    answer."""
    notice = released_notice(options.agent, options.released)
    if notice:
        notify(notice)
    given = options.suite_source or SuiteSource()
    progress = RunProgress(max_steps=options.limits.max_steps)
    with given.load() as suite:
        try:
            return record(
                store,
                suite,
                # another process (a Ray actor) has another working directory
                options._replace(suite_source=given.absolute()),
                on_start=progress.on_start,
                on_result=progress.on_result,
                on_step=progress.on_step,
                on_notice=notify,
            )
        finally:
            progress.close()
