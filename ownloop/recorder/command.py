"""``ownloop record``: from command-line options to a finished (or resumed) run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ownloop.agents import released_notice, released_texts
from ownloop.agents.options import parse_overrides
from ownloop.recorder.episode import EpisodeLimits
from ownloop.recorder.progress import RunProgress
from ownloop.recorder.runner import RecordOptions, RunSummary, record
from ownloop.recorder.suites import SuiteSource, load_suite
from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.ledger import mixed_budgets
from ownloop.store.queries import sql_command
from ownloop.store.scores import score_line

__all__ = [
    "EXIT_FAILED",
    "EXIT_STOPPED",
    "agent_options",
    "exit_code",
    "record_from_options",
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


def record_from_options(
    store: Store,
    agent: str,
    options: dict[str, Any],
    argv: tuple[str, ...],
    notify: Callable[[str], None] = lambda line: None,
) -> RunSummary:
    """Run ``ownloop record`` with the parsed options; ``summary_text`` says how it went.
    ``notify`` gets notice lines: the agent's released prompt text was not found, an endpoint of
    a pool does not answer."""
    if bool(options["suite"]) == bool(options["tasks_file"]):
        raise OwnloopError("give exactly one of --suite (e.g. miniwob) or --tasks FILE")
    texts = released_texts(agent, options.get("released"))
    notice = released_notice(agent, texts)
    if notice:
        notify(notice)
    record_options = RecordOptions(
        agent=agent,
        endpoint=options["endpoint"][0],
        endpoints=tuple(options["endpoint"]),
        model=options["model"],
        api_key=options["api_key"],
        agent_options=agent_options(agent, options["agent_option"], options["frequency_penalty"]),
        released=texts,
        run_id=options["run_id"],
        workers=options["workers"],
        limits=EpisodeLimits(options["max_steps"], options["timeout"]),
        error_retries=options["error_retries"],
        settle_s=options["settle"],
        chromium=options["chromium"],
        call_retries=options["retries"],
        call_retry_wait_s=options["retry_wait"],
        call_timeout_s=options["call_timeout"],
        require_clean=options.get("require_clean", False),
        expect_suite=options.get("expect_suite"),
        argv=argv,
        allow_hosts=tuple(options.get("allow_host") or ()),
        max_endpoint_errors=options.get("max_endpoint_errors", 3),
        repeats=options.get("repeat") or 1,
        limit=options.get("limit"),
        executor=options.get("executor") or "threads",
        ray_address=options.get("ray_address"),
        desktops=tuple(options.get("desktop") or ()),
        reset=options.get("reset"),
        a11y=bool(options.get("a11y")),
        keep_png=bool(options.get("keep_png")),
        suite_source=SuiteSource(
            options["suite"],
            str(Path(options["tasks_file"]).resolve()) if options["tasks_file"] else None,
            options["base"],
            options["seeds"],
        ),
    )
    progress = RunProgress(max_steps=options["max_steps"])
    with load_suite(
        suite=options["suite"],
        tasks_file=options["tasks_file"],
        base=options["base"],
        seeds=options["seeds"],
    ) as suite:
        try:
            summary = record(
                store,
                suite,
                record_options,
                on_start=progress.on_start,
                on_result=progress.on_result,
                on_step=progress.on_step,
                on_notice=notify,
            )
        finally:
            progress.close()
    return summary
