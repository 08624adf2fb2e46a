"""``ownloop record``: from command-line options to a finished (or resumed) run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ownloop.agents import released_notice, released_texts
from ownloop.agents.options import parse_overrides
from ownloop.recorder.episode import EpisodeLimits
from ownloop.recorder.progress import RunProgress
from ownloop.recorder.runner import RecordOptions, RunSummary, record
from ownloop.recorder.suites import load_suite
from ownloop.store import Store
from ownloop.store.errors import OwnloopError
from ownloop.store.ledger import mixed_budgets
from ownloop.store.queries import sql_command

__all__ = ["agent_options", "record_from_options", "summary_text"]


def agent_options(agent: str, pairs: tuple[str, ...],
                  frequency_penalty: float | None) -> dict[str, Any]:
    """``-o KEY=VALUE`` pairs as agent settings (the agent's options Struct reads the text)."""
    options: dict[str, Any] = dict(parse_overrides(pairs))
    if frequency_penalty is not None:
        options["frequency_penalty"] = frequency_penalty
    return options


def summary_text(summary: RunSummary, store: Store) -> str:
    """The closing lines of a run."""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(summary.counts().items()))
    lines = [f"run {summary.run_id}: {counts or 'nothing to do'} in {summary.seconds:.1f}s"]
    if summary.skipped:
        lines.append(f"{summary.skipped} tasks were done already")
    if summary.elsewhere:
        lines.append(f"{summary.elsewhere} tasks were done by another recorder of this run")
    if summary.fatal:
        lines.append(f"stopped early: {summary.fatal}")
    mixed = mixed_budgets(store, summary.run_id)
    if mixed:
        lines.append(mixed)
    if summary.crashed:
        lines.append(f"{summary.crashed} sessions left by a stopped recorder marked crashed")
    if summary.interrupted:
        lines.append("interrupted: run the same command again to finish the run")
    query = sql_command("select * from sessions where run_id = $run", run=summary.run_id)
    lines.append(f"store: {store.root}   query: {query}")
    return "\n".join(lines)


def record_from_options(store: Store, agent: str, options: dict[str, Any],
                        argv: tuple[str, ...],
                        notify: Callable[[str], None] = lambda line: None) -> RunSummary:
    """Run ``ownloop record`` with the parsed options; ``summary_text`` says how it went.
    ``notify`` gets the one notice line when the agent's released prompt text was not found."""
    if bool(options["suite"]) == bool(options["tasks_file"]):
        raise OwnloopError("give exactly one of --suite (e.g. miniwob) or --tasks FILE")
    texts = released_texts(agent, options.get("released"))
    notice = released_notice(agent, texts)
    if notice:
        notify(notice)
    record_options = RecordOptions(
        agent=agent, endpoint=options["endpoint"], model=options["model"],
        api_key=options["api_key"],
        agent_options=agent_options(agent, options["agent_option"], options["frequency_penalty"]),
        released=texts,
        run_id=options["run_id"], workers=options["workers"],
        limits=EpisodeLimits(options["max_steps"], options["timeout"]),
        error_retries=options["error_retries"], settle_s=options["settle"],
        chromium=options["chromium"], call_retries=options["retries"],
        call_retry_wait_s=options["retry_wait"], call_timeout_s=options["call_timeout"],
        require_clean=options.get("require_clean", False),
        expect_suite=options.get("expect_suite"),
        argv=argv, allow_hosts=tuple(options.get("allow_host") or ()))
    progress = RunProgress()
    with load_suite(suite=options["suite"], tasks_file=options["tasks_file"],
                    base=options["base"], seeds=options["seeds"]) as suite:
        try:
            summary = record(store, suite, record_options, on_start=progress.on_start,
                             on_result=progress.on_result)
        finally:
            progress.close()
    return summary
